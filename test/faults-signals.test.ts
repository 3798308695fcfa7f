// Signals a `flashgate serve` process can get outside its steady state: SIGTERM while it is still starting
// (a process manager stopping a service that has just been started), while its database is half-open or its
// upstream holds its answers, and
// SIGHUP (its terminal closed).
import { type ChildProcess, spawn } from 'node:child_process'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import type { TestDatabase } from './fixtures/db.js'
import { startDelayProxy } from './fixtures/delay-proxy.js'
import { rpc } from './fixtures/gateway.js'
import { isPostgresUrl } from '../src/db/index.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'
import { startTcpRelay } from './fixtures/tcp-relay.js'

const BIN = new URL('../bin/flashgate.js', import.meta.url).pathname

/**
 * The same runs in CI's PGlite and Postgres passes (a Postgres database behind a relay either way): the
 * Postgres pass only, the shorter of the two (and the one with a Postgres to hand, where the PGlite pass
 * started a throwaway cluster for it).
 */
const SAME_IN_EVERY_PASS = !isPostgresUrl(process.env.DATABASE_URL ?? '')
/** `--stop-timeout` of the run whose upstream holds its answers: how long its stop may take before it exits 1. */
const STOP_TIMEOUT_S = 5

let database: TestDatabase
let anvil: Anvil
const children: ChildProcess[] = []

beforeAll(async () => {
  if (SHARED_POSTGRES_AVAILABLE && !SAME_IN_EVERY_PASS) [database, anvil] = await Promise.all([createSharedPostgresDatabase(), startAnvil()])
}, 120_000)

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  await database?.drop()
  await anvil?.stop()
})

type Exit = { code: number | null; signal: NodeJS.Signals | null }

function serve(databaseUrl: string, logLevel = 'error', upstreamRpc = anvil.rpcUrl, extra: string[] = []) {
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--upstream-rpc', upstreamRpc, '--database-url', databaseUrl, '--port', '0', '--workers', '1', '--log-level', logLevel, ...extra],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  children.push(child)
  let output = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString()
  })
  child.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString()
  })
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  return { child, exited, output: () => output }
}

describe.skipIf(!SHARED_POSTGRES_AVAILABLE || SAME_IN_EVERY_PASS)('signals outside the steady state', () => {
  let relay: Awaited<ReturnType<typeof startTcpRelay>>
  beforeEach(async () => {
    relay = await startTcpRelay(new URL(database.databaseUrl))
  })
  afterEach(() => relay.close())

  test('SIGTERM while starting: start-up finishes, then the process drains and exits 0', { timeout: 60_000 }, async () => {
    const run = serve(relay.url)
    await relay.connected
    run.child.kill('SIGTERM')
    // Still there: it waits for start-up rather than dying of the signal half-way through it.
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(run.child.exitCode, run.output()).toBeNull()
    expect(run.child.signalCode).toBeNull()
    relay.open()
    expect(await run.exited, run.output()).toEqual({ code: 0, signal: null })
    expect(run.output()).toMatch(/flashgate .* \(one process\)/)
  })

  test('SIGTERM while a start-up never finishes: exits 1 after ten seconds, saying why', { timeout: 60_000 }, async () => {
    const run = serve(relay.url)
    await relay.connected
    run.child.kill('SIGTERM')
    expect(await run.exited, run.output()).toEqual({ code: 1, signal: null })
    expect(run.output()).toMatch(/SIGTERM while starting, and start-up did not finish within 10 s; exiting/)
  })

  // The freeze lands wherever the ingester is: often in the first block's write (its BEGIN, its COPY, a partition's
  // transaction), else in the next block's. Each must be given up: an unwatched BEGIN, or a body left waiting for a
  // close that a half-open socket never reports, held the stop until the 30 s cut.
  test('SIGTERM with the database half-open: the unanswered statement is given up, and the process stops and exits 0', { timeout: 120_000 }, async () => {
    relay.open()
    // A stop timeout well past the statement watch (10 s + 10 s), so that what decides the exit is whether every
    // unanswered statement is given up (0), not the cut (1). A loaded CI machine once took the stop past 30 s
    // after the watch had given up the first statement at 20 s: what is measured is that it ends on its own.
    const run = serve(relay.url, 'info', anvil.rpcUrl, ['--stop-timeout', '75'])
    await expect.poll(run.output, { timeout: 30_000 }).toMatch(/flashgate .* \(one process\)/)
    await expect.poll(run.output, { timeout: 30_000 }).toMatch(/starting a new index/)
    // Then a new block, which the ingester writes into the half-open connection, and waits.
    relay.freeze()
    await rpc(anvil.rpcUrl, 'evm_mine')
    // Signalled once a statement has gone into a frozen connection: a fixed wait could end before the ingester,
    // slow on a loaded machine, wrote anything, and the stop would then find nothing unanswered to give up.
    await expect.poll(() => relay.unrelayedBytes(), { timeout: 30_000, interval: 100 }).toBeGreaterThan(0)
    const signalledAt = Date.now()
    run.child.kill('SIGTERM')
    // Without an answer past the statement timeout (10 s) and 10 s more, the connections are given up: the stop
    // completes instead of waiting on them (it would be cut at 30 s otherwise).
    expect(await run.exited, run.output()).toEqual({ code: 0, signal: null })
    expect(Date.now() - signalledAt).toBeLessThan(74_000)
    expect(run.output()).toMatch(/the database left a statement unanswered/)
    expect(run.output()).not.toMatch(/did not stop within/)
  })

  test('SIGTERM with the upstream holding its answers: gives up stopping after --stop-timeout and exits 1, saying why', { timeout: 90_000 }, async () => {
    const upstream = await startDelayProxy(anvil.rpcUrl)
    try {
      relay.open()
      // 5 s rather than the default 30 s, which the test waited out: the answers are held for two minutes either way.
      const run = serve(relay.url, 'info', upstream.url, ['--stop-timeout', String(STOP_TIMEOUT_S)])
      await expect.poll(run.output, { timeout: 30_000 }).toMatch(/flashgate .* \(one process\)/)
      await expect.poll(run.output, { timeout: 30_000 }).toMatch(/starting a new index/)
      // Every answer held for two minutes: the ingester's next call waits (viem times out at 20 s, then retries).
      upstream.setDelay(120_000)
      await rpc(anvil.rpcUrl, 'evm_mine')
      await new Promise((resolve) => setTimeout(resolve, 3_000))
      const signalledAt = Date.now()
      run.child.kill('SIGTERM')
      expect(await run.exited, run.output()).toEqual({ code: 1, signal: null })
      expect(Date.now() - signalledAt).toBeGreaterThanOrEqual(STOP_TIMEOUT_S * 1_000 - 1_000)
      expect(run.output()).toMatch(new RegExp(`did not stop within ${STOP_TIMEOUT_S} s \\(a database or upstream that no longer answers\\); exiting`))
    } finally {
      await upstream.stop()
    }
  })

  test('SIGHUP (a closed terminal) drains and exits 0 like SIGTERM', { timeout: 60_000 }, async () => {
    const run = serve(database.databaseUrl)
    await expect.poll(run.output, { timeout: 30_000 }).toMatch(/flashgate .* \(one process\)/)
    run.child.kill('SIGHUP')
    expect(await run.exited, run.output()).toEqual({ code: 0, signal: null })
  })
})
