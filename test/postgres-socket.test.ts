import postgres from 'postgres'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { isPostgresUrl } from '../src/db/index.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain, type GeneratedChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { createPostgresCluster, POSTGRES_BIN_DIR, type PostgresCluster } from './fixtures/postgres-cluster.js'
import { generateQueries, readChainFacts, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'
import { waitForSameHead } from './fixtures/sync.js'

/**
 * Postgres over its Unix socket, named as psql and libpq name it: the socket's directory as `?host=` (with a
 * user and no host before it, which WHATWG's URL parser refuses) or percent-encoded as the host. Its own
 * throwaway cluster whatever `DATABASE_URL` says, so it runs in the Postgres pass only.
 */
const runsHere = POSTGRES_BIN_DIR !== null && isPostgresUrl(process.env.DATABASE_URL ?? '')

let anvil: Anvil
let cluster: PostgresCluster
let chain: GeneratedChain
const gateways: TestGateway[] = []

beforeAll(async () => {
  if (!runsHere) return
  anvil = await startAnvil()
  chain = await generateChain(anvil.rpcUrl, { seed: 31, blocks: 12, txPerBlock: [1, 4] })
  cluster = await createPostgresCluster()
  await cluster.createDatabase('flashgate')
}, 120_000)

afterAll(async () => {
  for (const gateway of gateways) await gateway.stop()
  await anvil?.stop()
  await cluster?.destroy()
})

/** flashgate's sessions on the cluster, with the address they came from (null over a Unix socket). */
async function flashgateSessions(): Promise<{ application: string; address: string | null }[]> {
  const sql = postgres(cluster.url(), { max: 1, onnotice: () => {} })
  try {
    return await sql<{ application: string; address: string | null }[]>`
      select application_name as application, client_addr::text as address from pg_stat_activity
      where datname = 'flashgate' and application_name like 'flashgate%' order by 1`
  } finally {
    await sql.end()
  }
}

test.skipIf(!runsHere)(
  'an ingesting and a serving process reach Postgres through its Unix socket, named by ?host= or a percent-encoded host, and answer as anvil',
  async () => {
    const directory = cluster.socketDirectory
    const byQuery = `postgres://postgres@/flashgate?host=${directory}&port=${cluster.port}`
    const byHost = `postgresql://postgres@${encodeURIComponent(directory)}:${cluster.port}/flashgate`
    const ingester = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: byQuery })
    gateways.push(ingester)
    await waitForSameHead(ingester, anvil.rpcUrl)
    const server = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: byHost, role: 'serve' })
    gateways.push(server)
    await expect.poll(async () => (await rpc(server.dedicatedUrl, 'eth_blockNumber')).result, { timeout: 15_000 }).toBe(`0x${chain.headNumber.toString(16)}`)

    const sessions = await flashgateSessions()
    // The pool, the ingest lock's session and the serving process's LISTEN session: all over the socket.
    expect(new Set(sessions.map(({ application }) => application))).toEqual(new Set(['flashgate', 'flashgate-ingest', 'flashgate-listen']))
    expect(sessions.filter(({ address }) => address !== null)).toEqual([])

    const facts = await readChainFacts(anvil.rpcUrl, { accounts: [...chain.senders, ...chain.recipients], contracts: chain.contracts })
    for (const gateway of gateways) {
      const { nonEmpty } = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, [
        ...wholeChainQueries(facts),
        ...generateQueries(createRandom(31), facts, 150),
      ])
      expect(nonEmpty.eth_getLogs).toBeGreaterThan(0)
    }
  },
  120_000,
)
