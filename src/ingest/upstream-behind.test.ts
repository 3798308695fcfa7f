import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import pino from 'pino'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { mineEmptyBlocks } from '../../test/fixtures/chain.js'
import { anvilCall } from '../../test/fixtures/sync.js'
import { createDb, type Db } from '../db/index.js'
import { type Anvil, startAnvil } from '../devnet/anvil.js'
import { createUpstream } from '../upstream/index.js'
import { createIngester, type Ingester } from './index.js'

// An upstream behind a load balancer can answer from a node a few blocks behind the one it answered before.

const POLL_INTERVAL_MS = 50
/** Long enough that a loaded machine's slow polls stay within it in the first test. */
const BEHIND_GRACE_MS = 8_000

let anvil: Anvil
let upstream: Awaited<ReturnType<typeof startLaggingUpstream>>
let db: Db
let ingester: Ingester
const reorgs: { ancestor: number; removedLogs: number }[] = []

beforeAll(async () => {
  anvil = await startAnvil()
  upstream = await startLaggingUpstream(anvil.rpcUrl)
  db = await createDb({ databaseUrl: 'memory://' })
  ingester = createIngester({
    db,
    upstream: createUpstream({ rpcUrl: upstream.url }),
    logger: pino({ level: 'silent' }),
    startBlock: 0,
    pollIntervalMs: POLL_INTERVAL_MS,
    registry: null,
    upstreamBehindGraceMs: BEHIND_GRACE_MS,
  })
  ingester.events.on('reorg', (event) => reorgs.push(event))
  ingester.start()
  await ingester.waitForBlock(0, 30_000)
}, 60_000)

afterAll(async () => {
  await ingester?.stop()
  await upstream?.stop()
  await db?.close()
  await anvil?.stop()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const mine = (blocks: number) => mineEmptyBlocks(anvil.rpcUrl, blocks)

test('an upstream that falls a few blocks behind is waited for, not taken for a reorg', async () => {
  await mine(6)
  await ingester.waitForBlock(6, 10_000)

  const laggingSince = Date.now()
  upstream.lagAt(3)
  await expect.poll(() => upstream.laggingAnswers, { timeout: 5_000 }).toBeGreaterThan(5)
  await sleep(500)
  // Well within the grace period: what is checked here is that nothing was rewound at once.
  expect(Date.now() - laggingSince).toBeLessThan(BEHIND_GRACE_MS)
  expect(reorgs).toEqual([])
  expect(ingester.status().head).toBe(6)

  upstream.lagAt(null)
  await mine(2)
  await ingester.waitForBlock(8, 10_000)
  expect(reorgs).toEqual([])
}, 30_000)

test('blocks the upstream drops without replacing them are taken back once it has stayed below them for the grace period', async () => {
  const snapshot = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
  await mine(3)
  await ingester.waitForBlock(11, 10_000)
  await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])

  await sleep(BEHIND_GRACE_MS / 2)
  expect(reorgs).toEqual([])
  expect(ingester.status().head).toBe(11)
  await expect.poll(() => reorgs, { timeout: BEHIND_GRACE_MS * 2 }).toEqual([{ ancestor: 8, removedLogs: 0 }])
  expect(ingester.status().head).toBe(8)
}, 30_000)

/** Blocks the upstream does not have while it lags: a block-number parameter above its head. */
const BLOCK_NUMBER_METHODS = new Set(['eth_getBlockByNumber', 'eth_getBlockReceipts', 'debug_traceBlockByNumber', 'trace_block'])

/**
 * A loopback JSON-RPC relay in front of the node that, with `lagAt(n)`, answers as a node whose head is block
 * `n`: `eth_blockNumber` is `n`, and blocks above it are not found.
 */
async function startLaggingUpstream(targetUrl: string) {
  let lagHead: number | null = null
  let laggingAnswers = 0
  type Call = { id: unknown; method: string; params?: unknown[] }
  async function answer(call: Call): Promise<unknown> {
    if (lagHead !== null) {
      if (call.method === 'eth_blockNumber') {
        laggingAnswers++
        return { jsonrpc: '2.0', id: call.id, result: `0x${lagHead.toString(16)}` }
      }
      const tag = call.params?.[0]
      if (BLOCK_NUMBER_METHODS.has(call.method) && typeof tag === 'string' && tag.startsWith('0x') && Number.parseInt(tag, 16) > lagHead)
        return { jsonrpc: '2.0', id: call.id, result: null }
    }
    const response = await fetch(targetUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(call) })
    return response.json()
  }
  const server = createServer((incoming, response) => {
    const chunks: Buffer[] = []
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk))
    incoming.on('end', async () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Call | Call[]
      const answers = Array.isArray(body) ? await Promise.all(body.map(answer)) : await answer(body)
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answers))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    lagAt(head: number | null) {
      lagHead = head
    },
    get laggingAnswers() {
      return laggingAnswers
    },
    async stop() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
