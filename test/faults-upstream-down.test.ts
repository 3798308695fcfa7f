import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { gunzipSync } from 'node:zlib'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { freePort } from './fixtures/ports.js'
import { generateQueries, readChainFacts, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

/**
 * Seconds of upstream silence after which /readyz says `unresponsive` (`--ready-upstream-silence`): 3 rather than
 * the default 30, which the test waited out (the ingester polls every 250 ms, so 3 s is still twelve polls).
 */
const READY_UPSTREAM_SILENCE_S = 3

/** Old blocks' state (balances, traces at past blocks) survives a dump and load only with this flag. */
const ANVIL_ARGS = ['--preserve-historical-states']

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway | undefined
let stateDir: string

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), 'flashgate-anvil-state-'))
  ;[anvil, database] = await Promise.all([startAnvil({ extraArgs: ANVIL_ARGS }), createTestDatabase()])
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
  rmSync(stateDir, { recursive: true, force: true })
})

async function readyz(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}/readyz`)
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

test('anvil killed mid-ingest and restarted with its state: ingest pauses and resumes, reads keep answering from the index, /readyz names the upstream, and the index ends equal to the node', async () => {
  const chain = await generateChain(anvil.rpcUrl, { seed: 51, blocks: 40 })
  const before = await readChainFacts(anvil.rpcUrl, { accounts: chain.senders, contracts: chain.contracts })
  const logsBefore = await anvilCall<{ blockNumber: string }[]>(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }])
  // Small batches, so that the kill lands in the middle of the backfill.
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, ingestBatchSize: 3 })
  await gateway.ingester.waitForBlock(10)

  // A crash, not a shutdown: the state is saved first (as `--state-interval` would), then SIGKILL. With the
  // historical states, so that old blocks can still be traced (else: "Resource not found").
  const stateFile = join(stateDir, 'state.json')
  const dump = await anvilCall<string>(anvil.rpcUrl, 'anvil_dumpState', [true])
  writeFileSync(stateFile, gunzipSync(Buffer.from(dump.slice(2), 'hex')))
  const port = anvil.port
  const exited = new Promise((resolve) => anvil.process.once('exit', resolve))
  anvil.process.kill('SIGKILL')
  await exited

  // viem retries each call for a few seconds before the ingester hears of the failure.
  await expect.poll(() => gateway!.ingester.status().lastErrorSource, { timeout: 30_000 }).toBe('upstream')
  const ready = await readyz(gateway.url)
  expect(ready.status).toBe(503)
  expect(ready.body).toMatchObject({ ready: false, database: 'ok', upstream: 'unreachable', lastError: expect.any(String) })
  expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)

  // Paused: nothing more is written, and what was indexed is served as the node served it.
  const head = gateway.ingester.status().head!
  expect(head).toBeGreaterThanOrEqual(10)
  expect(head).toBeLessThan(before.head)
  await sleep(1_000)
  expect(gateway.ingester.status().head).toBe(head)
  expect((await rpc(gateway.url, 'eth_blockNumber')).result).toBe(`0x${head.toString(16)}`)
  for (const number of [0, Math.floor(head / 2), head])
    expect((await rpc(gateway.url, 'eth_getBlockByNumber', [`0x${number.toString(16)}`, false])).result).toMatchObject({ hash: before.blockHashes[number] })
  expect((await rpc(gateway.url, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }])).result).toEqual(
    logsBefore.filter((log) => Number(log.blockNumber) <= head),
  )

  // Back on the same port with its state; the chain moves on.
  anvil = await startAnvil({ port, extraArgs: [...ANVIL_ARGS, '--load-state', stateFile] })
  expect(await anvilCall(anvil.rpcUrl, 'eth_getBlockByNumber', ['latest', false])).toMatchObject({ hash: before.blockHashes[before.head] })
  const more = await generateChain(anvil.rpcUrl, { seed: 52, blocks: 8 })
  await waitForSameHead(gateway, anvil.rpcUrl, 60_000)
  await expect.poll(async () => (await readyz(gateway!.url)).body, { timeout: 20_000 }).toMatchObject({ ready: true, upstream: 'ok', lastError: null })

  const facts = await readChainFacts(anvil.rpcUrl, {
    accounts: [...chain.senders, ...chain.recipients],
    contracts: [...chain.contracts, ...more.contracts],
  })
  await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, [...wholeChainQueries(facts), ...generateQueries(createRandom(51), facts, 300)])
})

/**
 * A loopback HTTP relay in front of the node that, once `hang()` is called, holds every request without an
 * answer (an upstream that accepts and then stalls) until `release()` forwards them all.
 */
async function startHangingProxy(targetUrl: string) {
  const target = new URL(targetUrl)
  let hanging = false
  const held: (() => void)[] = []
  const server = createServer((incoming: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = []
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk))
    incoming.on('end', () => {
      const forward = () => {
        const outgoing = request(
          { host: target.hostname, port: target.port, path: '/', method: 'POST', headers: { 'content-type': 'application/json' } },
          (answer) => {
            const parts: Buffer[] = []
            answer.on('data', (part: Buffer) => parts.push(part))
            answer.on('end', () => response.writeHead(answer.statusCode ?? 502, { 'content-type': 'application/json' }).end(Buffer.concat(parts)))
          },
        )
        outgoing.on('error', () => response.destroy())
        outgoing.end(Buffer.concat(chunks))
      }
      if (hanging) held.push(forward)
      else forward()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    hang() {
      hanging = true
    },
    release() {
      hanging = false
      for (const forward of held.splice(0)) forward()
    },
    get held() {
      return held.length
    },
    async stop() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

test('an upstream that has not answered yet is connecting, never ok, until it is found unreachable', async () => {
  const own = await createTestDatabase()
  // Nothing listens there: every call is refused, after the ingester's first attempt and its retries.
  const silent = await startTestGateway({ upstreamRpc: `http://127.0.0.1:${await freePort()}`, databaseUrl: own.databaseUrl })
  try {
    // What /readyz says of the upstream from the moment this process ingests (on Postgres it first takes the lock).
    const seen: { status: number; upstream: unknown }[] = []
    await expect
      .poll(
        async () => {
          const { status, body } = await readyz(silent.url)
          if (body.leader === true) seen.push({ status, upstream: body.upstream })
          return body.upstream
        },
        { timeout: 30_000, interval: 50 },
      )
      .toBe('unreachable')
    expect(seen[0]).toEqual({ status: 503, upstream: 'connecting' })
    expect(seen.map(({ upstream }) => upstream)).not.toContain('ok')
    expect(seen.every(({ status }) => status === 503)).toBe(true)
  } finally {
    await silent.stop()
    await own.drop()
  }
}, 60_000)

test('an upstream that stops answering without refusing: /readyz says unresponsive, reads go on from the index, and ingest resumes when it answers again', async () => {
  const own = await createTestDatabase()
  const proxy = await startHangingProxy(anvil.rpcUrl)
  const hung = await startTestGateway({ upstreamRpc: proxy.url, databaseUrl: own.databaseUrl, readyUpstreamSilence: READY_UPSTREAM_SILENCE_S })
  try {
    const head = await waitForSameHead(hung, anvil.rpcUrl, 60_000)
    proxy.hang()
    await anvilCall(anvil.rpcUrl, 'anvil_mine', ['0x3'])
    // No error comes back (each call waits out viem's timeout and its retries): silence is the signal.
    await expect.poll(async () => (await readyz(hung.url)).body, { timeout: 60_000, interval: 500 }).toMatchObject({ ready: false, upstream: 'unresponsive' })
    expect(proxy.held).toBeGreaterThan(0)
    expect((await readyz(hung.url)).status).toBe(503)
    expect((await fetch(`${hung.url}/healthz`)).status).toBe(200)
    expect((await rpc(hung.url, 'eth_blockNumber')).result).toBe(`0x${head.toString(16)}`)

    proxy.release()
    await waitForSameHead(hung, anvil.rpcUrl, 60_000)
    await expect.poll(async () => (await readyz(hung.url)).body, { timeout: 20_000 }).toMatchObject({ ready: true, upstream: 'ok' })
  } finally {
    await hung.stop()
    await proxy.stop()
    await own.drop()
  }
}, 120_000)
