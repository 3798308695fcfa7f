import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'drizzle-orm'
import { pino } from 'pino'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { createPostgresCluster, POSTGRES_BIN_DIR, type PostgresCluster } from './fixtures/postgres-cluster.js'
import { type ChainFacts, generateQueries, readChainFacts, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'
import { isPostgresUrl } from '../src/db/index.js'

/** flashgate's ingest lock id (src/db/index.ts): "flsi". */
const INGEST_LOCK_ID = 0x666c7369

let anvil: Anvil
let cluster: PostgresCluster
let gateway: TestGateway | undefined

/**
 * The same runs in CI's PGlite and Postgres passes (its own throwaway clusters either way, whatever
 * `DATABASE_URL` says): the Postgres pass only.
 */
const SAME_IN_EVERY_PASS = !isPostgresUrl(process.env.DATABASE_URL ?? '')
const serverInstalled = POSTGRES_BIN_DIR !== null
/** Whether this pass runs the file: the server's binaries are installed, and it is the Postgres pass. */
const runsHere = serverInstalled && !SAME_IN_EVERY_PASS
if (!serverInstalled) console.warn('faults-postgres: skipped, no PostgreSQL server binaries (apt-get install postgresql, or set POSTGRES_BIN_DIR)')

beforeAll(async () => {
  if (!runsHere) return // Its own throwaway cluster, whatever DATABASE_URL says: this test kills it.
  ;[anvil, cluster] = await Promise.all([startAnvil(), createPostgresCluster()])
})

afterAll(async () => {
  await gateway?.stop()
  await cluster?.destroy()
  await anvil?.stop()
})

type Answer = { sentAt: number; status: number; body: unknown }

/**
 * Keeps JSON-RPC reads going against the gateway until stopped, and keeps every answer: a mix of the head,
 * blocks, receipts and logs, as a wallet or indexer would send them.
 */
function startLoad(url: string) {
  const answers: Answer[] = []
  const failures: string[] = []
  let running = true
  const calls = [
    { method: 'eth_blockNumber', params: [] },
    { method: 'eth_getBlockByNumber', params: ['latest', true] },
    { method: 'eth_getBlockReceipts', params: ['0x3'] },
    { method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: '0x5' }] },
    { method: 'eth_getBalance', params: ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', 'latest'] },
  ]
  async function worker(offset: number) {
    for (let round = offset; running; round++) {
      const call = calls[round % calls.length]!
      const sentAt = Date.now()
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: round, ...call }),
          signal: AbortSignal.timeout(20_000),
        })
        answers.push({ sentAt, status: response.status, body: await response.json() })
      } catch (error) {
        failures.push(`${call.method}: ${(error as Error).message}`)
      }
      await sleep(20)
    }
  }
  const workers = Promise.all([0, 1, 2, 3].map(worker))
  return {
    answers,
    failures,
    async stop() {
      running = false
      await workers
    },
  }
}

test.skipIf(!runsHere)(
  'Postgres killed and restarted mid-ingest: clean errors and 503 while down, then flashgate reconnects, takes the ingest lock again, and the index equals the node',
  async () => {
    const chain = await generateChain(anvil.rpcUrl, { seed: 41, blocks: 40 })
    const databaseUrl = await cluster.createDatabase('flashgate_faults')
    const logLines: string[] = []
    const logger = pino({ level: 'error' }, { write: (line: string) => logLines.push(line) })
    // Small batches: the kill lands in the middle of the backfill, between and during commits.
    gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl, ingestBatchSize: 3, logger })
    await gateway.ingester.waitForBlock(12)
    // On the dedicated endpoint: the public one refuses eth_getBlockReceipts.
    const load = startLoad(gateway.dedicatedUrl)
    await sleep(300)
    // The chain keeps moving while the database is away.
    const more = generateChain(anvil.rpcUrl, { seed: 42, blocks: 8 })

    await cluster.kill()
    const down = Date.now()
    await expect.poll(async () => (await fetch(`${gateway!.url}/readyz`)).status, { timeout: 15_000 }).toBe(503)
    expect(await (await fetch(`${gateway.url}/readyz`)).json()).toMatchObject({ ready: false, database: 'unreachable' })
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
    for (const [method, params] of [
      ['eth_blockNumber', []],
      ['eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x2' }]],
      ['eth_getBlockByNumber', ['0x1', false]],
    ] as const) {
      const answer = await rpc(gateway.url, method, [...params])
      expect(answer, method).toEqual({ jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'internal error' } })
    }
    // GraphQL too: masked, and logged without the statement or its parameters (here 500 addresses).
    const addresses = Array.from({ length: 500 }, (_, index) => `0x${(index + 1).toString(16).padStart(40, '0')}`)
    const graphql = await fetch(`${gateway.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        query: `{ logs(filter: { fromBlock: { number: 0 }, toBlock: { number: 2 }, addresses: ${JSON.stringify(addresses)} }) { nodes { logIndex } } }`,
      }),
    })
    const graphqlAnswer = JSON.stringify(await graphql.json())
    expect(graphqlAnswer).not.toMatch(/select|params/i)
    await expect.poll(() => gateway!.ingester.status(), { timeout: 15_000 }).toMatchObject({ leader: false, lastErrorSource: 'database' })
    // Down for a few seconds: long enough for the pool's connections and the ingester's retries to fail.
    await sleep(Math.max(0, 3_000 - (Date.now() - down)))
    await cluster.start()
    await more

    await waitForSameHead(gateway, anvil.rpcUrl, 60_000)
    await expect.poll(async () => (await fetch(`${gateway!.url}/readyz`)).status, { timeout: 20_000 }).toBe(200)
    const readyAt = Date.now()
    expect(gateway.ingester.status()).toMatchObject({ leader: true, lastError: null })
    // Served from the database again: the load goes on until it has had answers since the recovery (the
    // catch-up alone can be too quick to give the load any).
    const answeredBeforeRecovery = load.answers.length
    const resultsSinceRecovery = () => load.answers.slice(answeredBeforeRecovery).filter((answer) => 'result' in (answer.body as object)).length
    await expect.poll(resultsSinceRecovery, { timeout: 15_000 }).toBeGreaterThanOrEqual(200)
    await load.stop()

    // Throughout: every request got a JSON-RPC answer, a result or the masked internal error, never a dropped
    // connection, an HTML page or a message with SQL in it.
    expect(load.failures).toEqual([])
    const errors = load.answers.filter((answer) => (answer.body as { error?: unknown }).error !== undefined)
    const results = load.answers.filter((answer) => (answer.body as { result?: unknown }).result !== undefined)
    // No bound on errors against results: the load is closed-loop (each worker sends its next call when it has an
    // answer), so the faster the refusals while the database is away, the more of them. Since key look-ups share
    // one read, they come about twice as fast as when each request read the key alone (95 against 40 a second).
    expect(errors.length).toBeGreaterThan(0)
    expect(results.length).toBeGreaterThan(0)
    expect(results.length + errors.length).toBe(load.answers.length)
    // Once ready again, nothing fails: no pooled connection carries an error over from the restart.
    expect(load.answers.filter((answer) => answer.sentAt >= readyAt && 'error' in (answer.body as object))).toEqual([])
    for (const answer of errors) expect(answer.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32603, message: 'internal error' } })
    for (const answer of load.answers) expect(answer.status).toBe(200)
    // Logged once a second per kind of failure, with how many went unlogged since; not once per failed request.
    const logged = logLines.filter((line) => line.includes('unexpected error while serving a JSON-RPC call'))
    expect(logged.length).toBeGreaterThan(0)
    expect(logged.length).toBeLessThan(errors.length / 4)
    expect(logged.some((line) => (JSON.parse(line) as { suppressed?: number }).suppressed! > 0)).toBe(true)
    // Key lookups that failed too (the dedicated endpoint's key, once its cache entry expired): as rarely, and
    // never with the statement's parameters (the key's digest).
    const endpointLogged = logLines.filter((line) => line.includes('could not resolve a JSON-RPC endpoint'))
    expect(endpointLogged.length).toBeLessThan(errors.length / 4)
    for (const line of logLines) expect(line).not.toContain('params:')
    const graphqlLogged = logLines.filter((line) => line.includes('unexpected error while serving GraphQL'))
    expect(graphqlLogged.length).toBeGreaterThan(0)
    for (const line of graphqlLogged) expect(line.length).toBeLessThan(800)

    // Exactly one session holds the ingest lock: the gateway's new one.
    expect(await ingestLockHolders(gateway)).toBe(1)

    const facts = await readChainFacts(anvil.rpcUrl, {
      accounts: chain.senders.concat(chain.recipients),
      contracts: chain.contracts.concat((await more).contracts),
    })
    await expectIndexEqualsNode(gateway, facts, 41)
  },
)

/** No block lost or written twice, and every answer equal to the node's. */
async function expectIndexEqualsNode(gateway: TestGateway, facts: ChainFacts, seed: number) {
  const referenceLogs = await anvilCall<unknown[]>(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }])
  const [counts] = await gateway.db.query<Record<string, number>>(sql`
    select (select count(*) from blocks)::int as blocks, (select count(distinct number) from blocks)::int as distinct_blocks,
           (select min(number) from blocks)::int as first, (select max(number) from blocks)::int as last,
           (select count(*) from transactions)::int as transactions, (select count(*) from block_transactions)::int as block_transactions,
           (select count(*) from block_receipts)::int as block_receipts,
           (select count(*) from logs)::int as logs`)
  expect(counts).toEqual({
    blocks: facts.head + 1,
    distinct_blocks: facts.head + 1,
    first: 0,
    last: facts.head,
    transactions: facts.transactionHashes.length,
    block_transactions: facts.head + 1,
    block_receipts: facts.head + 1,
    logs: referenceLogs.length,
  })
  await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, [...wholeChainQueries(facts), ...generateQueries(createRandom(seed), facts, 200)])
}

async function ingestLockHolders(gateway: TestGateway): Promise<number> {
  const [row] = await gateway.db.query<{ holders: number }>(
    sql`select count(*)::int as holders from pg_locks where locktype = 'advisory' and classid = 0 and objid = ${INGEST_LOCK_ID} and granted
        and database = (select oid from pg_database where datname = current_database())`,
  )
  return row!.holders
}

test.skipIf(!runsHere)(
  'two gateways on one database across a Postgres restart: the lock goes with the old sessions, exactly one of them takes it again, the other stands by, and the index equals the node',
  async () => {
    const chain = await generateChain(anvil.rpcUrl, { seed: 43, blocks: 10 })
    const databaseUrl = await cluster.createDatabase('flashgate_pair')
    const first = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl, ingestBatchSize: 3 })
    const second = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl, ingestBatchSize: 3 })
    const pair = [first, second]
    try {
      await waitForSameHead(first, anvil.rpcUrl, 60_000)
      expect(pair.map((gateway) => gateway.ingester.status().leader).sort()).toEqual([false, true])

      const more = generateChain(anvil.rpcUrl, { seed: 44, blocks: 8 })
      await cluster.kill()
      await expect.poll(() => pair.map((gateway) => gateway.ingester.status().leader), { timeout: 15_000 }).toEqual([false, false])
      await sleep(1_000)
      await cluster.start()
      await more

      // Whichever wins, never both: sampled while they compete and catch up.
      const leaders: number[] = []
      const deadline = Date.now() + 4_000
      while (Date.now() < deadline) {
        leaders.push(pair.filter((gateway) => gateway.ingester.status().leader).length)
        await sleep(25)
      }
      expect(Math.max(...leaders)).toBe(1)
      expect(leaders.at(-1)).toBe(1)
      for (const gateway of pair) await waitForSameHead(gateway, anvil.rpcUrl, 60_000)
      expect(await ingestLockHolders(first)).toBe(1)
      const facts = await readChainFacts(anvil.rpcUrl, {
        accounts: chain.senders.concat(chain.recipients),
        contracts: chain.contracts.concat((await more).contracts),
      })
      await expectIndexEqualsNode(second, facts, 43)
    } finally {
      await Promise.all(pair.map((gateway) => gateway.stop()))
    }
  },
)
