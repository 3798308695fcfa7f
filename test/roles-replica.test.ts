import { type ChildProcess, spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { WebSocket } from 'ws'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { startDelayProxy } from './fixtures/delay-proxy.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { createPostgresCluster, createStandbyCluster, POSTGRES_BIN_DIR, type PostgresCluster } from './fixtures/postgres-cluster.js'
import { generateQueries, readChainFacts, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'
import { anvilCall } from './fixtures/sync.js'
import { freePort } from './fixtures/ports.js'
import { isPostgresUrl } from '../src/db/index.js'

const BIN = new URL('../bin/flashgate.js', import.meta.url).pathname
/** Each upstream answer to the ingesters is held back this long, so that the backfill takes seconds. */
const UPSTREAM_DELAY_MS = 40
/** The standby ingester must lead within this long of the leader's death. */
const TAKEOVER_MAX_MS = 10_000

/**
 * The same runs in CI's PGlite and Postgres passes (its own throwaway clusters either way, whatever
 * `DATABASE_URL` says): the Postgres pass only.
 */
const SAME_IN_EVERY_PASS = !isPostgresUrl(process.env.DATABASE_URL ?? '')
const serverInstalled = POSTGRES_BIN_DIR !== null
/** Whether this pass runs the file: the server's binaries are installed, and it is the Postgres pass. */
const runsHere = serverInstalled && !SAME_IN_EVERY_PASS
if (!serverInstalled) console.warn('roles-replica: skipped, no PostgreSQL server binaries (apt-get install postgresql, or set POSTGRES_BIN_DIR)')

let anvil: Anvil
let proxy: Awaited<ReturnType<typeof startDelayProxy>>
let primary: PostgresCluster
let standby: PostgresCluster
const ingesters: { child: ChildProcess; port: number; output: () => string }[] = []
const servers: TestGateway[] = []

/** `flashgate serve --role ingest` as a process of its own, which the test can kill outright. */
async function startIngester(databaseUrl: string, upstreamRpc: string) {
  const port = await freePort()
  const args = [
    'serve',
    '--role',
    'ingest',
    '--port',
    String(port),
    '--database-url',
    databaseUrl,
    '--upstream-rpc',
    upstreamRpc,
    '--start-block',
    '0',
    '--ingest-batch-size',
    '3',
  ]
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  const ingester = { child, port, output: () => output }
  ingesters.push(ingester)
  return ingester
}

/** `/readyz` of an ingester: whether it holds the ingest lock; `null` while it does not answer. */
async function leads(port: number): Promise<boolean | null> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) })
    return ((await response.json()) as { leader: boolean }).leader
  } catch {
    return null
  }
}

beforeAll(async () => {
  if (!runsHere) return
  ;[anvil, primary] = await Promise.all([startAnvil(), createPostgresCluster()])
  standby = await createStandbyCluster(primary)
  proxy = await startDelayProxy(anvil.rpcUrl)
}, 120_000)

afterAll(async () => {
  for (const server of servers) await server.stop().catch(() => {})
  for (const { child } of ingesters) child.kill('SIGKILL')
  await proxy?.stop()
  await standby?.destroy()
  await primary?.destroy()
  await anvil?.stop()
})

test.skipIf(!runsHere)(
  'two ingesters and two serving processes reading a replica: the leading ingester is killed mid-backfill, the other takes over, the servers never answer past the replica, and the index equals the node',
  async () => {
    const chain = await generateChain(anvil.rpcUrl, { seed: 14, blocks: 60, txPerBlock: [1, 4] })
    const head = Number(chain.headNumber)
    const primaryUrl = primary.url()
    const standbyUrl = standby.url()

    // Serving processes first: they read the replica (empty for now) and write nothing but what users ask.
    for (let index = 0; index < 2; index++)
      servers.push(await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: primaryUrl, databaseReadUrl: standbyUrl, role: 'serve' }))

    // A WebSocket subscriber on a replica-reading server: told by the primary's NOTIFY, it reads the replica.
    const socket = new WebSocket(servers[0]!.url.replace('http', 'ws'))
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
    const heads: number[] = []
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString()) as { method?: string; params?: { result: { number: string } } }
      if (message.method === 'eth_subscription') heads.push(Number(message.params!.result.number))
    })
    socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] }))

    proxy.setDelay(UPSTREAM_DELAY_MS)
    const first = await startIngester(primaryUrl, proxy.url)
    const second = await startIngester(primaryUrl, proxy.url)

    // While they ingest, both servers are asked for their head and that block, again and again: a head a
    // server names must be a block it can answer, equal to the node's.
    const seen: { server: number; number: number; hash: string | null }[] = []
    let reading = true
    const readers = servers.map(async (server, index) => {
      while (reading) {
        const number = Number((await rpc(server.url, 'eth_blockNumber')).result)
        const block = (await rpc(server.url, 'eth_getBlockByNumber', [`0x${number.toString(16)}`, false])).result as { hash: string } | null
        seen.push({ server: index, number, hash: block?.hash ?? null })
        await sleep(25)
      }
    })

    const primarySql = postgres(primaryUrl, { max: 1, onnotice: () => {} })
    const indexedHead = async () => Number((await primarySql`select coalesce(max(number), -1)::int as head from blocks`)[0]!.head)
    try {
      // Mid-backfill: kill whichever ingester leads, as a crash would (no clean shutdown, no lock release).
      await expect.poll(indexedHead, { timeout: 60_000, interval: 50 }).toBeGreaterThanOrEqual(12)
      // Exactly one leads. Under load a process may not answer /readyz yet when the index gets there (CI saw
      // `null` for the other one): asked until both answer.
      let answers: (boolean | null)[] = []
      const both = async () => {
        answers = await Promise.all([leads(first.port), leads(second.port)])
        return answers.map(String).sort().join(', ')
      }
      await expect.poll(both, { timeout: 30_000, interval: 100, message: `${first.output()}\n${second.output()}` }).toBe('false, true')
      const leader = answers[0] === true ? first : second
      const other = leader === first ? second : first
      const killedAt = await indexedHead()
      expect(killedAt).toBeLessThan(head - 10)
      leader.child.kill('SIGKILL')
      const killedTime = Date.now()
      await expect.poll(() => leads(other.port), { timeout: TAKEOVER_MAX_MS, interval: 100 }).toBe(true)
      const takeoverMs = Date.now() - killedTime
      await expect.poll(indexedHead, { timeout: 60_000, interval: 100 }).toBe(head)
      console.log(`roles-replica: leader killed at block ${killedAt} of ${head}; the other ingester led after ${takeoverMs} ms`)

      // No gap, no duplicate on the primary.
      const [{ count, low, high }] =
        (await primarySql`select count(*)::int as count, min(number)::int as low, max(number)::int as high from blocks`) as unknown as [
          { count: number; low: number; high: number },
        ]
      expect({ count, low, high }).toEqual({ count: head + 1, low: 0, high: head })

      // The servers catch up with the replica, and answer exactly as the node does.
      for (const server of servers) await expect.poll(async () => Number((await rpc(server.url, 'eth_blockNumber')).result), { timeout: 20_000 }).toBe(head)
      reading = false
      await Promise.all(readers)
      const hashes = new Map<number, string>()
      for (let number = 0; number <= head; number++)
        hashes.set(number, (await anvilCall<{ hash: string }>(anvil.rpcUrl, 'eth_getBlockByNumber', [`0x${number.toString(16)}`, false])).hash)
      const named = seen.filter((entry) => entry.number > 0)
      expect(named.length).toBeGreaterThan(20)
      expect(named.filter((entry) => entry.hash !== hashes.get(entry.number))).toEqual([])
      // Every head once, in order, across the takeover.
      await expect.poll(() => heads.at(-1), { timeout: 10_000 }).toBe(head)
      socket.close()
      expect(heads).toEqual(Array.from({ length: heads.length }, (_, index) => heads[0]! + index))
      expect(heads[0]).toBeLessThanOrEqual(1)
      const facts = await readChainFacts(anvil.rpcUrl, { accounts: [...chain.senders, ...chain.recipients], contracts: chain.contracts })
      for (const server of servers) {
        const { nonEmpty } = await compareWithReference(server.dedicatedUrl, anvil.rpcUrl, [
          ...wholeChainQueries(facts),
          ...generateQueries(createRandom(14), facts, 300),
        ])
        expect(nonEmpty.eth_getLogs).toBeGreaterThan(0)
      }
    } finally {
      reading = false
      await Promise.all(readers)
      await primarySql.end()
    }
  },
  180_000,
)

test.skipIf(!runsHere)('a serving process on a replica writes nothing the reads bring, and takes registrations on the primary', async () => {
  const [server] = servers
  // The replica is read-only: any write a read made there would fail the read.
  const standbySql = postgres(standby.url(), { max: 1, onnotice: () => {} })
  try {
    await expect(standbySql`create table flashgate_probe (id int)`).rejects.toThrow(/read-only transaction/)
    // The servers' reads are there: their pools hold connections to the replica.
    await rpc(server!.url, 'eth_getBlockByNumber', ['latest', false])
    const [{ clients }] =
      (await standbySql`select count(*)::int as clients from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid()`) as unknown as [
        { clients: number },
      ]
    expect(clients).toBeGreaterThanOrEqual(1)
  } finally {
    await standbySql.end()
  }
  const wallet = '0x00000000000000000000000000000000000000a1'
  const registered = await fetch(`${server!.url}/v1/agents/builder-codes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ walletAddress: wallet }),
  })
  expect(registered.status).toBe(201)
  const { builderCode } = (await registered.json()) as { builderCode: string }
  // Read back through the other server, from the replica once it has replayed the write.
  await expect
    .poll(async () => ((await (await fetch(`${servers[1]!.url}/v1/agents/builder-codes/${wallet}`)).json()) as { builderCode?: string }).builderCode, {
      timeout: 10_000,
    })
    .toBe(builderCode)
})

test.skipIf(!runsHere)('--role ingest answers health, readiness and metrics only; --role serve never takes the ingest lock', async () => {
  const ingester = ingesters.find((candidate) => candidate.child.exitCode === null && candidate.child.signalCode === null)!
  const answer = await fetch(`http://127.0.0.1:${ingester.port}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }),
  })
  expect(answer.status).toBe(404)
  expect(((await answer.json()) as { error: { message: string } }).error.message).toMatch(/only ingests/)
  expect((await fetch(`http://127.0.0.1:${ingester.port}/metrics`)).status).toBe(200)
  for (const server of servers) expect(server.ingester.status().leader).toBe(false)
  // A serving process does not know the upstream's head: no sample (a 0 would read as a head gone back to genesis).
  for (const server of servers) {
    const text = await (await fetch(new URL('/metrics', server.url))).text()
    expect(text).toMatch(/^flashgate_index_head_block \d+$/m)
    expect(text).not.toMatch(/^flashgate_upstream_head_block /m)
  }
  expect(await (await fetch(`http://127.0.0.1:${ingester.port}/metrics`)).text()).toMatch(/^flashgate_upstream_head_block [1-9]\d*$/m)
})

// Last: it stops the primary.
test.skipIf(!runsHere)(
  "with the primary down, a serving process on the replica still answers its API keys' endpoints (keys are read from the replica)",
  async () => {
    const [server] = servers
    const head = (await rpc(server!.dedicatedUrl, 'eth_blockNumber')).result
    expect(head).toMatch(/^0x[0-9a-f]+$/)
    await primary.stop()
    // Past the key cache's 2 s: the key is looked up again.
    await sleep(2_500)
    expect(await rpc(server!.dedicatedUrl, 'eth_blockNumber')).toEqual({ jsonrpc: '2.0', id: 1, result: head })
    expect((await rpc(server!.dedicatedUrl, 'eth_getBlockReceipts', [head])).result).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getBlockReceipts', [head]))
    // A key the replica does not have is looked for on the primary (it may have been made a moment ago): with
    // the primary down that cannot be told, and the answer is the database's failure, never the endpoint.
    const refused = await rpc(server!.dedicatedUrl.replace(/[^/]+$/, 'fg_unknown'), 'eth_blockNumber')
    expect(refused).toEqual({ jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'internal error' } })
  },
)
