// Two serving processes on one Postgres and one Redis (`--redis-url`) act as one gateway: a client is rate
// limited once across both, a key revoked through one is refused by the other at once, and a transaction
// forwarded through one counts in the other's pending nonce at once (issue 14), and a filter installed through
// one is polled through either. Without Redis each process limits alone, as before.
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { type Hex, parseGwei } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { keysCommand } from '../src/cli/keys.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import type { TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'
import { waitForSameHead } from './fixtures/sync.js'

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
/** The public rate: high enough that one second's burst dwarfs what refills while a test's requests fly. */
const RATE = 10
/**
 * Flashblocks far apart, so that between a send and the read that follows it (milliseconds) no flashblock
 * shows the transaction: what the other process answers then comes from Redis alone.
 */
const BLOCK_TIME_MS = 4_000
const FLASHBLOCK_INTERVAL_MS = 2_000
const CHAIN_ID = 31337
/** The sender of the forwarding test; no other test here sends from it. */
const SENDER = DEV_ACCOUNTS[3]!
/** A revocation is pushed: the other process refuses the key within this (its key cache alone lasts 2 s). */
const REVOCATION_PUSHED_WITHIN_MS = 500

const postgresAvailable = SHARED_POSTGRES_AVAILABLE
if (!postgresAvailable) console.warn('redis-shared: skipped, two processes need one Postgres (set DATABASE_URL, or install the PostgreSQL server binaries)')

let devnet: Devnet
let database: TestDatabase
const redisPrefix = `flashgate-test:${randomUUID()}:`
/** Two processes sharing Redis, and two without it; all four on one database. */
let shared: [TestGateway, TestGateway]
let alone: [TestGateway, TestGateway]
let clients = 0
const freshClient = () => `10.14.${Math.floor(++clients / 250)}.${clients % 250}`

type Answer = { status: number; headers: Headers; body: any }

async function post(url: string, body: unknown, from: string): Promise<Answer> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': from }, body: JSON.stringify(body) })
  return { status: response.status, headers: response.headers, body: await response.json() }
}

const call = (method: string, params: unknown[] = [], id = 1) => ({ jsonrpc: '2.0', id, method, params })
const batchOf = (size: number) => Array.from({ length: size }, (_, id) => call('eth_chainId', [], id))

async function pendingNonce(gateway: TestGateway): Promise<number> {
  const answer = await rpc(gateway.url, 'eth_getTransactionCount', [SENDER.address, 'pending'])
  if (answer.error) throw new Error(`eth_getTransactionCount: ${answer.error.message}`)
  return Number(answer.result)
}

async function send(gateway: TestGateway, nonce: number): Promise<Hex> {
  const raw = await SENDER.signTransaction({
    type: 'eip1559',
    chainId: CHAIN_ID,
    nonce,
    to: DEV_ACCOUNTS[4]!.address,
    value: 1n,
    gas: 21_000n,
    maxFeePerGas: parseGwei('20'),
    maxPriorityFeePerGas: parseGwei('1'),
  })
  const answer = await rpc(gateway.url, 'eth_sendRawTransaction', [raw])
  if (answer.error) throw new Error(`eth_sendRawTransaction: ${answer.error.message}`)
  return answer.result as Hex
}

beforeAll(async () => {
  if (!postgresAvailable) return
  ;[devnet, database] = await Promise.all([
    startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: BLOCK_TIME_MS, flashblockIntervalMs: FLASHBLOCK_INTERVAL_MS }),
    createSharedPostgresDatabase(),
  ])
  const start = (redis: boolean) =>
    startTestGateway({
      upstreamRpc: devnet.rpcUrl,
      databaseUrl: database.databaseUrl,
      trustProxy: true,
      publicRateLimit: RATE,
      ...(redis && { redisUrl: REDIS_URL, redisPrefix }),
    })
  // One at a time: the first one migrates the database.
  const first = await start(true)
  shared = [first, await start(true)]
  alone = [await start(false), await start(false)]
  for (const gateway of [...shared, ...alone]) await waitForSameHead(gateway, devnet.rpcUrl)
})

afterAll(async () => {
  for (const gateway of [...(shared ?? []), ...(alone ?? [])]) await gateway.stop()
  await database?.drop()
  await devnet?.stop()
  const redis = new Redis(REDIS_URL)
  const keys = await redis.keys(`${redisPrefix}*`)
  if (keys.length > 0) await redis.del(...keys)
  await redis.quit()
})

describe.runIf(postgresAvailable)('with --redis-url, two serving processes act as one', () => {
  test('a client hitting both is limited once: the debt of a batch on one process is owed on the other', async () => {
    const from = freshClient()
    const [a, b] = shared
    // Twice the burst in one batch: admitted (the bucket was full), leaving a debt of RATE calls.
    expect((await post(a.url, batchOf(2 * RATE), from)).status).toBe(200)
    const refused = await post(b.url, call('eth_chainId'), from)
    expect(refused.status).toBe(429)
    expect(refused.body).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32005, message: expect.stringMatching(/rate limit exceeded/) } })
    // ceil((1 + RATE) / RATE) = 2 s to repay, as one process alone would say.
    expect(refused.headers.get('retry-after')).toBe('2')
    expect((await post(a.url, call('eth_chainId'), from)).status).toBe(429)
    // Another client is not affected.
    expect((await post(b.url, call('eth_chainId'), freshClient())).status).toBe(200)
  })

  test('requests spread over both processes: the sum admitted respects the rate', async () => {
    const from = freshClient()
    const started = Date.now()
    const answers = await Promise.all(Array.from({ length: 3 * RATE }, (_, i) => post(shared[i % 2]!.url, call('eth_chainId', [], i), from)))
    const elapsedSeconds = (Date.now() - started) / 1000
    const admitted = answers.filter((answer) => answer.status === 200).length
    expect(answers.filter((answer) => answer.status === 429)).toHaveLength(answers.length - admitted)
    // One burst, plus what refilled while the requests were in flight; each process alone would admit a burst.
    expect(admitted).toBeGreaterThanOrEqual(RATE)
    expect(admitted).toBeLessThanOrEqual(RATE + Math.ceil(elapsedSeconds * RATE) + 1)
    // Fewer than two processes limiting alone would admit in the same time: a burst and a refill each. (On a
    // loaded machine the 30 requests can take over a second, and the refill with them.)
    expect(admitted).toBeLessThan(2 * (RATE + Math.floor(elapsedSeconds * RATE)))
  })

  test("a dedicated key's own rate holds across both processes", async () => {
    const { key } = await shared[0].resolvers.createApiKey({ name: `slow-${randomUUID()}`, policy: 'dedicated', rateLimit: 3 })
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => post(`${shared[i % 2]!.url}/rpc/${key}`, call('eth_chainId', [], i), freshClient())))
    const admitted = answers.filter((answer) => answer.status === 200).length
    expect(admitted).toBeGreaterThanOrEqual(3)
    expect(admitted).toBeLessThan(6)
  })

  test('a key revoked through one process is refused by the other at once, well within 2 s', async () => {
    const [a, b] = shared
    const name = `revoked-${randomUUID()}`
    const { key } = await a.resolvers.createApiKey({ name, policy: 'dedicated', rateLimit: 0 })
    // Both processes have the key cached as live.
    for (const gateway of shared) expect((await post(`${gateway.url}/rpc/${key}`, call('eth_blockNumber'), freshClient())).status).toBe(200)
    const revokedAt = Date.now()
    await a.resolvers.revokeApiKey(name)
    await expect
      .poll(async () => (await post(`${b.url}/rpc/${key}`, call('eth_blockNumber'), freshClient())).status, { timeout: 5_000, interval: 20 })
      .toBe(401)
    expect(Date.now() - revokedAt).toBeLessThan(REVOCATION_PUSHED_WITHIN_MS)
    expect((await post(`${a.url}/rpc/${key}`, call('eth_blockNumber'), freshClient())).status).toBe(401)
  })

  test('flashgate keys revoke with --redis-url reaches every serving process at once', async () => {
    const name = `cli-${randomUUID()}`
    const { key } = await shared[0].resolvers.createApiKey({ name, policy: 'dedicated', rateLimit: 0 })
    for (const gateway of shared) expect((await post(`${gateway.url}/rpc/${key}`, call('eth_blockNumber'), freshClient())).status).toBe(200)
    const revokedAt = Date.now()
    const printed: string[] = []
    await keysCommand({
      action: 'revoke',
      argument: name,
      flags: { 'database-url': database.databaseUrl, 'redis-url': REDIS_URL, 'redis-prefix': redisPrefix },
      env: {},
      print: (line) => printed.push(line),
      inform: () => {},
    })
    expect(printed[0]).toMatch(/ revoked /)
    for (const gateway of shared)
      await expect
        .poll(async () => (await post(`${gateway.url}/rpc/${key}`, call('eth_blockNumber'), freshClient())).status, { timeout: 5_000, interval: 20 })
        .toBe(401)
    expect(Date.now() - revokedAt).toBeLessThan(REVOCATION_PUSHED_WITHIN_MS + 1_000)
  })

  test("a transaction forwarded through one process counts in the other's pending nonce at once", async () => {
    const [a, b] = shared
    const first = await pendingNonce(b)
    await send(a, first)
    expect(await pendingNonce(b)).toBe(first + 1)
    await send(b, first + 1)
    expect(await pendingNonce(a)).toBe(first + 2)
    // Once sealed and indexed, the chain's own count takes over: nothing is counted twice.
    const sealed = async (gateway: TestGateway) => Number((await rpc(gateway.url, 'eth_getTransactionCount', [SENDER.address, 'latest'])).result)
    for (const gateway of shared) await expect.poll(() => sealed(gateway), { timeout: 4 * BLOCK_TIME_MS, interval: 100 }).toBe(first + 2)
    for (const gateway of shared) expect(await pendingNonce(gateway)).toBe(first + 2)
  })

  test('a filter installed through one process is polled through both, each block once; without Redis the other does not know it', async () => {
    const [a, b] = shared
    // Each call from a client address of its own: the polls alone would pass the public rate, shared by both processes.
    const rpc = async (url: string, method: string, params: unknown[] = []) => (await post(url, call(method, params), freshClient())).body
    const id = (await rpc(a.url, 'eth_newBlockFilter')).result as string
    const start = Number((await rpc(a.url, 'eth_blockNumber')).result)
    const hashes: string[] = []
    const poll = async (gateway: TestGateway) => {
      const answer = await rpc(gateway.url, 'eth_getFilterChanges', [id])
      expect(answer.error).toBeUndefined()
      hashes.push(...(answer.result as string[]))
      return hashes.length
    }
    await expect.poll(() => poll(hashes.length % 2 === 0 ? b : a), { timeout: 4 * BLOCK_TIME_MS, interval: 100 }).toBeGreaterThanOrEqual(2)
    await poll(a)
    await poll(b)
    const numbers = await Promise.all(
      hashes.map(async (hash) => Number(((await rpc(b.url, 'eth_getBlockByHash', [hash, false])).result as { number: string }).number)),
    )
    expect(numbers).toEqual(numbers.map((_, offset) => numbers[0]! + offset))
    expect(numbers[0]).toBeLessThanOrEqual(start + 1)
    expect((await rpc(b.url, 'eth_uninstallFilter', [id])).result).toBe(true)
    expect((await rpc(a.url, 'eth_getFilterChanges', [id])).error).toEqual({ code: -32000, message: 'filter not found' })

    const [c, d] = alone
    const local = (await rpc(c.url, 'eth_newBlockFilter')).result as string
    expect((await rpc(c.url, 'eth_getFilterChanges', [local])).error).toBeUndefined()
    expect((await rpc(d.url, 'eth_getFilterChanges', [local])).error).toEqual({ code: -32000, message: 'filter not found' })
  })
})

describe.runIf(postgresAvailable)('without --redis-url each process limits alone', () => {
  test('the debt of a batch on one process is not owed on the other', async () => {
    const from = freshClient()
    const [c, d] = alone
    expect((await post(c.url, batchOf(2 * RATE), from)).status).toBe(200)
    expect((await post(c.url, call('eth_chainId'), from)).status).toBe(429)
    expect((await post(d.url, call('eth_chainId'), from)).status).toBe(200)
  })
})
