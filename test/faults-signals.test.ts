// Signals a `flashgate serve` process can get outside its steady state: SIGTERM while it is still starting
// (a process manager stopping a service that has just been started), and SIGHUP (its terminal closed).
import { type ChildProcess, spawn } from 'node:child_process'
import { createServer, type Server, type Socket, connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { TestDatabase } from './fixtures/db.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'

const BIN = new URL('../bin/flashgate.js', import.meta.url).pathname

let database: TestDatabase
const children: ChildProcess[] = []

beforeAll(async () => {
  if (SHARED_POSTGRES_AVAILABLE) database = await createSharedPostgresDatabase()
}, 120_000)

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  await database?.drop()
})

type Exit = { code: number | null; signal: NodeJS.Signals | null }

function serve(databaseUrl: string) {
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--upstream-rpc', 'http://127.0.0.1:1', '--database-url', databaseUrl, '--port', '0', '--workers', '1', '--log-level', 'error'],
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
 * A loopback TCP relay to the database that holds every connection unanswered until `open()`: a database
 * that is slow to answer while the process starts. `connected` resolves at the first connection, which the
 * process makes once it has started listening for signals.
 */
async function startHeldRelay(target: URL) {
  let opened = false
  const held: Socket[] = []
  let firstConnection = () => {}
  const connected = new Promise<void>((resolve) => {
    firstConnection = resolve
  })
  const relay = (client: Socket) => {
    const upstream = connect(Number(target.port || 5432), target.hostname)
    client.pipe(upstream).pipe(client)
    const close = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on('error', close)
    upstream.on('error', close)
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
    close() {
      for (const client of held.splice(0)) client.destroy()
      server.close()
    },
  }
}

describe.skipIf(!SHARED_POSTGRES_AVAILABLE)('signals outside the steady state', () => {
  test('SIGTERM while starting: start-up finishes, then the process drains and exits 0', { timeout: 60_000 }, async () => {
    const relay = await startHeldRelay(new URL(database.databaseUrl))
    try {
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
    } finally {
      relay.close()
    }
  })

  test('SIGTERM while a start-up never finishes: exits 1 after ten seconds, saying why', { timeout: 60_000 }, async () => {
    const relay = await startHeldRelay(new URL(database.databaseUrl))
    try {
      const run = serve(relay.url)
      await relay.connected
      run.child.kill('SIGTERM')
      expect(await run.exited, run.output()).toEqual({ code: 1, signal: null })
      expect(run.output()).toMatch(/SIGTERM while starting, and start-up did not finish within 10 s; exiting/)
    } finally {
      relay.close()
    }
  })

  test('SIGHUP (a closed terminal) drains and exits 0 like SIGTERM', { timeout: 60_000 }, async () => {
    const run = serve(database.databaseUrl)
    await expect.poll(run.output, { timeout: 30_000 }).toMatch(/flashgate .* \(one process\)/)
    run.child.kill('SIGHUP')
    expect(await run.exited, run.output()).toEqual({ code: 0, signal: null })
  })
})
