import { setTimeout as sleep } from 'node:timers/promises'
import type { Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { WebSocket } from 'ws'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { result, startTestGateway, type TestGateway } from './fixtures/gateway.js'

// What Base's own flashblocks-aware node (base/base, crates/execution/flashblocks: rpc/eth.rs, rpc/pubsub.rs,
// state_builder.rs) answers from pre-confirmed state, checked against flashgate on a real devnet.

const ZERO_HASH = `0x${'00'.repeat(32)}`

let devnet: Devnet
let database: TestDatabase
let gateway: TestGateway

type RpcObject = Record<string, unknown>

async function sealedReceipt(url: string, hash: string): Promise<RpcObject> {
  for (;;) {
    const receipt = await result<RpcObject | null>(url, 'eth_getTransactionReceipt', [hash])
    if (receipt !== null && receipt.blockHash !== ZERO_HASH) return receipt
    await sleep(50)
  }
}

/** Opens a socket to the gateway and subscribes; every notification's `result` is pushed to the list. */
async function subscribe(params: unknown[]): Promise<{ items: unknown[]; close: () => void }> {
  const socket = new WebSocket(gateway.url.replace('http', 'ws'))
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  const items: unknown[] = []
  const subscribed = new Promise<string>((resolve, reject) => {
    socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as { id?: number; result?: string; error?: unknown; params?: { result: unknown } }
      if (message.id === 1) message.error === undefined ? resolve(message.result!) : reject(new Error(JSON.stringify(message.error)))
      else if (message.params !== undefined) items.push(message.params.result)
    })
  })
  socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params }))
  await subscribed
  return { items, close: () => socket.close() }
}

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 100 })
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
  await gateway.ingester.waitForBlock(Number(await result<Hex>(devnet.rpcUrl, 'eth_blockNumber')), 10_000)
})

afterAll(async () => {
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
})

describe("parity with Base's flashblocks-aware node", () => {
  test('newFlashblocks sends the pending block with whole transactions (get_latest_block(true)), each as the sealed block has it', async () => {
    const subscription = await subscribe(['newFlashblocks'])
    try {
      const sender = DEV_ACCOUNTS[2]!.address
      const hash = await result<Hex>(devnet.rpcUrl, 'eth_sendTransaction', [{ from: sender, to: `0x${'9b'.repeat(20)}`, value: '0x5' }])
      const receipt = await sealedReceipt(devnet.rpcUrl, hash)
      type Notified = { number: string; transactions: (RpcObject | string)[] }
      let notified: Notified | undefined
      await expect
        .poll(() => {
          notified = (subscription.items as Notified[]).findLast((block) => block.number === receipt.blockNumber)
          return notified?.transactions.some((transaction) => typeof transaction === 'object' && transaction.hash === hash)
        })
        .toBe(true)
      const sealed = await result<{ transactions: RpcObject[] }>(devnet.rpcUrl, 'eth_getBlockByNumber', [receipt.blockNumber, true])
      const transactions = notified!.transactions as RpcObject[]
      for (const transaction of transactions) expect(typeof transaction).toBe('object')
      // Whole transactions, as the sealed block's apart from the block hash a pre-confirmation cannot know.
      const withoutBlockHash = ({ blockHash: _blockHash, ...rest }: RpcObject) => rest
      expect(transactions.map(withoutBlockHash)).toEqual(sealed.transactions.slice(0, transactions.length).map(withoutBlockHash))
    } finally {
      subscription.close()
    }
  })
})
