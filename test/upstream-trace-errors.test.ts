import { sql } from 'drizzle-orm'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startFaultyProxy } from './fixtures/faulty-proxy.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { readChainFacts } from './fixtures/queries.js'
import { waitForSameHead } from './fixtures/sync.js'

// A node that fails a trace for a while ("historical state not available", as a node behind or restarting
// says) still traces: the index keeps its own account history. Only a node that says it does not offer the
// method turns account reads to the node, for good.

let anvil: Anvil
const databases: TestDatabase[] = []
const stops: (() => Promise<void>)[] = []

beforeAll(async () => {
  anvil = await startAnvil()
})

afterAll(async () => {
  for (const stop of stops.reverse()) await stop()
  for (const database of databases) await database.drop()
  await anvil?.stop()
})

type FailCall = (method: string, params: unknown[]) => { code: number; message: string } | null

async function indexThrough(failCall: FailCall): Promise<{ gateway: TestGateway; source: string; changes: number }> {
  const proxy = await startFaultyProxy(anvil.rpcUrl, { failCall })
  stops.push(proxy.stop)
  const database = await createTestDatabase()
  databases.push(database)
  const gateway = await startTestGateway({ upstreamRpc: proxy.url, databaseUrl: database.databaseUrl })
  stops.push(gateway.stop)
  await waitForSameHead(gateway, anvil.rpcUrl)
  const [state] = await gateway.db.query<{ source: string; changes: number }>(sql`
    select (select value #>> '{}' from sync_state where key = 'account_source') as source,
           (select count(*) from account_changes)::int as changes`)
  return { gateway, source: state!.source, changes: state!.changes }
}

test('traces that fail for a while are retried: the account source stays the trace, and balances equal the node', async () => {
  const chain = await generateChain(anvil.rpcUrl, { seed: 47, blocks: 8 })
  let failed = 0
  const { gateway, source, changes } = await indexThrough((method) =>
    method === 'debug_traceBlockByHash' && failed++ < 2 ? { code: -32000, message: 'historical state not available' } : null,
  )
  expect(failed).toBeGreaterThan(2)
  expect(source).toBe('trace')
  expect(changes).toBeGreaterThan(0)
  const facts = await readChainFacts(anvil.rpcUrl, { accounts: [...chain.senders, ...chain.recipients], contracts: chain.contracts })
  const queries = facts.accounts.flatMap((account) =>
    [1, Math.floor(facts.head / 2), facts.head].flatMap((number) =>
      (['eth_getBalance', 'eth_getTransactionCount'] as const).map((method) => ({ method, params: [account, `0x${number.toString(16)}`] })),
    ),
  )
  await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
})

test('a provider that says the method is not on its plan turns account reads to the node', async () => {
  const { source, changes } = await indexThrough((method) =>
    method === 'debug_traceBlockByHash' ? { code: -32001, message: 'debug_traceBlockByHash is not available on the Free tier - upgrade to a paid plan' } : null,
  )
  expect(source).toBe('read-through')
  expect(changes).toBe(0)
})
