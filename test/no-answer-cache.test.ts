import { sql } from 'drizzle-orm'
import type { Hash, Hex } from 'viem'
import { expect, test } from 'vitest'
import { logFilter } from '../src/codecs/index.js'
import { createDb } from '../src/db/index.js'
import { createResolvers } from '../src/resolvers/index.js'
import { compareWithReference } from './fixtures/compare.js'
import { useFollowedChain } from './fixtures/followed-chain.js'
import { rpc } from './fixtures/gateway.js'
import { generateQueries, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'
import { countStatements } from './fixtures/statements.js'

/**
 * `--answer-cache-mb 0`: every answer is computed from the database on each request, through the paths
 * the cache otherwise hides (account reads by one index probe instead of a cached history, block receipts
 * inflated per request). They must answer exactly as anvil does, and twice in a row the same.
 */
const SEED = 80_210
const BLOCKS = 30
const GENERATED_QUERIES = 400

const followed = useFollowedChain({ seed: SEED, blocks: BLOCKS, gateway: { answerCacheMb: 0 } })

test('without an answer cache, every block, transaction, receipt and generated query answers as anvil, twice', async () => {
  const { anvil, gateway, facts } = followed()
  const queries = [...wholeChainQueries(facts), ...generateQueries(createRandom(SEED), facts, GENERATED_QUERIES)]
  for (const pass of [1, 2]) {
    const outcome = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
    for (const method of ['eth_getLogs', 'eth_getBlockReceipts', 'eth_getTransactionCount', 'eth_getBalance'])
      expect(outcome.nonEmpty[method] ?? 0, `pass ${pass}: ${method}`).toBeGreaterThan(20)
  }
})

test('without an answer cache, a repeated question goes to the database again, and an account read is one index probe', async () => {
  const { gateway, facts } = followed()
  const block = `0x${facts.head.toString(16)}`
  const [account] = facts.accounts
  const counter = countStatements(gateway.db)
  try {
    for (let pass = 0; pass < 2; pass++) {
      expect(await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', [block])).toHaveProperty('result')
      expect(await rpc(gateway.dedicatedUrl, 'eth_getBalance', [account, block])).toHaveProperty('result')
    }
  } finally {
    counter.stop()
  }
  expect(counter.statements.filter((statement) => statement.includes('"block_receipts"'))).toHaveLength(2)
  // The probe (resolvers/accounts.ts `fromChanges`) reads at most one change each side of the block; the
  // cached-history path would read all of the account's changes instead.
  const accountReads = counter.statements.filter((statement) => statement.includes('"account_changes"'))
  expect(accountReads).toHaveLength(2)
  for (const statement of accountReads) expect(statement).toContain('union all')
})

test('without an answer cache, blocks asked for at the same moment are read in one statement, each answered as anvil does', async () => {
  const { anvil, gateway, facts } = followed()
  const blocks = Array.from({ length: 12 }, (_, offset) => `0x${(facts.head - offset).toString(16)}`)
  // One of them not indexed (yet): its answer is null, as the node's.
  blocks.push(`0x${(facts.head + 1000).toString(16)}`)
  const batch = blocks.map((block, id) => ({ jsonrpc: '2.0', id, method: 'eth_getBlockReceipts', params: [block] }))
  const post = async (url: string) =>
    (await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(batch) })).json()) as {
      id: number
      result: unknown
    }[]
  const counter = countStatements(gateway.db)
  let answers: { id: number; result: unknown }[]
  try {
    answers = await post(gateway.dedicatedUrl)
  } finally {
    counter.stop()
  }
  const expected = await post(anvil.rpcUrl)
  const byId = (list: { id: number; result: unknown }[]) => [...list].sort((a, b) => a.id - b.id).map((answer) => answer.result)
  expect(byId(answers)).toEqual(byId(expected))
  expect(byId(answers).filter((result) => Array.isArray(result) && result.length > 0).length).toBeGreaterThan(5)
  const reads = counter.statements.filter((statement) => statement.includes('"block_receipts"'))
  expect(reads.length).toBeGreaterThan(0)
  expect(reads.length).toBeLessThan(blocks.length / 2)
})

test('logs of blocks asked for by hash at the same moment (ethers and viem polling each new block): the hashes are found in one statement, each answered as anvil does', async () => {
  const { anvil, gateway, facts } = followed()
  const hashes = await Promise.all(
    Array.from(
      { length: 8 },
      async (_, offset) =>
        ((await rpc(anvil.rpcUrl, 'eth_getBlockByNumber', [`0x${(facts.head - offset).toString(16)}`, false])).result as { hash: Hash }).hash,
    ),
  )
  const calls = [
    ...hashes.map((blockHash) => ({ blockHash })),
    { blockHash: `0x${'ab'.repeat(32)}` },
    { blockHash: hashes[0]!.toUpperCase().replace('0X', '0x') },
  ]
  const batch = calls.map((filter, id) => ({ jsonrpc: '2.0', id, method: 'eth_getLogs', params: [filter] }))
  const post = async (url: string) =>
    (
      (await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(batch) })).json()) as {
        id: number
        result?: unknown
        error?: unknown
      }[]
    ).sort((a, b) => a.id - b.id)
  const counter = countStatements(gateway.db)
  let answers: { id: number; result?: unknown; error?: unknown }[]
  try {
    answers = await post(gateway.dedicatedUrl)
  } finally {
    counter.stop()
  }
  const expected = await post(anvil.rpcUrl)
  expect(answers.map((answer) => answer.result)).toEqual(expected.map((answer) => answer.result))
  // The unknown hash is an error from both; the hash in capitals names the same block.
  expect(answers[8]!.error).toBeDefined()
  expect(expected[8]!.error).toBeDefined()
  expect(answers[9]!.result).toEqual(answers[0]!.result)
  expect(answers.filter((answer) => Array.isArray(answer.result) && answer.result.length > 0).length).toBeGreaterThan(3)
  const lookups = counter.statements.filter((statement) => statement.includes('from "blocks" where "blocks"."hash"'))
  expect(lookups.length).toBeGreaterThan(0)
  expect(lookups.length).toBeLessThan(calls.length / 2)
})

test.skipIf(!process.env.DATABASE_URL)(
  'on Postgres, log queries with one plan are prepared once per connection, filters planned for their values never are, and both answer as anvil',
  async () => {
    const { anvil, database, facts } = followed()
    const everyLog = (await rpc(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }])).result as { address: Hex; topics: Hash[] }[]
    const sample = everyLog.find((log) => log.topics.length > 0)!
    const range = { fromBlock: '0x0', toBlock: `0x${facts.head.toString(16)}` }
    const at = (block: string) => ({ kind: 'number', number: BigInt(block) }) as const
    // One connection, so that `pg_prepared_statements` (per session) shows every statement these calls sent.
    const db = await createDb({ databaseUrl: database.databaseUrl, poolSize: 1, migrate: false })
    try {
      const resolvers = createResolvers({ db, upstream: null, cacheBytes: 0, history: 'refuse' })
      const filters = [
        { addresses: [sample.address], topics: [[sample.topics[0]!]] },
        { addresses: [sample.address], topics: [] },
      ]
      for (const { addresses, topics } of filters) {
        const expected = (await rpc(anvil.rpcUrl, 'eth_getLogs', [{ ...range, address: addresses[0], topics }])).result as unknown[]
        expect(expected.length).toBeGreaterThan(0)
        for (let call = 0; call < 7; call++) {
          const logs = await resolvers.getLogs({
            filter: { addresses, topics, fromBlock: at(range.fromBlock), toBlock: at(range.toBlock) },
            limits: resolvers.limits,
          })
          expect(JSON.parse(JSON.stringify(logs))).toEqual(expected)
        }
      }
      const prepared = await db.query<{ statement: string; calls: number }>(
        sql`select statement, (generic_plans + custom_plans)::int as calls from pg_prepared_statements`,
      )
      const logStatements = prepared.filter((row) => row.statement.includes('from "logs"'))
      expect(logStatements).toHaveLength(1)
      expect(logStatements[0]!.calls).toBe(7)
      expect(logStatements[0]!.statement).toContain('topic0 =')
      expect(prepared.filter((row) => row.statement.includes('plan for values'))).toEqual([])
    } finally {
      await db.close()
    }
  },
)

test.skipIf(!process.env.DATABASE_URL)(
  'on Postgres, a log filter over one block (by hash, the polling of ethers and viem, or by number) is prepared whatever it names, and answers as anvil',
  async () => {
    const { anvil, database } = followed()
    const everyLog = (await rpc(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }])).result as {
      address: Hex
      topics: Hash[]
      blockHash: Hash
      blockNumber: Hex
    }[]
    const sample = everyLog.find((log) => log.topics.length > 1)!
    const db = await createDb({ databaseUrl: database.databaseUrl, poolSize: 1, migrate: false })
    try {
      const resolvers = createResolvers({ db, upstream: null, cacheBytes: 0, history: 'refuse' })
      // Filters a range is planned for (an address alone, a topic1): over one block, one plan serves every value.
      const filters = [
        { blockHash: sample.blockHash, address: sample.address, topics: [null, sample.topics[1]!] },
        { fromBlock: sample.blockNumber, toBlock: sample.blockNumber, address: sample.address },
      ]
      for (const params of filters) {
        const expected = (await rpc(anvil.rpcUrl, 'eth_getLogs', [params])).result as unknown[]
        expect(expected.length).toBeGreaterThan(0)
        for (let call = 0; call < 7; call++) {
          const logs = await resolvers.getLogs({ filter: logFilter.parse(params), limits: resolvers.limits })
          expect(JSON.parse(JSON.stringify(logs))).toEqual(expected)
        }
      }
      const prepared = await db.query<{ statement: string; calls: number }>(
        sql`select statement, (generic_plans + custom_plans)::int as calls from pg_prepared_statements`,
      )
      const logStatements = prepared.filter((row) => row.statement.includes('from "logs"'))
      expect(logStatements.map((row) => row.calls)).toEqual([7, 7])
      expect(prepared.filter((row) => row.statement.includes('plan for values'))).toEqual([])
    } finally {
      await db.close()
    }
  },
)
