import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { sql } from 'drizzle-orm'
import { generateChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, flashblock, signedTransfer, startScriptedFeed } from './fixtures/flashblocks.js'
import { rpc, startTestGateway } from './fixtures/gateway.js'
import { generateQueries, readChainFacts, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'
import { anvilCall, blockHashAt, waitForSameHead } from './fixtures/sync.js'

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

/**
 * A feed that builds receipts itself (the frames' own, or flashgate's executor) writes `blockTimestamp` as the
 * node does only once it knows how: from a sealed block, or at start from the newest receipt the index holds.
 * Without the second, a gateway restarted on an idle chain answers its first pre-confirmed receipts in another
 * form than the sealed ones that replace them (anvil: a JSON number; built: a hex quantity).
 */
test('after a restart on an idle chain, the first pre-confirmed receipts write blockTimestamp as the node does', async () => {
  // A receipt for the index to hold, then a first gateway that indexes it and stops.
  const nonce = Number(await anvilCall<string>(anvil.rpcUrl, 'eth_getTransactionCount', [DEV_ACCOUNTS[4]!.address, 'latest']))
  const sent = await signedTransfer({ from: 4, nonce })
  await anvilCall(anvil.rpcUrl, 'eth_sendRawTransaction', [sent.raw])
  await anvilCall(anvil.rpcUrl, 'anvil_mine', ['0x1'])
  const sealed = await anvilCall<Record<string, unknown>>(anvil.rpcUrl, 'eth_getTransactionReceipt', [sent.hash])
  expect(typeof sealed.blockTimestamp).toBe('number')
  const first = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  const head = await waitForSameHead(first, anvil.rpcUrl)
  await first.stop()

  // Restarted with a feed, and no block sealed since: the form can only come from the index.
  const feed = await startScriptedFeed()
  const second = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, flashblocksWs: feed.url })
  try {
    await feed.connected()
    const next = await signedTransfer({ from: 4, nonce: nonce + 1 })
    feed.send(
      flashblock({ index: 0, blockNumber: head + 1, parentHash: await blockHashAt(anvil.rpcUrl, head), transactions: [next], format: 'legacy' }),
      'brotli',
    )
    await expect.poll(async () => (await rpc(second.url, 'eth_getTransactionReceipt', [next.hash])).result, { timeout: 10_000 }).not.toBeNull()
    const preConfirmed = (await rpc(second.url, 'eth_getTransactionReceipt', [next.hash])).result as Record<string, unknown>
    expect(preConfirmed.blockNumber).toBe(`0x${(head + 1).toString(16)}`)
    expect(typeof preConfirmed.blockTimestamp).toBe(typeof sealed.blockTimestamp)
  } finally {
    await second.stop()
    await feed.stop()
  }
})
