import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { sql } from 'drizzle-orm'
import { generateChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc, startTestGateway } from './fixtures/gateway.js'
import { generateQueries, readChainFacts, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

let anvil: Anvil
let database: TestDatabase

beforeAll(async () => {
  anvil = await startAnvil()
  database = await createTestDatabase()
})

afterAll(async () => {
  await anvil?.stop()
  await database?.drop()
})

test('stopping mid-backfill and restarting leaves no gap and no duplicate', async () => {
  const chain = await generateChain(anvil.rpcUrl, { seed: 11, blocks: 60 })
  // Small batches, so that the stop lands in the middle of the backfill.
  const first = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, ingestBatchSize: 4 })
  await first.ingester.waitForBlock(20)
  await first.stop()
  const stoppedAt = first.ingester.status().head!
  expect(stoppedAt).toBeLessThan(Number(chain.headNumber))

  // The chain moves on while flashgate is down.
  const more = await generateChain(anvil.rpcUrl, { seed: 12, blocks: 10 })
  const second = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, ingestBatchSize: 4 })
  try {
    await waitForSameHead(second, anvil.rpcUrl)
    const facts = await readChainFacts(anvil.rpcUrl, {
      accounts: [...chain.senders, ...chain.recipients],
      contracts: [...chain.contracts, ...more.contracts],
    })
    await compareWithReference(second.dedicatedUrl, anvil.rpcUrl, [...wholeChainQueries(facts), ...generateQueries(createRandom(12), facts, 300)])

    const referenceLogs = await anvilCall<unknown[]>(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }])
    const [counts] = await second.db.query<{ blocks: string; distinct_blocks: string; transactions: string; logs: string }>(sql`
      select (select count(*) from blocks)::text as blocks,
             (select count(distinct number) from blocks)::text as distinct_blocks,
             (select count(*) from transactions)::text as transactions,
             (select count(*) from logs)::text as logs`)
    expect(counts).toEqual({
      blocks: String(facts.head + 1),
      distinct_blocks: String(facts.head + 1),
      transactions: String(facts.transactionHashes.length),
      logs: String(referenceLogs.length),
    })
  } finally {
    await second.stop()
  }
})

test('a database that indexes another chain is refused', async () => {
  const other = await startAnvil({ chainId: 999 })
  const gateway = await startTestGateway({ upstreamRpc: other.rpcUrl, databaseUrl: database.databaseUrl })
  try {
    await expect.poll(() => gateway.ingester.status().lastError, { timeout: 10_000 }).toMatch(/indexes chain 31337 but the upstream is chain 999/)
    // The index is left as it was, and still served.
    expect((await rpc(gateway.url, 'eth_chainId')).result).toBe('0x7a69')
    expect(Number((await rpc(gateway.url, 'eth_blockNumber')).result)).toBeGreaterThan(60)
    const response = await fetch(`${gateway.url}/readyz`)
    expect(response.status).toBe(503)
  } finally {
    await gateway.stop()
    await other.stop()
  }
})
