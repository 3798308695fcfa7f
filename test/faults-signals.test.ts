// Signals a `flashgate serve` process can get outside its steady state: SIGTERM while it is still starting
// (a process manager stopping a service that has just been started) or while its database is half-open, and
// SIGHUP (its terminal closed).
import { type ChildProcess, spawn } from 'node:child_process'
import { createServer, type Server, type Socket, connect } from 'node:net'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import type { TestDatabase } from './fixtures/db.js'
import { rpc } from './fixtures/gateway.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'

const BIN = new URL('../bin/flashgate.js', import.meta.url).pathname

/**
 * The same runs in CI's PGlite and Postgres passes (a Postgres of its own either way, behind a relay): the
 * PGlite pass only.
 */
const SAME_IN_EVERY_PASS = process.env.DATABASE_URL !== undefined

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

function serve(databaseUrl: string, logLevel = 'error') {
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--upstream-rpc', anvil.rpcUrl, '--database-url', databaseUrl, '--port', '0', '--workers', '1', '--log-level', logLevel],
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

/**
 * A loopback TCP relay to the database that holds every connection unanswered until `open()` (a database
 * that is slow to answer while the process starts), and that `freeze()` makes half-open. `connected` resolves at the first connection, which the
 * process makes once it has started listening for signals.
 */
async function startHeldRelay(target: URL) {
  let opened = false
  const held: Socket[] = []
  let firstConnection = () => {}
  const connected = new Promise<void>((resolve) => {
    firstConnection = resolve
  })
  const pairs: [Socket, Socket][] = []
  const relay = (client: Socket) => {
    const upstream = connect(Number(target.port || 5432), target.hostname)
    client.pipe(upstream).pipe(client)
    const close = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on('error', close)
    upstream.on('error', close)
    pairs.push([client, upstream])
  }
  const server: Server = createServer((client) => {
    firstConnection()
    client.pause()
    if (opened) relay(client)
    else held.push(client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = new URL(target)
  url.hostname = '127.0.0.1'
  url.port = String((server.address() as { port: number }).port)
  return {
    url: url.toString(),
    connected,
    open() {
      opened = true
      for (const client of held.splice(0)) relay(client)
    },
    /** Half-open: every connection stays up, and nothing more crosses it either way. */
    freeze() {
      opened = false
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream).pause()
        upstream.unpipe(client).pause()
      }
    },
    close() {
      for (const client of held.splice(0)) client.destroy()
      for (const pair of pairs.splice(0)) for (const socket of pair) socket.destroy()
      server.close()
    },
  }
}

describe.skipIf(!SHARED_POSTGRES_AVAILABLE || SAME_IN_EVERY_PASS)('signals outside the steady state', () => {
  let relay: Awaited<ReturnType<typeof startHeldRelay>>
  beforeEach(async () => {
    relay = await startHeldRelay(new URL(database.databaseUrl))
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

  test('SIGTERM with the database half-open: the process gives up stopping after 30 s and exits 1, saying why', { timeout: 90_000 }, async () => {
    relay.open()
    const run = serve(relay.url, 'info')
    await expect.poll(run.output, { timeout: 30_000 }).toMatch(/flashgate .* \(one process\)/)
    await expect.poll(run.output, { timeout: 30_000 }).toMatch(/starting a new index/)
    // Then a new block, which the ingester writes into the half-open connection, and waits.
    relay.freeze()
    await rpc(anvil.rpcUrl, 'evm_mine')
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    const signalledAt = Date.now()
    run.child.kill('SIGTERM')
    expect(await run.exited, run.output()).toEqual({ code: 1, signal: null })
    expect(Date.now() - signalledAt).toBeGreaterThanOrEqual(29_000)
    expect(run.output()).toMatch(/did not stop within 30 s \(a database or upstream that no longer answers\); exiting/)
  })

  test('SIGHUP (a closed terminal) drains and exits 0 like SIGTERM', { timeout: 60_000 }, async () => {
    const run = serve(database.databaseUrl)
    await expect.poll(run.output, { timeout: 30_000 }).toMatch(/flashgate .* \(one process\)/)
    run.child.kill('SIGHUP')
    expect(await run.exited, run.output()).toEqual({ code: 0, signal: null })
  })
})
