import { afterAll, beforeAll, expect, test } from 'vitest'
import { sql } from 'drizzle-orm'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startFaultyProxy } from './fixtures/faulty-proxy.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { generateQueries, readChainFacts, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'
import { waitForSameHead } from './fixtures/sync.js'

let anvil: Anvil
let database: TestDatabase
let proxy: Awaited<ReturnType<typeof startFaultyProxy>>
let gateway: TestGateway

beforeAll(async () => {
  anvil = await startAnvil()
  // A provider without tracing and without eth_getBlockReceipts, as many public ones are.
  proxy = await startFaultyProxy(anvil.rpcUrl, { refuse: ['debug_traceBlockByHash', 'eth_getBlockReceipts'] })
  database = await createTestDatabase()
})

afterAll(async () => {
  await gateway?.stop()
  await proxy?.stop()
  await anvil?.stop()
  await database?.drop()
})

test('without tracing or eth_getBlockReceipts upstream, answers still equal the node (per-tx receipts, read-through state)', async () => {
  const chain = await generateChain(anvil.rpcUrl, { seed: 31, blocks: 25 })
  gateway = await startTestGateway({ upstreamRpc: proxy.url, databaseUrl: database.databaseUrl })
  await waitForSameHead(gateway, anvil.rpcUrl)
  const facts = await readChainFacts(anvil.rpcUrl, { accounts: [...chain.senders, ...chain.recipients], contracts: chain.contracts })
  await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, [...wholeChainQueries(facts), ...generateQueries(createRandom(31), facts, 400)])

  const [state] = await gateway.db.query<{ source: string; changes: string }>(sql`
    select (select value #>> '{}' from sync_state where key = 'account_source') as source,
           (select count(*) from account_changes)::text as changes`)
  expect(state).toMatchObject({ source: 'read-through', changes: '0' })

  // Without an answer cache, state read through is still remembered (in memory, not in the database): the
  // same reads a second time ask the node nothing.
  await gateway.stop()
  gateway = await startTestGateway({ upstreamRpc: proxy.url, databaseUrl: database.databaseUrl, answerCacheMb: 0 })
  await waitForSameHead(gateway, anvil.rpcUrl)
  const accountQueries = facts.accounts.flatMap((account) =>
    [0, Math.floor(facts.head / 2), facts.head].flatMap((number) =>
      (['eth_getBalance', 'eth_getTransactionCount'] as const).map((method) => ({ method, params: [account, `0x${number.toString(16)}`] })),
    ),
  )
  expect(accountQueries.length).toBeGreaterThan(20)
  const reads = () => proxy.forwarded('eth_getBalance') + proxy.forwarded('eth_getTransactionCount')
  const beforeFirstPass = reads()
  await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, accountQueries)
  const afterFirstPass = reads()
  // The new process remembers nothing yet: its first pass reads the node, or the second proves nothing.
  expect(afterFirstPass).toBeGreaterThan(beforeFirstPass)
  await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, accountQueries)
  expect(reads()).toBe(afterFirstPass)
})
