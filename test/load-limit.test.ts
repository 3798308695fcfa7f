import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import WebSocket from 'ws'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'

// A bounded load test of the public endpoint's rate limit, against the real CLI in its own process (so
// that its memory is its own): at the limit nearly everything passes; far above it the limit holds, and
// every request gets an answer (200 or 429), none is dropped; memory does not grow from one run to the next.
const RATE_LIMIT = 200
const PHASE_SECONDS = 4
const CONNECTIONS = 16
/** RSS growth allowed between two identical overload runs, once warm. */
const MAX_RSS_GROWTH_BYTES = 24 * 1024 * 1024
const BIN = new URL('../bin/flashgate.js', import.meta.url).pathname
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: ['0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266', 'latest'] })

let anvil: Anvil
let database: TestDatabase
let gateway: ChildProcess
let url: string

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `) || candidate.startsWith(`${name}{`))
  return Number(line?.split(' ').at(-1))
}

let inspectorUrl: string | undefined

/** A full garbage collection in the gateway, through its inspector (Chrome DevTools protocol). */
async function collectGarbage(): Promise<void> {
  const socket = new WebSocket(inspectorUrl!)
  await once(socket, 'open')
  const done = new Promise<void>((resolve) => socket.on('message', () => resolve()))
  socket.send(JSON.stringify({ id: 1, method: 'HeapProfiler.collectGarbage' }))
  await done
  socket.close()
}

/**
 * Resident memory once the burst's garbage is collected: a full collection through the inspector, then the
 * least of four readings 250 ms apart. Read straight after a burst, the figure is mostly garbage not yet
 * collected, up and down by 60 MiB from one run to the next.
 */
async function settledRss(): Promise<number> {
  await collectGarbage()
  const readings: number[] = []
  for (let reading = 0; reading < 4; reading++) {
    await new Promise((resolve) => setTimeout(resolve, 250))
    readings.push(await metric('flashgate_process_resident_memory_bytes'))
  }
  return Math.min(...readings)
}

type Run = { sent: number; answered: number; ok: number; limited: number; other: number; errors: number; timeouts: number; seconds: number }

async function load(options: { overallRate?: number }): Promise<Run> {
  const result = await autocannon({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: BODY,
    connections: CONNECTIONS,
    duration: PHASE_SECONDS,
    timeout: 10,
    ...options,
  })
  const codes = result.statusCodeStats as Record<string, { count: number }>
  const count = (code: string) => codes[code]?.count ?? 0
  const answered = Object.values(codes).reduce((sum, { count }) => sum + count, 0)
  return {
    sent: result.requests.sent,
    answered,
    ok: count('200'),
    limited: count('429'),
    other: answered - count('200') - count('429'),
    errors: result.errors,
    timeouts: result.timeouts,
    seconds: result.duration,
  }
}

beforeAll(async () => {
  anvil = await startAnvil()
  await generateChain(anvil.rpcUrl, { seed: 5, blocks: 5 })
  database = await createTestDatabase()
  gateway = spawn(
    process.execPath,
    // The inspector lets the test ask for a full collection before it reads memory (settledRss).
    [
      '--inspect=127.0.0.1:0',
      BIN,
      'serve',
      '--upstream-rpc',
      anvil.rpcUrl,
      '--database-url',
      database.databaseUrl,
      '--port',
      '0',
      '--start-block',
      '0',
      '--public-rate-limit',
      String(RATE_LIMIT),
      '--workers',
      '1',
      '--log-level',
      'silent',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  gateway.stderr!.setEncoding('utf8')
  gateway.stderr!.on('data', (chunk: string) => {
    inspectorUrl ??= /Debugger listening on (ws:\/\/\S+)/.exec(chunk)?.[1]
    if (!/Debugger|For help, see/.test(chunk)) process.stderr.write(chunk)
  })
  let output = ''
  for await (const chunk of gateway.stdout!) {
    output += chunk
    const match = /JSON-RPC\s+(http:\/\/\S+?)\/?\s/.exec(output)
    if (match) {
      url = match[1]!
      break
    }
  }
  const deadline = Date.now() + 30_000
  while ((await fetch(`${url}/readyz`)).status !== 200) {
    if (Date.now() > deadline) throw new Error('flashgate serve did not become ready')
    await sleep(200)
  }
}, 60_000)

afterAll(async () => {
  if (gateway && gateway.exitCode === null) {
    gateway.kill('SIGTERM')
    await once(gateway, 'exit')
  }
  await database?.drop()
  await anvil?.stop()
})

test('at the public rate limit and above it: the limit holds, every request is answered, memory stays flat', async () => {
  // Paced just under the limit: nothing is refused beyond the odd request that autocannon's pacing bunches.
  const pacedRate = Math.floor(RATE_LIMIT * 0.9)
  const atLimit = await load({ overallRate: pacedRate })
  // Unpaced, many times the limit from one address.
  const over = await load({})
  const rssWarm = await settledRss()
  const overAgain = await load({})
  const rssAfter = await settledRss()
  const heapAfter = await metric('flashgate_nodejs_heap_size_used_bytes')
  const limitedCounter = await metric('flashgate_rate_limited_total')

  console.info(
    `load at ${RATE_LIMIT} req/s limit: paced ${JSON.stringify(atLimit)}; over ${JSON.stringify(over)}; again ${JSON.stringify(overAgain)}; ` +
      `rss ${(rssWarm / 2 ** 20).toFixed(1)} -> ${(rssAfter / 2 ** 20).toFixed(1)} MiB, heap after a full collection ${(heapAfter / 2 ** 20).toFixed(1)} MiB`,
  )
  for (const run of [atLimit, over, overAgain]) {
    expect(run.errors).toBe(0)
    expect(run.timeouts).toBe(0)
    expect(run.other).toBe(0)
  }
  // Under the limit, nearly nothing is refused. How many a busy machine gets through at this pace is not the
  // point (a shared CI machine answered half the planned rate; another had a fifth of what it sent still in
  // flight at the deadline): a share of the plan, only so that the run is not empty.
  expect(atLimit.answered).toBeGreaterThanOrEqual(0.25 * pacedRate * atLimit.seconds)
  expect(atLimit.limited).toBeLessThanOrEqual(Math.ceil(atLimit.answered * 0.02))
  for (const run of [over, overAgain]) {
    // Every request that went out came back with an answer (autocannon stops at the deadline mid-flight:
    // at most one request per connection is still on its way then).
    expect(run.answered).toBeGreaterThanOrEqual(run.sent - CONNECTIONS)
    // Offered far more than the limit (most of it refused: a condition on the load, not on how fast a busy
    // machine answers it; in CI's PGlite pass one run answered 540 req/s, locally 4,200); admitted at most
    // the rate over the run plus one second's burst.
    expect(run.limited).toBeGreaterThan(run.ok)
    expect(run.ok).toBeLessThanOrEqual(RATE_LIMIT * (run.seconds + 1) + CONNECTIONS)
    expect(run.ok).toBeGreaterThanOrEqual(RATE_LIMIT * (run.seconds - 1))
  }
  expect(limitedCounter).toBeGreaterThanOrEqual(over.limited + overAgain.limited)
  expect(rssAfter - rssWarm).toBeLessThan(MAX_RSS_GROWTH_BYTES)
}, 60_000)
