import { parentPort } from 'node:worker_threads'
import type { Hex } from 'viem'
import type { DecodeReply, DecodeRequest } from './decode-pool.js'
import { decodePendingTransaction } from './transactions.js'

// A decoding thread of the pool (decode-pool.ts): decodes the raw transactions it is sent and recovers their
// senders, answering each one's transaction or the message of the error that refused it.
parentPort!.on('message', async ({ id, raws }: DecodeRequest) => {
  const results = await Promise.all(
    raws.map((raw: Hex) =>
      decodePendingTransaction(raw).then(
        (transaction) => ({ transaction }),
        (error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }),
      ),
    ),
  )
  parentPort!.postMessage({ id, results } satisfies DecodeReply)
})
// Loaded: the pool may send work.
parentPort!.postMessage({ ready: true })
