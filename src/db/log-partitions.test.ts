import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { sql } from 'drizzle-orm'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import { describe, expect, test } from 'vitest'
import { createTestDatabase, useTestDb } from '../../test/fixtures/db.js'
import { createStore } from '../ingest/store.js'
import { createDb, type Db, hexToBytea, isPostgresUrl, schema } from './index.js'
import { LOG_INDEX_KEYS, logAddressIsAnyOf, logTopic0IsAnyOf } from './log-keys.js'
import {
  attachLogPartitions,
  createLogPartitioner,
  dropLogPartition,
  type LogPartition,
  logPartitions,
  missingLogRanges,
  sealLogPartition,
} from './log-partitions.js'
import { MIGRATIONS_FOLDER, rowsOf, sqlState } from './session.js'

const usesPostgres = isPostgresUrl(process.env.DATABASE_URL ?? '')
const testDb = useTestDb()

const part = (from: number | null, to: number): LogPartition => ({ name: `logs_${from ?? 'old'}`, from, to, sealed: false, bare: false })

describe('missingLogRanges', () => {
  test('aligned ranges of the partition size, from the first block missing to past the last', () => {
    expect(missingLogRanges([], 12, 27, 10)).toEqual([
      { from: 10, to: 20 },
      { from: 20, to: 30 },
    ])
    expect(missingLogRanges([], 30_000_123, 30_000_123)).toEqual([{ from: 30_000_000, to: 30_005_000 }])
  })

  test('blocks an existing partition covers need nothing; a gap is filled up to its neighbours, whatever their size', () => {
    expect(missingLogRanges([part(null, 15_000)], 0, 14_999)).toEqual([])
    expect(missingLogRanges([part(null, 15_000)], 14_000, 16_000)).toEqual([{ from: 15_000, to: 20_000 }])
    // Partitions of 10 blocks made before, then the default size: the gap between them exactly, no overlap.
    expect(missingLogRanges([part(0, 10), part(10, 20), part(40, 50)], 5, 45, 25)).toEqual([
      { from: 20, to: 25 },
      { from: 25, to: 40 },
    ])
  })
})

/** `count` logs over blocks [from, to), each from one of a few addresses and events, in block order. */
function logRows(from: number, to: number, perBlock: number) {
  const rows = []
  for (let block = from; block < to; block++)
    for (let index = 0; index < perBlock; index++) {
      const seed = (block * 7919 + index * 104_729) % 1_000_003
      rows.push({
        blockNumber: block,
        logIndex: index,
        blockHash: hexToBytea(`0x${block.toString(16).padStart(64, '0')}`),
        blockTimestamp: 1_700_000_000 + block,
        transactionHash: hexToBytea(`0x${(block * 1000 + index).toString(16).padStart(64, '0')}`),
        transactionIndex: index,
        address: hexToBytea(`0x${(seed % 7).toString(16).padStart(40, '0')}`),
        topic0: seed % 11 === 0 ? null : hexToBytea(`0x${(seed % 3).toString(16).padStart(2, '0').padEnd(64, '0')}`),
        topic1: hexToBytea(`0x${seed.toString(16).padStart(64, '0')}`),
        topic2: null,
        topic3: null,
        data: hexToBytea(`0x${'ab'.repeat(seed % 40)}`),
      })
    }
  return rows
}

const everyLog = (db: Db) =>
  db.query<Record<string, unknown>>(sql`select block_number::text, log_index, encode(address, 'hex') as address, encode(topic0, 'hex') as topic0,
    encode(topic1, 'hex') as topic1, encode(data, 'hex') as data, encode(transaction_hash, 'hex') as tx from logs order by logs.block_number, log_index`)

/** The (address, topic0, block) keys of a partition's rows in the order they lie on disk (a missing topic0 sorts last, as in the index). */
const physicalOrder = (db: Db, name: string) =>
  db.query<{ key: string }>(sql`select encode(substr(address, 13, 8), 'hex') || ':' || coalesce(encode(substr(topic0, 1, 8), 'hex'), '~') || ':'
    || lpad(block_number::text, 12, '0') as key from ${sql.identifier(name)} order by ctid`)

/** The keys of a table's indexes, sorted: what it is indexed by, whatever the indexes are named. */
const indexKeys = async (db: Db, table: string) =>
  (await db.query<{ indexdef: string }>(sql`select indexdef from pg_indexes where tablename = ${table}`))
    // A sealed partition's packing is checked apart (fillfactors below).
    .map((row) => row.indexdef.replace(/^.* USING (btree )?/, '').replace(/ WITH \(fillfactor='100'\)$/, ''))
    .sort()

/** A partition with every index: its primary key and the secondary indexes of `LOG_INDEX_KEYS` (a BRIN would read `brin (…)`). */
const EVERY_INDEX = [
  '(block_number, log_index)',
  '(substr(address, 13, 8), substr(topic0, 1, 8), block_number)',
  '(substr(topic0, 1, 8), block_number)',
  '(substr(topic1, 25, 8), block_number)',
  '(substr(topic2, 25, 8), block_number)',
]

/** How many neighbours lie out of order: about half of randomly placed rows, none of sorted ones. */
const outOfOrder = (keys: string[]) => keys.filter((key, index) => index > 0 && key < keys[index - 1]!).length

describe(`logs partitions (${usesPostgres ? 'Postgres' : 'PGlite'})`, () => {
  test('the ingester attaches partitions ahead of its blocks, and COPY lands in them', async () => {
    const db = testDb()
    const partitioner = createLogPartitioner(db, { size: 10, aheadBlocks: 15 })
    await partitioner.ensure(100, 104)
    expect((await logPartitions(db)).map(({ from, to }) => [from, to])).toEqual([
      [100, 110],
      [110, 120],
    ])
    await db.copyInTransaction([{ table: schema.logs, rows: logRows(100, 120, 20) }])
    expect((await everyLog(db)).length).toBe(400)
    // The ingester's ANALYZE after a backfill reaches the partitions.
    await createStore({ db }).analyze()
    expect((await db.query(sql`select 1 from pg_stats where tablename = 'logs_100' and attname = 'address'`)).length).toBe(1)
    // A row outside every partition is refused (the store forgets what it knew and looks again).
    await expect(db.copyInTransaction([{ table: schema.logs, rows: logRows(130, 131, 1) }])).rejects.toMatchObject({ code: '23514' })
  })

  test('sealing rewrites a partition in (address, topic0, block) order, keeping every row, index and answer', async () => {
    const db = testDb()
    const before = await everyLog(db)
    const [first] = await logPartitions(db)
    const order = (await physicalOrder(db, first!.name)).map((row) => row.key)
    expect(outOfOrder(order)).toBeGreaterThan(order.length / 4)

    expect(await sealLogPartition(db, first!)).toBe('sealed')
    const after = await logPartitions(db)
    expect(after.map(({ name, from, to, sealed }) => ({ name, from, to, sealed }))).toEqual([
      { name: 'logs_100', from: 100, to: 110, sealed: true },
      { name: 'logs_110', from: 110, to: 120, sealed: false },
    ])
    // In index order, but for the odd row Postgres places on an earlier page with room (bulk extension).
    const sealedOrder = (await physicalOrder(db, 'logs_100')).map((row) => row.key)
    expect([...sealedOrder].sort()).toEqual([...order].sort())
    expect(outOfOrder(sealedOrder)).toBeLessThanOrEqual(order.length / 100)
    expect(await everyLog(db)).toEqual(before)
    // The new table has every index of its own, its primary key named as the old one's was: a duplicate is
    // refused, a selective read uses them. The parent has none.
    const key = await db.query<{ name: string }>(sql`select i.relname as name from pg_index x join pg_class i on i.oid = x.indexrelid
      where x.indrelid = 'logs_100'::regclass and x.indisprimary`)
    expect(key.map((row) => row.name)).toEqual(['logs_100_pk'])
    expect(await indexKeys(db, 'logs_100')).toEqual(EVERY_INDEX)
    expect(await indexKeys(db, 'logs')).toEqual([])
    expect((await logPartitions(db)).find((each) => each.name === 'logs_100')?.bare).toBe(false)
    // Packed full (it never changes again), where the partition still written keeps B-trees' room for inserts.
    const fillfactors = async (table: string) => {
      const rows = await db.query<{ options: string | null }>(sql`select array_to_string(i.reloptions, ',') as options
        from pg_index x join pg_class i on i.oid = x.indexrelid where x.indrelid = ${table}::regclass order by i.relname`)
      return rows.map((row) => row.options)
    }
    expect(await fillfactors('logs_100')).toEqual(Array(EVERY_INDEX.length).fill('fillfactor=100'))
    expect(await fillfactors('logs_110')).toEqual(Array(EVERY_INDEX.length).fill(null))
    await expect(db.copyInTransaction([{ table: schema.logs, rows: logRows(105, 106, 1) }])).rejects.toMatchObject({ code: '23505' })
    const plan = await db.query<{ plan: string }>(sql`explain (format text) select * from logs
      where ${logAddressIsAnyOf(schema.logs.address, [`0x${'0'.repeat(39)}3`])} and ${logTopic0IsAnyOf(schema.logs.topic0, [`0x01${'0'.repeat(62)}`])}
        and block_number between 100 and 109`)
    // An index scan, or a bitmap of one (with the statistics the seal leaves, the planner may take either).
    expect(plan.map((line) => Object.values(line)[0]).join('\n')).toMatch(/(using|Index Scan on) logs_100_\w+_idx/)
    // The new table comes with its statistics: the ingester's refreshes never analyse it again.
    expect((await db.query(sql`select 1 from pg_stats where tablename = 'logs_100' and attname = 'address'`)).length).toBe(1)
    // Sealed already: nothing to do.
    expect(await sealLogPartition(db, first!)).toBe('gone')
    expect(await db.query(sql`select 1 from pg_class where relname like '%sealing%'`)).toEqual([])
  })

  test('a refresh while following analyses the partitions still written and those never analysed, not the sealed ones', async () => {
    const db = testDb()
    const plannedRows = async (name: string) =>
      Number((await db.query<{ rows: number }>(sql`select reltuples::float8 as rows from pg_class where relname = ${name}`))[0]!.rows)
    const more = (from: number, to: number) => logRows(from, to, 20).map((row) => ({ ...row, logIndex: row.logIndex + 100 }))
    expect([await plannedRows('logs_100'), await plannedRows('logs_110')]).toEqual([200, 200])
    // Rows the statistics do not know of yet: in the partition followed, in the sealed one (never, outside a test),
    // and in a partition attached and filled without ever being analysed.
    await attachLogPartitions(db, 400, 409, 10)
    await db.copyInTransaction([{ table: schema.logs, rows: [...more(100, 110), ...more(110, 120), ...logRows(400, 405, 4)] }])
    try {
      await createStore({ db }).analyze(115)
      expect(await plannedRows('logs_110')).toBe(400)
      expect(await plannedRows('logs_400')).toBe(20)
      expect(await plannedRows('logs_100')).toBe(200)
    } finally {
      await db.query(sql`delete from logs where log_index >= 100`)
      await dropLogPartition(db, (await logPartitions(db)).find((partition) => partition.from === 400)!)
    }
  })

  test('a refresh while following analyses another block table once it has doubled since its statistics, not before', async () => {
    const db = testDb()
    const store = createStore({ db })
    const plannedRows = async () =>
      Number((await db.query<{ rows: number }>(sql`select reltuples::float8 as rows from pg_class where relname = 'account_changes'`))[0]!.rows)
    const changes = (from: number, count: number) =>
      Array.from({ length: count }, (_, index) => ({
        address: hexToBytea(`0x${(from + index).toString(16).padStart(40, '0')}`),
        blockNumber: 1,
        balanceBefore: '0',
        nonceBefore: 0,
        balance: '1',
        nonce: 1,
      }))
    try {
      await db.copyInTransaction([{ table: schema.accountChanges, rows: changes(0, 2_000) }])
      await store.analyze(0)
      expect(await plannedRows()).toBe(2_000)
      // A quarter more: the statistics stay as they were.
      await db.copyInTransaction([{ table: schema.accountChanges, rows: changes(2_000, 500) }])
      await store.analyze(0)
      expect(await plannedRows()).toBe(2_000)
      // More than twice the pages analysed: refreshed.
      await db.copyInTransaction([{ table: schema.accountChanges, rows: changes(2_500, 2_500) }])
      await store.analyze(0)
      expect(await plannedRows()).toBe(5_000)
    } finally {
      await db.query(sql`delete from account_changes`)
    }
  })

  test('dropping a partition takes exactly its blocks\u2019 logs', async () => {
    const db = testDb()
    const before = await everyLog(db)
    const [first] = await logPartitions(db)
    expect(await dropLogPartition(db, first!)).toBe(true)
    expect(await everyLog(db)).toEqual(before.filter((row) => Number(row.block_number) >= 110))
    expect((await logPartitions(db)).map((partition) => partition.name)).toEqual(['logs_110'])
  })

  test('a bare partition is written and read without its secondary indexes, which the partitioner builds before it writes there near the head, and a seal builds', async () => {
    const db = testDb()
    const partitioner = createLogPartitioner(db, { size: 10, aheadBlocks: 0 })
    const partitionOf = async (from: number) => (await logPartitions(db)).find((each) => each.from === from)!
    try {
      // Far below the head (it ends at or below `bareBelow`): bare, a BRIN on its blocks alone.
      await partitioner.ensure(500, 503, { bareBelow: 530 })
      expect(await partitionOf(500)).toMatchObject({ bare: true, sealed: false })
      expect(await indexKeys(db, 'logs_500')).toEqual(["brin (block_number) WITH (pages_per_range='32')"])
      const rows = logRows(500, 510, 30)
      await db.copyInTransaction([{ table: schema.logs, rows }])
      const address = `0x${'0'.repeat(39)}3` as const
      const topic0 = `0x01${'0'.repeat(62)}` as const
      const selective = () =>
        db.query<{ block: string; index: number }>(sql`select block_number::text as block, log_index as index from logs
          where ${logAddressIsAnyOf(schema.logs.address, [address])} and ${logTopic0IsAnyOf(schema.logs.topic0, [topic0])}
            and block_number between 500 and 509 order by 1, 2`)
      const expected = rows
        .filter(
          (row) => Buffer.from(row.address).toString('hex').endsWith('3') && row.topic0 !== null && Buffer.from(row.topic0).toString('hex').startsWith('01'),
        )
        .map((row) => ({ block: String(row.blockNumber), index: row.logIndex }))
      expect(expected.length).toBeGreaterThan(10)
      expect(await selective()).toEqual(expected)
      // Whole blocks can be read through the BRIN (a table this small is read whole unless told otherwise).
      const plan = await db.transaction(async (tx) => {
        await tx.execute(sql`set local enable_seqscan = off`)
        return rowsOf(await tx.execute(sql`explain (format text) select * from logs where block_number = 505`))
      })
      expect(plan.map((line) => Object.values(line as object)[0]).join('\n')).toMatch(/logs_500_block_brin/)

      // A partition that ends above `bareBelow` is attached with its indexes.
      await partitioner.ensure(510, 512, { bareBelow: 515 })
      expect(await partitionOf(510)).toMatchObject({ bare: false })
      expect(await indexKeys(db, 'logs_510')).toEqual(EVERY_INDEX)

      // The head came to lie in the bare one (the upstream's moved back): indexed before the batch is written,
      // its BRIN dropped; a duplicate is refused from then on.
      await partitioner.ensure(508, 509, { bareBelow: 400 })
      expect(await partitionOf(500)).toMatchObject({ bare: false, sealed: false })
      expect(await indexKeys(db, 'logs_500')).toEqual(EVERY_INDEX)
      expect(await selective()).toEqual(expected)
      await expect(db.copyInTransaction([{ table: schema.logs, rows: logRows(505, 506, 1) }])).rejects.toMatchObject({ code: '23505' })

      // Another bare one, sealed: the seal builds every index. A duplicate that got into it (never through the
      // store, whose block rows refuse a block written twice) fails the seal, which leaves it as it was.
      await partitioner.ensure(520, 521, { bareBelow: 1_000 })
      await db.copyInTransaction([{ table: schema.logs, rows: logRows(520, 530, 5) }])
      await db.copyInTransaction([{ table: schema.logs, rows: logRows(525, 526, 1) }])
      expect(await partitionOf(520)).toMatchObject({ bare: true })
      expect(await sealLogPartition(db, await partitionOf(520)).then(String, sqlState)).toBe('23505')
      expect(await partitionOf(520)).toMatchObject({ bare: true, sealed: false })
      expect((await everyLog(db)).filter((row) => Number(row.block_number) >= 520).length).toBe(51)
      await db.query(sql`delete from logs_520 where ctid = (select max(ctid) from logs_520)`)
      expect(await sealLogPartition(db, await partitionOf(520))).toBe('sealed')
      expect(await partitionOf(520)).toMatchObject({ bare: false, sealed: true })
      expect(await indexKeys(db, 'logs_520')).toEqual(EVERY_INDEX)
      expect((await everyLog(db)).filter((row) => Number(row.block_number) >= 520).length).toBe(50)
    } finally {
      for (const partition of await logPartitions(db)) if ([500, 510, 520].includes(partition.from!)) await dropLogPartition(db, partition)
    }
  })

  test('a partitioner that remembers a partition dropped since attaches it again once it forgets', async () => {
    const db = testDb()
    const partitioner = createLogPartitioner(db, { size: 10, aheadBlocks: 0 })
    await partitioner.ensure(300, 305)
    await dropLogPartition(db, (await logPartitions(db)).find((partition) => partition.from === 300)!)
    // Still remembered: nothing attached, and the COPY is refused (the store then calls `forget`).
    await partitioner.ensure(300, 305)
    await expect(db.copyInTransaction([{ table: schema.logs, rows: logRows(300, 301, 1) }])).rejects.toMatchObject({ code: '23514' })
    partitioner.forget()
    await partitioner.ensure(300, 305)
    await db.copyInTransaction([{ table: schema.logs, rows: logRows(300, 301, 1) }])
    expect((await logPartitions(db)).map(({ from, to }) => [from, to])).toContainEqual([300, 310])
  })
})

describe.skipIf(!usesPostgres)('sealing beside readers (Postgres)', () => {
  test('readers get whole answers all through a seal; a reader that holds on makes the swap give up and change nothing', async () => {
    const db = testDb()
    await attachLogPartitions(db, 200, 299, 100)
    await db.copyInTransaction([{ table: schema.logs, rows: logRows(200, 300, 400) }])
    const [partition] = (await logPartitions(db)).filter((each) => each.from === 200)
    const address = hexToBytea(`0x${'0'.repeat(39)}5`)
    const count = async () =>
      Number((await db.query<{ n: string }>(sql`select count(*)::text as n from logs where address = ${address} and block_number between 200 and 299`))[0]!.n)
    const expected = await count()
    expect(expected).toBeGreaterThan(1000)

    // A transaction that has read `logs` and stays open holds the lock the swap needs.
    const holder = postgres(
      process.env.DATABASE_URL!.replace(/\/[^/]*$/, `/${(await db.query<{ name: string }>(sql`select current_database() as name`))[0]!.name}`),
      {
        max: 1,
        onnotice: () => {},
      },
    )
    let release = () => {}
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    let reading: Promise<unknown> = Promise.resolve()
    const holding = holder.begin(async (tx) => {
      await tx`select count(*) from logs where block_number = 250`
      // Readers keep answering while the swap waits for this one (lock_timeout bounds each wait).
      reading = Promise.all(Array.from({ length: 5 }, () => count()))
      await held
    })
    await expect
      .poll(async () => (await db.query(sql`select 1 from pg_locks l join pg_class c on c.oid = l.relation where c.relname = 'logs' and l.granted`)).length)
      .toBeGreaterThan(0)
    expect(await sealLogPartition(db, partition!, { swapAttempts: 3, retryMs: 50 })).toBe('busy')
    expect(await reading).toEqual(Array(5).fill(expected))
    release()
    await holding
    await holder.end()
    expect((await logPartitions(db)).find((each) => each.from === 200)?.sealed).toBe(false)
    expect(await db.query(sql`select 1 from pg_class where relname like '%sealing%'`)).toEqual([])

    // With nobody holding on, readers running all through the seal always see every log.
    let sealing = true
    const answers: number[] = []
    const readers = Promise.all(
      Array.from({ length: 3 }, async () => {
        while (sealing) answers.push(await count())
      }),
    )
    try {
      expect(await sealLogPartition(db, partition!)).toBe('sealed')
    } finally {
      sealing = false
      await readers
    }
    expect(answers.length).toBeGreaterThan(0)
    expect(new Set(answers)).toEqual(new Set([expected]))
  })
})

/**
 * An index as an older flashgate wrote it: the migrations up to and including `lastTag` only, then the
 * `statements`, and `rows` in `logs`.
 */
async function writeOlderIndex(databaseUrl: string, lastTag: string, rows: (typeof schema.logs.$inferInsert)[], statements: string[] = []): Promise<void> {
  const folder = mkdtempSync(join(tmpdir(), 'flashgate-migrations-'))
  try {
    cpSync(MIGRATIONS_FOLDER, folder, { recursive: true })
    const journalPath = join(folder, 'meta', '_journal.json')
    const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as { entries: { tag: string }[] }
    journal.entries = journal.entries.slice(0, journal.entries.findIndex((entry) => entry.tag === lastTag) + 1)
    writeFileSync(journalPath, JSON.stringify(journal))
    if (isPostgresUrl(databaseUrl)) {
      const client = postgres(databaseUrl, { max: 1, onnotice: () => {} })
      const db = drizzlePostgres(client)
      await migratePostgres(db, { migrationsFolder: folder })
      for (const statement of statements) await db.execute(sql.raw(statement))
      await db.insert(schema.logs).values(rows)
      await client.end()
    } else {
      const client = new PGlite(databaseUrl)
      const db = drizzlePglite(client)
      await migratePglite(db, { migrationsFolder: folder })
      for (const statement of statements) await db.execute(sql.raw(statement))
      await db.insert(schema.logs).values(rows)
      await client.close()
    }
  } finally {
    rmSync(folder, { recursive: true, force: true })
  }
}

/**
 * Writes an older index (`writeOlderIndex`) into a fresh database, not the run's migrated template, opens it as
 * flashgate does (which migrates it the rest of the way) and hands it to `check`; drops it afterwards.
 */
async function withOlderIndex(
  lastTag: string,
  rows: (typeof schema.logs.$inferInsert)[],
  statements: string[],
  check: (db: Db) => Promise<void>,
): Promise<void> {
  const database = usesPostgres ? await createTestDatabase({ empty: true }) : null
  const directory = database === null ? mkdtempSync(join(tmpdir(), 'flashgate-older-index-')) : null
  const databaseUrl = database?.databaseUrl ?? join(directory!, 'pglite')
  try {
    await writeOlderIndex(databaseUrl, lastTag, rows, statements)
    const db = await createDb({ databaseUrl })
    try {
      await check(db)
    } finally {
      await db.close()
    }
  } finally {
    await database?.drop()
    if (directory !== null) rmSync(directory, { recursive: true, force: true })
  }
}

test('an index written before partitioning keeps its logs in one partition, readable as before, and new blocks get partitions of their own', async () => {
  const rows = [...logRows(7, 9, 3), ...logRows(12_345, 12_346, 2)]
  await withOlderIndex('0009_block_bodies', rows, [], async (db) => {
    expect(await logPartitions(db)).toEqual([{ name: 'logs_unpartitioned', from: null, to: 15_000, sealed: false, bare: false }])
    expect((await everyLog(db)).map((row) => [row.block_number, row.log_index])).toEqual(rows.map((row) => [String(row.blockNumber), row.logIndex]))
    await attachLogPartitions(db, 15_000, 15_001)
    await db.copyInTransaction([{ table: schema.logs, rows: logRows(15_000, 15_002, 2) }])
    expect((await logPartitions(db)).map(({ name, from, to }) => [name, from, to])).toEqual([
      ['logs_unpartitioned', null, 15_000],
      ['logs_15000', 15_000, 20_000],
    ])
    expect((await everyLog(db)).length).toBe(rows.length + 4)
    // Its indexes are keyed as the new partitions' are (migrations 0011 and 0012), and its own (0015).
    expect(await indexKeys(db, 'logs_unpartitioned')).toEqual(EVERY_INDEX)
    expect(await indexKeys(db, 'logs_15000')).toEqual(EVERY_INDEX)
  })
})

test('an index whose partitions shared the parent\u2019s indexes keeps them as each partition\u2019s own, with every log and answer', async () => {
  // An index at migration 0014: partitions made then take the parent's indexes, one of them sealed.
  const rows = [...logRows(10, 20, 12), ...logRows(5_000, 5_010, 12)]
  const partitions = [
    'create table logs_0 partition of logs for values from (0) to (5000)',
    'alter table logs_0 add constraint logs_0_range check (block_number >= 0 and block_number < 5000)',
    "comment on table logs_0 is 'flashgate: sealed'",
    'create table logs_5000 partition of logs for values from (5000) to (10000)',
  ]
  await withOlderIndex('0014_undone_logs', rows, partitions, async (db) => {
    // The parent keeps no index; each partition has every index of its own.
    expect(await indexKeys(db, 'logs')).toEqual([])
    expect(await indexKeys(db, 'logs_0')).toEqual(EVERY_INDEX)
    expect(await indexKeys(db, 'logs_5000')).toEqual(EVERY_INDEX)
    expect(await logPartitions(db)).toEqual([
      { name: 'logs_0', from: 0, to: 5_000, sealed: true, bare: false },
      { name: 'logs_5000', from: 5_000, to: 10_000, sealed: false, bare: false },
    ])
    expect((await everyLog(db)).map((row) => [row.block_number, row.log_index])).toEqual(rows.map((row) => [String(row.blockNumber), row.logIndex]))
    await expect(db.copyInTransaction([{ table: schema.logs, rows: logRows(15, 16, 1) }])).rejects.toMatchObject({ code: '23505' })
    // New partitions get the indexes of their own too.
    await attachLogPartitions(db, 10_000, 10_001)
    expect(await indexKeys(db, 'logs_10000')).toEqual(EVERY_INDEX)
  })
})

test('an index whose partitions shared the parent\u2019s primary key keeps it as each partition\u2019s own, bare ones included', async () => {
  // An index at migration 0015: a bare partition had the parent's primary key alone, the others every index.
  const rows = [...logRows(10, 20, 12), ...logRows(5_000, 5_010, 12)]
  const partitions = [
    'create table logs_0 (like logs)',
    ...Object.entries(LOG_INDEX_KEYS).map(([suffix, keys]) => `create index logs_0_${suffix} on logs_0 (${keys})`),
    'alter table logs attach partition logs_0 for values from (0) to (5000)',
    'create table logs_5000 (like logs)',
    'alter table logs attach partition logs_5000 for values from (5000) to (10000)',
  ]
  await withOlderIndex('0015_logs_partition_indexes', rows, partitions, async (db) => {
    expect(await indexKeys(db, 'logs')).toEqual([])
    expect(await indexKeys(db, 'logs_0')).toEqual(EVERY_INDEX)
    expect(await indexKeys(db, 'logs_5000')).toEqual(['(block_number, log_index)'])
    expect(await logPartitions(db)).toEqual([
      { name: 'logs_0', from: 0, to: 5_000, sealed: false, bare: false },
      { name: 'logs_5000', from: 5_000, to: 10_000, sealed: false, bare: true },
    ])
    expect((await everyLog(db)).map((row) => [row.block_number, row.log_index])).toEqual(rows.map((row) => [String(row.blockNumber), row.logIndex]))
    // Each key still refuses a duplicate in its partition.
    for (const block of [15, 5_005])
      await expect(db.copyInTransaction([{ table: schema.logs, rows: logRows(block, block + 1, 1) }])).rejects.toMatchObject({ code: '23505' })
    // The bare one gets the rest of its indexes when the head comes to lie in it; a new partition has its own key.
    await createLogPartitioner(db, { size: 5_000, aheadBlocks: 0 }).ensure(5_010, 5_011)
    expect(await indexKeys(db, 'logs_5000')).toEqual(EVERY_INDEX)
    await attachLogPartitions(db, 10_000, 10_001)
    expect(await indexKeys(db, 'logs_10000')).toEqual(EVERY_INDEX)
  })
})
