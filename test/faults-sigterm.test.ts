import { type ChildProcess, spawn } from 'node:child_process'
import { Agent, type IncomingMessage, request } from 'node:http'
import { fileURLToPath } from 'node:url'
import { sql } from 'drizzle-orm'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDb } from '../src/db/index.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc } from './fixtures/gateway.js'
import { anvilCall } from './fixtures/sync.js'
import { freePort } from './fixtures/ports.js'

const CLI = fileURLToPath(new URL('../bin/flashgate.js', import.meta.url))
const BATCH_SIZE = 5

let anvil: Anvil
let database: TestDatabase
let child: ChildProcess | undefined

beforeAll(async () => {
  ;[anvil, database] = await Promise.all([startAnvil(), createTestDatabase()])
})

afterAll(async () => {
  if (child?.exitCode === null) child.kill('SIGKILL')
  await anvil?.stop()
  await database?.drop()
})

/** `flashgate serve` on anvil, one process (no workers), as a child the test signals. */
function spawnServe(port: number, databaseUrl: string, extra: string[], output: 'pipe' | 'ignore' = 'pipe'): ChildProcess {
  const args = [CLI, 'serve', '--upstream-rpc', anvil.rpcUrl, '--database-url', databaseUrl, '--port', String(port), '--workers', '1', ...extra]
  return spawn(process.execPath, args, { stdio: ['ignore', output, output] })
}

/** Reads a whole JSON answer off an HTTP response. */
function collectAnswer(response: IncomingMessage, resolve: (answer: { status: number; body: unknown }) => void, reject: (error: Error) => void) {
  const chunks: Buffer[] = []
  response.on('data', (chunk: Buffer) => chunks.push(chunk))
  response.on('end', () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }))
  response.on('error', reject)
}

/**
 * A JSON-RPC call on a connection of its own, whose body is sent in two halves: the server is in the middle
 * of reading it until `finish()`.
 */
function slowCall(port: number, body: unknown) {
  const text = JSON.stringify(body)
  const half = Math.floor(text.length / 2)
  let finish = () => {}
  const answer = new Promise<{ status: number; body: unknown }>((resolve, reject) => {
    const outgoing = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
      },
      (response) => collectAnswer(response, resolve, reject),
    )
    outgoing.on('error', reject)
    outgoing.write(text.slice(0, half))
    finish = () => outgoing.end(text.slice(half))
  })
  return { answer, finish: () => finish() }
}

/**
 * A JSON-RPC call through `agent` (keep-alive: on a connection the server has already accepted); `sent`
 * resolves once the whole request is handed to the operating system.
 */
function call(agent: Agent, port: number, body: unknown) {
  const text = JSON.stringify(body)
  let sent = () => {}
  const written = new Promise<void>((resolve) => {
    sent = resolve
  })
  const answer = new Promise<{ status: number; body: unknown }>((resolve, reject) => {
    const outgoing = request(
      { host: '127.0.0.1', port, method: 'POST', path: '/', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } },
      (response) => collectAnswer(response, resolve, reject),
    )
    outgoing.on('error', reject)
    outgoing.end(text, () => sent())
  })
  return { answer, written }
}

/** Whether a new TCP connection to the port is refused (the listening socket is closed). */
function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const outgoing = request({ host: '127.0.0.1', port, method: 'GET', path: '/healthz', agent: false }, (response) => {
      response.resume()
      resolve(false)
    })
    outgoing.on('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'))
    outgoing.end()
  })
}

test('SIGTERM to `flashgate serve` mid-ingest with requests in flight: no new connections, in-flight requests answered in full, the current batch committed whole, exit code 0', async () => {
  await generateChain(anvil.rpcUrl, { seed: 61, blocks: 150, txPerBlock: [1, 4] })
  const head = Number(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber'))
  const port = await freePort()
  let output = ''
  child = spawnServe(port, database.databaseUrl, [
    '--start-block',
    '0',
    '--ingest-batch-size',
    String(BATCH_SIZE),
    '--public-rate-limit',
    '0',
    '--log-level',
    'info',
  ])
  child.stdout!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)))
  child.stderr!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child!.once('exit', (code, signal) => resolve({ code, signal })),
  )
  const url = `http://127.0.0.1:${port}`

  // Serving, and ingesting: the backfill has begun and is far from done.
  await expect
    .poll(async () => Number((await rpc(url, 'eth_blockNumber').catch(() => ({ result: '-0x1' }))).result), { timeout: 60_000, interval: 50 })
    .toBeGreaterThanOrEqual(20)

  const logsCall = { jsonrpc: '2.0', id: 7, method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: '0xa' }] }
  const blockCall = { jsonrpc: '2.0', id: 8, method: 'eth_getBlockByNumber', params: ['0x3', true] }
  // Eight connections the server has accepted (a first request on each), then a request on each, in flight
  // when the signal comes; and one request whose body is still being sent.
  const agent = new Agent({ keepAlive: true, maxSockets: 8 })
  await Promise.all(Array.from({ length: 8 }, () => call(agent, port, blockCall).answer))
  const slow = slowCall(port, logsCall)
  const burst = Array.from({ length: 8 }, () => call(agent, port, blockCall))
  const settled = Promise.allSettled(burst.map((inFlight) => inFlight.answer))
  // Sent, not necessarily read yet by the server, which is busy ingesting.
  await Promise.all(burst.map((inFlight) => inFlight.written))
  const signalledAt = Date.now()
  child.kill('SIGTERM')

  // The listening socket closes while the slow request is still being read …
  await expect.poll(() => refusesConnections(port), { timeout: 10_000, interval: 50 }).toBe(true)
  expect(child.exitCode).toBeNull()
  // … and that request, and the others in flight, get full answers.
  slow.finish()
  const expectedLogs = await anvilCall(anvil.rpcUrl, 'eth_getLogs', logsCall.params)
  expect(await slow.answer).toEqual({ status: 200, body: { jsonrpc: '2.0', id: 7, result: expectedLogs } })
  const expectedBlock = await anvilCall(anvil.rpcUrl, 'eth_getBlockByNumber', ['0x3', true])
  expect(await settled).toEqual(burst.map(() => ({ status: 'fulfilled', value: { status: 200, body: { jsonrpc: '2.0', id: 8, result: expectedBlock } } })))
  agent.destroy()

  const exit = await exited
  expect(exit, output).toEqual({ code: 0, signal: null })
  expect(Date.now() - signalledAt).toBeLessThan(15_000)

  // What the index holds is whole batches, each block with all of its transactions and logs.
  const db = await createDb({ databaseUrl: database.databaseUrl })
  try {
    const [stored] = await db.query<{ blocks: number; first: number; last: number; transactions: number; logs: number }>(sql`
      select (select count(*) from blocks)::int as blocks, (select min(number) from blocks)::int as first,
             (select max(number) from blocks)::int as last, (select count(*) from transactions)::int as transactions,
             (select count(*) from logs)::int as logs`)
    const last = stored!.last
    expect(last).toBeGreaterThanOrEqual(20)
    expect(last).toBeLessThan(head)
    expect((last + 1) % BATCH_SIZE).toBe(0)
    const blocks = await Promise.all(
      Array.from({ length: last + 1 }, (_, number) =>
        anvilCall<{ transactions: string[] }>(anvil.rpcUrl, 'eth_getBlockByNumber', [`0x${number.toString(16)}`, false]),
      ),
    )
    const logs = await anvilCall<unknown[]>(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: `0x${last.toString(16)}` }])
    expect(stored).toEqual({
      blocks: last + 1,
      first: 0,
      last,
      transactions: blocks.reduce((sum, block) => sum + block.transactions.length, 0),
      logs: logs.length,
    })
  } finally {
    await db.close()
  }
})

test('SIGTERM with GraphQL subscriptions open: each stream ends at once with its complete event, and the process exits 0 without waiting out the grace period', async () => {
  const streamDatabase = await createTestDatabase()
  const port = await freePort()
  const serving = spawnServe(port, streamDatabase.databaseUrl, ['--log-level', 'warn'], 'ignore')
  try {
    const exited = new Promise<number | null>((resolve) => serving.once('exit', (code) => resolve(code)))
    const url = `http://127.0.0.1:${port}`
    await expect.poll(async () => (await fetch(`${url}/healthz`).catch(() => null))?.status, { timeout: 60_000, interval: 100 }).toBe(200)
    const streams = await Promise.all(
      Array.from({ length: 2 }, async () => {
        const response = await fetch(`${url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
          body: JSON.stringify({ query: 'subscription { newHeads { number } }' }),
        })
        expect(response.status).toBe(200)
        // Read to its end: what the server wrote, and whether the connection ended cleanly or was reset.
        return {
          ended: response.text().then(
            (text) => ({ text, reset: false }),
            () => ({ text: '', reset: true }),
          ),
        }
      }),
    )
    const signalledAt = Date.now()
    serving.kill('SIGTERM')
    const ended = await Promise.all(streams.map((stream) => stream.ended))
    for (const stream of ended) {
      expect(stream.reset).toBe(false)
      expect(stream.text).toContain('event: complete')
    }
    expect(await exited).toBe(0)
    // Well inside the 10 s grace period the streams used to hold it for.
    expect(Date.now() - signalledAt).toBeLessThan(5_000)
  } finally {
    if (serving.exitCode === null) serving.kill('SIGKILL')
    await streamDatabase.drop()
  }
}, 90_000)
