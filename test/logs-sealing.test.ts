import { sql } from 'drizzle-orm'
import { pino } from 'pino'
import { describe, expect, test } from 'vitest'
import { createDb } from '../src/db/index.js'
import { attachLogPartitions, type LogPartition, logPartitions } from '../src/db/log-partitions.js'
import { partitionsToSeal, startLogSealer } from '../src/ingest/seal-logs.js'
import { compareWithReference } from './fixtures/compare.js'
import { useFollowedChain } from './fixtures/followed-chain.js'
import { generateQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'

const SEED = 5000
/** Partitions 10 blocks wide (the ingester's are 5,000), attached before the gateway ingests, so that several get sealed. */
const PARTITION_BLOCKS = 10
const MARGIN_BLOCKS = 5

const followed = useFollowedChain({
  seed: SEED,
  blocks: 60,
  // Every read goes to the database: the answer cache would hide what sealing did to it.
  gateway: { answerCacheMb: 0 },
  async beforeGateway(databaseUrl) {
    const db = await createDb({ databaseUrl })
    await attachLogPartitions(db, 0, 200, PARTITION_BLOCKS)
    await db.close()
  },
})

const partition = (name: string, from: number | null, to: number, sealed = false): LogPartition => ({ name, from, to, sealed, bare: false })

describe('partitionsToSeal', () => {
  const partitions = [
    partition('logs_unpartitioned', null, 5_000),
    partition('a', 5_000, 10_000),
    partition('b', 10_000, 15_000, true),
    partition('c', 15_000, 20_000),
  ]
  test('only what the head has left by the margin, not sealed yet, no wider than a partition, and above the first block kept', () => {
    expect(partitionsToSeal(partitions, { head: 19_000, firstBlock: null, marginBlocks: 300 }).map((each) => each.name)).toEqual(['a'])
    expect(partitionsToSeal(partitions, { head: 20_299, firstBlock: null, marginBlocks: 300 }).map((each) => each.name)).toEqual(['a', 'c'])
    expect(partitionsToSeal(partitions, { head: 20_298, firstBlock: null, marginBlocks: 300 }).map((each) => each.name)).toEqual(['a'])
    // Retention is about to drop `a`: sealing it would be wasted.
    expect(partitionsToSeal(partitions, { head: 30_000, firstBlock: 10_000, marginBlocks: 300 }).map((each) => each.name)).toEqual(['c'])
  })
})

test('partitions sealed while readers query answer every eth_getLogs exactly as anvil, during the seals and after', async () => {
  const { anvil, gateway, facts } = followed()
  const before = await logPartitions(gateway.db)
  const ready = partitionsToSeal(before, { head: Number(facts.head), firstBlock: null, marginBlocks: MARGIN_BLOCKS })
  expect(ready.length).toBeGreaterThanOrEqual(4)
  const queries = generateQueries(createRandom(SEED), facts, 1_200).filter((query) => query.method === 'eth_getLogs')
  expect(queries.length).toBeGreaterThan(200)

  const sealer = startLogSealer({ db: gateway.db, leads: () => true, logger: pino({ level: 'silent' }), intervalMs: 20, marginBlocks: MARGIN_BLOCKS })
  let during: Awaited<ReturnType<typeof compareWithReference>>
  try {
    // Small batches, so that reads interleave with the seals.
    during = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries, { chunk: 5 })
    expect(during.nonEmpty.eth_getLogs ?? 0).toBeGreaterThan(queries.length / 5)
    await expect.poll(() => sealer.status().sealed, { timeout: 30_000 }).toBe(ready.length)
  } finally {
    await sealer.stop()
  }
  expect(sealer.status().lastError).toBeNull()

  const after = await logPartitions(gateway.db)
  expect(after.filter((each) => each.sealed).map((each) => each.name)).toEqual(ready.map((each) => each.name))
  expect(after.map(({ from, to }) => [from, to])).toEqual(before.map(({ from, to }) => [from, to]))
  // A sealed partition lies in the order of its (address, topic0, block) index: by the address's key first.
  const [first] = ready
  const keys = await gateway.db.query<{ address: string; block: string }>(
    sql`select encode(substr(address, 13, 8), 'hex') as address, lpad(block_number::text, 12, '0') as block from ${sql.identifier(first!.name)} order by ctid`,
  )
  expect(keys.length).toBeGreaterThan(0)
  expect(keys.map((key) => key.address)).toEqual(keys.map((key) => key.address).sort())

  const again = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
  expect(again.nonEmpty).toEqual(during.nonEmpty)
}, 120_000)
