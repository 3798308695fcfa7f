import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from './fixtures/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { type ChainFacts, generateQueries, readChainFacts, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'

/**
 * `--answer-cache-mb 0`: every answer is computed from the database on each request, through the paths
 * the cache otherwise hides (account reads by one index probe instead of a cached history, block receipts
 * inflated per request). They must answer exactly as anvil does, and twice in a row the same.
 */
const SEED = 80_210
const BLOCKS = 30
const GENERATED_QUERIES = 400

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let facts: ChainFacts

beforeAll(async () => {
  anvil = await startAnvil()
  const chain = await generateChain(anvil.rpcUrl, { seed: SEED, blocks: BLOCKS })
  facts = await readChainFacts(anvil.rpcUrl, { accounts: [...chain.senders, ...chain.recipients], contracts: chain.contracts })
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, answerCacheMb: 0 })
  await gateway.ingester.waitForBlock(facts.head)
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

test('without an answer cache, every block, transaction, receipt and generated query answers as anvil, twice', async () => {
  const queries = [...wholeChainQueries(facts), ...generateQueries(createRandom(SEED), facts, GENERATED_QUERIES)]
  for (const pass of [1, 2]) {
    const outcome = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
    for (const method of ['eth_getLogs', 'eth_getBlockReceipts', 'eth_getTransactionCount', 'eth_getBalance'])
      expect(outcome.nonEmpty[method] ?? 0, `pass ${pass}: ${method}`).toBeGreaterThan(20)
  }
})
