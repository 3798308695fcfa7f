// `flashgate serve --workers 2` (issue 18): two serving workers on one port under one primary. The machine
// holds one Flashblocks connection; both workers answer `pending` alike; a client is rate limited once across
// them; a key revoked is refused by both; a transaction forwarded through one counts in the other's pending
// nonce and is found there by hash; a filter installed through one is polled through either; `/metrics` is the machine's; SIGTERM drains both workers, then the primary.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { request } from 'node:http'
import { fileURLToPath } from 'node:url'
import { type Hex, parseGwei } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { keysCommand } from '../src/cli/keys.js'
import { isPostgresUrl } from '../src/db/index.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import type { TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { freePort } from './fixtures/ports.js'
import { fromEachWorker as eachWorker, postToWorkers, type WorkerAnswer, workerAnswer } from './fixtures/workers.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'
import { until as waitUntil } from './fixtures/sync.js'

const BIN = fileURLToPath(new URL('../bin/flashgate.js', import.meta.url))
const RATE = 10
/** Flashblocks far apart: between a send and the read after it, no flashblock shows the transaction. */
const BLOCK_TIME_MS = 4_000
const FLASHBLOCK_INTERVAL_MS = 2_000
const CHAIN_ID = 31337
const SENDER = DEV_ACCOUNTS[3]!
/** A key's record is cached per worker for 2 s (src/resolvers/api-keys.ts): the bound on a revocation. */
const REVOCATION_WITHIN_MS = 2_000

/**
 * The same runs in CI's PGlite and Postgres passes (a Postgres database either way: `DATABASE_URL`'s, or a
 * throwaway cluster in the PGlite pass): the Postgres pass only, where no cluster has to be made for it.
 */
const SAME_IN_EVERY_PASS = !isPostgresUrl(process.env.DATABASE_URL ?? '')
const postgresAvailable = SHARED_POSTGRES_AVAILABLE && !SAME_IN_EVERY_PASS
if (!SHARED_POSTGRES_AVAILABLE) console.warn('workers: skipped, workers share one Postgres (set DATABASE_URL, or install the PostgreSQL server binaries)')

let devnet: Devnet
let database: TestDatabase
let child: ChildProcess
let port: number
let output = ''
let clients = 0
const freshClient = () => `10.18.${Math.floor(++clients / 250)}.${clients % 250}`

/** One request on a connection of its own, from a fresh client address unless told. */
const post = (path: string, body: unknown, from = freshClient()) => postToWorkers(port, path, body, from)

const call = (method: string, params: unknown[] = [], id = 1) => ({ jsonrpc: '2.0', id, method, params })

/** Calls until each worker has answered once; the answers by worker. */
const fromEachWorker = (path: string, body: unknown, from?: string) => eachWorker(() => post(path, body, from))

async function signed(nonce: number): Promise<Hex> {
  return SENDER.signTransaction({
    type: 'eip1559',
    chainId: CHAIN_ID,
    nonce,
    to: DEV_ACCOUNTS[4]!.address,
    value: 1n,
    gas: 21_000n,
    maxFeePerGas: parseGwei('20'),
    maxPriorityFeePerGas: parseGwei('1'),
  })
}

beforeAll(async () => {
  if (!postgresAvailable) return
  ;[devnet, database, port] = await Promise.all([
    startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: BLOCK_TIME_MS, flashblockIntervalMs: FLASHBLOCK_INTERVAL_MS }),
    createSharedPostgresDatabase(),
    freePort(),
  ])
  child = startCluster(port)
  await until(
    async () => /JSON-RPC/.test(output),
    60_000,
    () => `the gateway did not start:\n${output}`,
  )
  // Both workers see the devnet's head (the primary ingests; they read the same database).
  await until(
    async () => {
      const head = Number((await (await fetch(devnet.rpcUrl, { method: 'POST', body: JSON.stringify(call('eth_blockNumber')) })).json()).result)
      const answers = await fromEachWorker('/', call('eth_blockNumber'))
      return [...answers.values()].every((answer) => Number(answer.body.result) >= head && head > 0)
    },
    30_000,
    () => 'the workers did not reach the devnet head',
  )
}, 120_000)

/** `flashgate serve --workers 2` on `listenPort`, its output collected into `output`. */
function startCluster(listenPort: number): ChildProcess {
  const args = [
    'serve',
    '--workers',
    '2',
    '--port',
    String(listenPort),
    '--database-url',
    database.databaseUrl,
    '--upstream-rpc',
    devnet.rpcUrl,
    '--flashblocks-ws',
    devnet.flashblocksUrl,
    '--start-block',
    '0',
    '--public-rate-limit',
    String(RATE),
    '--trust-proxy',
    'true',
    '--log-level',
    'warn',
  ]
  const started = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  started.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  started.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  return started
}

/** The pids of a process's children (its workers), from `ps`. */
function childrenOf(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((child) => child > 0)
  } catch {
    return []
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const until = (condition: () => Promise<boolean>, timeoutMs: number, explain: () => string) => waitUntil(condition, timeoutMs, explain, 200)

async function scrape(): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`)
  expect(response.status).toBe(200)
  return response.text()
}

/** JSON-RPC requests on the public endpoint that /metrics counts, over every status. */
const requestsCounted = (text: string) =>
  text
    .split('\n')
    .filter((line) => line.startsWith('flashgate_http_requests_total{') && line.includes('route="/"'))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0)

afterAll(async () => {
  if (child !== undefined && child.exitCode === null) child.kill('SIGKILL')
  await devnet?.stop()
  await database?.drop()
})

describe.runIf(postgresAvailable)('serve --workers 2', () => {
  test('one Flashblocks connection for the machine, and both workers answer pending alike', async () => {
    expect(devnet.feedClients()).toBe(1)
    const hash = (await post('/', call('eth_sendRawTransaction', [await signed(0)]))).body.result as Hex
    expect(hash).toMatch(/^0x[0-9a-f]{64}$/)
    // Once the flashblock carrying it has arrived and its receipt is hydrated, both workers say the same.
    await expect
      .poll(
        async () => {
          const receipts = await fromEachWorker('/', call('eth_getTransactionReceipt', [hash]))
          const blocks = await fromEachWorker('/', call('eth_getBlockByNumber', ['pending', false]))
          const [first, second] = [...receipts.values()].map((answer) => answer.body.result)
          const [blockA, blockB] = [...blocks.values()].map((answer) => answer.body.result)
          return first !== null && JSON.stringify(first) === JSON.stringify(second) && JSON.stringify(blockA) === JSON.stringify(blockB)
        },
        { timeout: 15_000, interval: 100 },
      )
      .toBe(true)
    expect(devnet.feedClients()).toBe(1)
  })

  test('a client is limited once across the workers', async () => {
    const from = freshClient()
    const batch = Array.from({ length: 2 * RATE }, (_, id) => call('eth_chainId', [], id))
    const first = await post('/', batch, from)
    expect(first.status).toBe(200)
    // Its debt is owed on whichever worker it reaches next.
    const answers = await fromEachWorker('/', call('eth_chainId'), from)
    for (const answer of answers.values()) {
      expect(answer.status).toBe(429)
      expect(answer.body).toMatchObject({ error: { code: -32005 } })
    }
    expect((await post('/', call('eth_chainId'), freshClient())).status).toBe(200)
  })

  test('a transaction forwarded through one worker counts in the pending nonce on the other', async () => {
    const before = await fromEachWorker('/', call('eth_getTransactionCount', [SENDER.address, 'pending']))
    const known = Number([...before.values()][0]!.body.result)
    for (const answer of before.values()) expect(Number(answer.body.result)).toBe(known)
    for (let sent = 0; sent < 2; sent++) {
      const send = await post('/', call('eth_sendRawTransaction', [await signed(known + sent)]))
      expect(send.body.error).toBeUndefined()
      // At once, before any flashblock shows it, on both workers.
      const after = await fromEachWorker('/', call('eth_getTransactionCount', [SENDER.address, 'pending']))
      for (const answer of after.values()) expect(Number(answer.body.result)).toBe(known + sent + 1)
    }
  })

  test('a transaction forwarded through one worker is found by hash on the other, as a node finds one in its pool', async () => {
    const [pending] = (await fromEachWorker('/', call('eth_getTransactionCount', [SENDER.address, 'pending']))).values()
    // A nonce gap: the node keeps it queued, so no flashblock ever shows it and only the pool can answer.
    const nonce = Number(pending!.body.result) + 5
    const send = await post('/', call('eth_sendRawTransaction', [await signed(nonce)]))
    expect(send.body.error).toBeUndefined()
    const hash = send.body.result as string
    const found = await fromEachWorker('/', call('eth_getTransactionByHash', [hash]))
    expect(found.size).toBe(2)
    for (const answer of found.values())
      expect(answer.body.result).toMatchObject({
        hash,
        nonce: `0x${nonce.toString(16)}`,
        from: SENDER.address.toLowerCase(),
        blockNumber: null,
        blockHash: null,
      })
    const [first, second] = [...found.values()]
    expect(second!.body.result).toEqual(first!.body.result)
  })

  test('a filter installed through one worker is polled through either, and every block reaches it once', async () => {
    const id = (await post('/', call('eth_newBlockFilter'))).body.result as string
    const start = Number((await post('/', call('eth_blockNumber'))).body.result)
    const hashes: string[] = []
    const pollers = new Set<string>()
    await until(
      async () => {
        const poll = await post('/', call('eth_getFilterChanges', [id]))
        expect(poll.body.error).toBeUndefined()
        hashes.push(...(poll.body.result as string[]))
        pollers.add(poll.worker!)
        return pollers.size === 2 && hashes.length >= 2
      },
      4 * BLOCK_TIME_MS,
      () => `polls answered by ${[...pollers]}, ${hashes.length} blocks`,
    )
    const numbers = await Promise.all(hashes.map(async (hash) => Number((await post('/', call('eth_getBlockByHash', [hash, false]))).body.result.number)))
    expect(numbers).toEqual(numbers.map((_, offset) => numbers[0]! + offset))
    expect(numbers[0]).toBeLessThanOrEqual(start + 1)
    // Uninstalled through one worker: gone on both.
    expect((await post('/', call('eth_uninstallFilter', [id]))).body.result).toBe(true)
    for (const answer of (await fromEachWorker('/', call('eth_getFilterChanges', [id]))).values())
      expect(answer.body.error).toEqual({ code: -32000, message: 'filter not found' })
  })

  test('a revoked key is refused by both workers within the key cache time', async () => {
    const printed: string[] = []
    const print = (line: string) => printed.push(line)
    const keys = (action: string, argument: string, flags: Record<string, string> = {}) =>
      keysCommand({ action, argument, flags: { 'database-url': database.databaseUrl, ...flags }, env: {}, print, inform: () => {} })
    await keys('create', '', { name: 'workers-test', rate: '0' })
    const key = printed.join('\n').match(/fg_[A-Za-z0-9_-]+/)![0]
    for (const answer of (await fromEachWorker(`/rpc/${key}`, call('eth_chainId'))).values()) expect(answer.status).toBe(200)
    await keys('revoke', 'workers-test')
    const revokedAt = Date.now()
    const refusedAt = new Map<string, number>()
    while (refusedAt.size < 2 && Date.now() - revokedAt < 3 * REVOCATION_WITHIN_MS) {
      const answer = await post(`/rpc/${key}`, call('eth_chainId'))
      if (answer.status === 401 && answer.worker !== null && !refusedAt.has(answer.worker)) refusedAt.set(answer.worker, Date.now() - revokedAt)
    }
    expect(refusedAt.size).toBe(2)
    for (const after of refusedAt.values()) expect(after).toBeLessThanOrEqual(REVOCATION_WITHIN_MS + 250)
  })

  test('/metrics is the machine’s: requests summed over the workers', async () => {
    const total = requestsCounted
    const before = total(await scrape())
    const answers = await fromEachWorker('/', call('eth_chainId'))
    expect(answers.size).toBe(2)
    const counted = await Promise.all(Array.from({ length: 10 }, () => post('/', call('eth_chainId'))))
    const text = await scrape()
    // Every request, whichever worker answered it (and the probes of fromEachWorker).
    expect(total(text) - before).toBeGreaterThanOrEqual(counted.length + 2)
    expect(text).toMatch(/^flashgate_index_head_block \d+$/m)
    expect(text).toMatch(/^flashgate_pending_source\{source="hydrate"\} 1$/m)
  })

  test('SIGTERM drains both workers, then the primary exits 0', async () => {
    // Requests in the middle of their body on several connections, spread over both workers.
    const slow = Array.from({ length: 4 }, () => {
      const text = JSON.stringify(call('eth_chainId'))
      let finish = () => {}
      const answer = new Promise<WorkerAnswer>((resolve, reject) => {
        const outgoing = request(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: '/',
            agent: false,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'x-forwarded-for': freshClient() },
          },
          (response) => {
            workerAnswer(response).then(resolve, reject)
          },
        )
        outgoing.on('error', reject)
        outgoing.write(text.slice(0, 5))
        finish = () => outgoing.end(text.slice(5))
      })
      return { answer, finish: () => finish() }
    })
    await new Promise((resolve) => setTimeout(resolve, 300))
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    child.kill('SIGTERM')
    await new Promise((resolve) => setTimeout(resolve, 300))
    for (const call of slow) call.finish()
    const answers = await Promise.all(slow.map((call) => call.answer))
    for (const answer of answers) expect(answer).toMatchObject({ status: 200, body: { result: '0x7a69' } })
    expect(new Set(answers.map((answer) => answer.worker)).size).toBe(2)
    expect(await exited, output).toBe(0)
    // Nothing listens any more.
    await expect(post('/', call('eth_chainId'))).rejects.toThrow()
  }, 30_000)

  test('a worker that dies is replaced, and the new one answers pending as the other does; workers whose primary is killed outright stop too', async () => {
    port = await freePort()
    const primary = startCluster(port)
    try {
      await until(
        async () =>
          childrenOf(primary.pid!).length === 2 &&
          (await post('/', call('eth_chainId')).then(
            () => true,
            () => false,
          )),
        60_000,
        () => `the second cluster did not start:\n${output}`,
      )
      // Past the crash-loop guard (a worker dying within 5 s of its start is not replaced).
      await new Promise((resolve) => setTimeout(resolve, 5_500))
      // Requests that both workers count, then a scrape: the machine's counters must not go back when one dies.
      await fromEachWorker('/', call('eth_chainId'))
      await Promise.all(Array.from({ length: 10 }, () => post('/', call('eth_chainId'))))
      const before = requestsCounted(await scrape())
      expect(before).toBeGreaterThanOrEqual(12)
      const [victim] = childrenOf(primary.pid!)
      process.kill(victim!, 'SIGKILL')
      await until(
        async () => !alive(victim!) && childrenOf(primary.pid!).length === 2,
        30_000,
        () => `no replacement for worker ${victim}:\n${output}`,
      )
      const after = await scrape()
      expect(requestsCounted(after)).toBeGreaterThanOrEqual(before)
      // One start time, the machine's (its first process's), and a file-descriptor limit not summed over processes.
      expect(after).toMatch(/^flashgate_process_start_time_seconds \d+$/m)
      const limit = Number(/^flashgate_process_max_fds (\d+)$/m.exec(after)?.[1])
      expect(limit).toBeGreaterThan(0)
      expect(limit).toBeLessThanOrEqual(Number(/^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${primary.pid}/limits`, 'utf8'))?.[1]))
      // The replacement follows the primary's feed as the other worker does: both answer the same pending block.
      await until(
        async () => {
          const blocks = await fromEachWorker('/', call('eth_getBlockByNumber', ['pending', false])).catch(() => null)
          if (blocks === null) return false
          const [a, b] = [...blocks.values()].map((answer) => answer.body.result)
          return a !== null && JSON.stringify(a) === JSON.stringify(b)
        },
        // The two answers come one after the other while flashblocks arrive every 200 ms: under load it can
        // take many tries before both land between the same two flashblocks.
        30_000,
        () => 'the replacement worker does not answer pending as the other does',
      )
      const workers = childrenOf(primary.pid!)
      primary.kill('SIGKILL')
      await until(
        async () => workers.every((pid) => !alive(pid)),
        20_000,
        () => `workers ${workers.filter(alive)} outlived their primary`,
      )
    } finally {
      if (primary.exitCode === null) primary.kill('SIGKILL')
    }
  }, 150_000)
})
