// The pending view after the chain goes back to a lower height (a devnet reverted to a snapshot, like
// `anvil_reset` or a reorg onto a shorter branch): the ingester rewinds, and within a block or two the
// pre-confirmed blocks are the new branch's, their answers equal to the sealed block's; in one process and in
// the workers of `serve --workers N`, whose pending state the primary relays.
import { EventEmitter, once } from 'node:events'
import type { Worker } from 'node:cluster'
import { pino } from 'pino'
import type { Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Gateway, startGateway } from '../src/app.js'
import { createClusterHub } from '../src/cluster/hub.js'
import { createClusterLink } from '../src/cluster/link.js'
import { serveConfigSchema } from '../src/config.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { result, startTestGateway, withoutBlockHash } from './fixtures/gateway.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'
import { until as waitUntil } from './fixtures/sync.js'

const BLOCK_TIME_MS = 500
const FLASHBLOCK_INTERVAL_MS = 100
/** Blocks the abandoned branch grows above the snapshot: the pending view had gone that far past the new head. */
const ABANDONED_BLOCKS = 8
/**
 * Once the ingester reports the rewind, the pending view is the new branch's within this: the block being built
 * then (its index 0 came before the report, and was taken for a stale one), then the next one's first
 * flashblock, with time to spare. It used to take the new branch's flashblocks for stale ones, answering
 * `pending` as `latest` (or with the old branch's block) until the new branch passed the old head.
 */
const FOLLOWS_WITHIN_MS = 4 * BLOCK_TIME_MS
const OLD_BRANCH_SENDER = DEV_ACCOUNTS[2]!.address
const SENDER = DEV_ACCOUNTS[1]!.address
const RECIPIENT = `0x${'5e'.repeat(20)}`

type Json = Record<string, unknown>

const quantity = (number: number) => `0x${number.toString(16)}`
/** Polled often: flashblocks come every 100 ms. */
const POLL_MS = 10
const pause = () => new Promise((resolve) => setTimeout(resolve, POLL_MS))
const until = (condition: () => Promise<boolean>, timeoutMs: number, what: () => string | Promise<string>) =>
  waitUntil(condition, timeoutMs, async () => `not within ${timeoutMs} ms: ${await what()}`, POLL_MS)

/**
 * Grows a branch of `ABANDONED_BLOCKS` blocks above a snapshot until `url` serves a pending block above it,
 * reverts the devnet to the snapshot, and once `ingesting` reports the rewind, expects `url` to pre-confirm the
 * new branch's blocks again; then a transfer it must show pre-confirmed (never sealed first), the answers
 * equal to the sealed block's.
 */
async function expectPendingFollowsLowerChain({ devnet, url, ingesting }: { devnet: Devnet; url: string; ingesting: Gateway }) {
  // One batch: the devnet runs its calls in order, no block sealed between them.
  const [snapshot, base] = await fetch(devnet.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(['evm_snapshot', 'eth_blockNumber'].map((method, id) => ({ jsonrpc: '2.0', id, method, params: [] }))),
  })
    .then((response) => response.json() as Promise<{ result: Hex }[]>)
    .then(([snapshotted, head]) => [snapshotted!.result, Number(head!.result)] as const)
  await result(devnet.rpcUrl, 'eth_sendTransaction', [{ from: OLD_BRANCH_SENDER, to: RECIPIENT, value: '0xde0b6b3a7640000' }])
  const staleHead = base + ABANDONED_BLOCKS
  const pendingNumber = async () => Number((await result<Json | null>(url, 'eth_getBlockByNumber', ['pending', false]))?.number ?? -1)
  await until(
    async () => (await pendingNumber()) > staleHead && Number(await result<Hex>(url, 'eth_blockNumber')) >= staleHead,
    ABANDONED_BLOCKS * BLOCK_TIME_MS * 4,
    () => `block ${staleHead} indexed and a pending block above it`,
  )

  const rewound = once(ingesting.ingester.events, 'reorg')
  expect(await result(devnet.rpcUrl, 'evm_revert', [snapshot])).toBe(true)
  const [{ ancestor }] = (await rewound) as [{ ancestor: number }]
  expect(ancestor).toBe(base)
  // Pre-confirmed (above the head read after it) and of the new branch (not above the old head).
  let shown = -1
  let head = -1
  await until(
    async () => {
      shown = await pendingNumber()
      head = Number(await result<Hex>(url, 'eth_blockNumber'))
      return shown > head && shown <= staleHead
    },
    FOLLOWS_WITHIN_MS,
    () => `the pending view is still block ${shown} (the index at ${head}, the old branch's head ${staleHead})`,
  )

  const nonce = Number(await result<Hex>(devnet.rpcUrl, 'eth_getTransactionCount', [SENDER, 'latest']))
  const hash = await result<Hex>(devnet.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: RECIPIENT, value: '0x7' }])
  let pendingBlock: Json | null = null
  await until(
    async () => {
      const block = await result<Json>(url, 'eth_getBlockByNumber', ['pending', true])
      const transaction = (block.transactions as Json[]).find((candidate) => candidate.hash === hash)
      if (transaction === undefined) return false
      expect(transaction.blockHash, `sealed in block ${Number(block.number)} without ever being pre-confirmed`).toBeNull()
      pendingBlock = block
      return true
    },
    FOLLOWS_WITHIN_MS,
    async () => `the transfer was not pre-confirmed; its receipt: ${JSON.stringify(await result(url, 'eth_getTransactionReceipt', [hash]))}`,
  )
  const number = Number(pendingBlock!.number)
  // Balances and nonces are the same whether the block seals during these reads or not: no other traffic.
  const [pendingNonce, pendingBalances, pendingReceipt] = await Promise.all([
    result<Hex>(url, 'eth_getTransactionCount', [SENDER, 'pending']),
    Promise.all([SENDER, RECIPIENT].map((account) => result<Hex>(url, 'eth_getBalance', [account, 'pending']))),
    (async () => {
      for (;;) {
        const receipt = await result<Json | null>(url, 'eth_getTransactionReceipt', [hash])
        if (receipt !== null) return receipt
        await pause()
      }
    })(),
  ])
  expect(Number(pendingNonce)).toBe(nonce + 1)

  await until(
    async () => Number(await result<Hex>(url, 'eth_blockNumber')) >= number,
    10 * BLOCK_TIME_MS,
    () => `block ${number} indexed`,
  )
  const at = quantity(number)
  const [sealedBlock, sealedNonce, sealedBalances, sealedReceipt] = await Promise.all([
    result<Json>(url, 'eth_getBlockByNumber', [at, true]),
    result<Hex>(url, 'eth_getTransactionCount', [SENDER, at]),
    Promise.all([SENDER, RECIPIENT].map((account) => result<Hex>(url, 'eth_getBalance', [account, at]))),
    result<Json>(url, 'eth_getTransactionReceipt', [hash]),
  ])
  expect(sealedBlock.hash).toBe((await result<Json>(devnet.rpcUrl, 'eth_getBlockByNumber', [at, false])).hash)
  for (const field of ['number', 'parentHash', 'timestamp', 'miner', 'baseFeePerGas']) expect(pendingBlock![field], field).toEqual(sealedBlock[field])
  expect((pendingBlock!.transactions as Json[]).map(withoutBlockHash)).toEqual((sealedBlock.transactions as Json[]).map(withoutBlockHash))
  expect(pendingNonce).toBe(sealedNonce)
  expect(pendingBalances).toEqual(sealedBalances)
  expect(withoutBlockHash(pendingReceipt)).toEqual(withoutBlockHash(sealedReceipt))
}

async function startFastDevnet() {
  return startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: BLOCK_TIME_MS, flashblockIntervalMs: FLASHBLOCK_INTERVAL_MS })
}

describe('pending view after the chain goes back to a lower height', () => {
  let devnet: Devnet
  let database: TestDatabase
  let gateway: Gateway & { dedicatedUrl: string }

  beforeAll(async () => {
    ;[devnet, database] = await Promise.all([startFastDevnet(), createTestDatabase()])
    gateway = await startTestGateway({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
  })

  afterAll(async () => {
    await gateway?.stop()
    await devnet?.stop()
    await database?.drop()
  })

  test('new blocks at heights the old branch had are pre-confirmed again, and equal the sealed ones', async () => {
    await expectPendingFollowsLowerChain({ devnet, url: gateway.dedicatedUrl, ingesting: gateway })
  })
})

/**
 * A primary and one worker of `serve --workers N` in this process, the worker's IPC channel a pair of
 * in-memory emitters (messages structured-cloned, in order, as node:cluster's `advanced` serialisation does).
 */
async function startInProcessCluster({ upstreamRpc, flashblocksWs, databaseUrl }: { upstreamRpc: string; flashblocksWs: string; databaseUrl: string }) {
  const logger = pino({ level: 'silent' })
  const config = serveConfigSchema.parse({ port: 0, logLevel: 'silent', startBlock: '0', publicRateLimit: 0, upstreamRpc, flashblocksWs, databaseUrl })
  let primary: Gateway | null = null
  const hub = createClusterHub({ logger, status: () => primary!.primaryStatus(), ownMetrics: async () => [] })
  primary = await startGateway({ config, logger, cluster: { kind: 'primary', hub } })
  const toWorker = new EventEmitter()
  const worker = Object.assign(new EventEmitter(), {
    id: 1,
    isConnected: () => true,
    send(message: unknown, _handle: unknown, sent?: (error: Error | null) => void) {
      setImmediate(() => {
        toWorker.emit('message', structuredClone(message))
        sent?.(null)
      })
      return true
    },
  })
  hub.add(worker as unknown as Worker)
  const link = createClusterLink({
    workerId: 1,
    send: (message) => setImmediate(() => worker.emit('message', structuredClone(message))),
    receive: (listener) => toWorker.on('message', listener),
  })
  const serving = await startGateway({ config, logger, cluster: { kind: 'worker', link } })
  link.post({ fg: 'listening', port: serving.port })
  return {
    primary,
    worker: serving,
    async stop() {
      await serving.stop()
      hub.close()
      await primary?.stop()
    },
  }
}

describe.skipIf(!SHARED_POSTGRES_AVAILABLE)('serve --workers: the rewind reaches the workers', () => {
  let devnet: Devnet
  let database: TestDatabase
  let cluster: Awaited<ReturnType<typeof startInProcessCluster>>

  beforeAll(async () => {
    ;[devnet, database] = await Promise.all([startFastDevnet(), createSharedPostgresDatabase()])
    cluster = await startInProcessCluster({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
  })

  afterAll(async () => {
    await cluster?.stop()
    await devnet?.stop()
    await database?.drop()
  })

  test("a worker's pending view follows the new branch as its primary's does", async () => {
    await expectPendingFollowsLowerChain({ devnet, url: cluster.worker.url, ingesting: cluster.primary })
  })
})
