import { eq, getTableColumns, sql } from 'drizzle-orm'
import { describe, expect, test } from 'vitest'
import { useTestDb } from '../../test/fixtures/db.js'
import { byteaToHex, hexToBytea, isPostgresUrl, schema } from '../db/index.js'
import { logAddressIsAnyOf } from '../db/log-keys.js'
import { createLogPartitioner } from '../db/log-partitions.js'
import { logStatements } from './logs.js'

const testDb = useTestDb()
const ADDRESS = `0x${'5c'.repeat(20)}` as const
const hashOf = (block: number, salt = 0) => `0x${(block * 1000 + salt).toString(16).padStart(64, '0')}` as const

const blockRow = (number: number, salt = 0) => ({
  number,
  hash: hexToBytea(hashOf(number, salt)),
  parentHash: new Uint8Array(32),
  timestamp: 1_700_000_000 + number * 2 + salt,
  header: {},
})

const logRow = (blockNumber: number, logIndex: number) => ({
  blockNumber,
  logIndex,
  transactionHash: hexToBytea(`0x${'aa'.repeat(32)}`),
  transactionIndex: 0,
  address: hexToBytea(ADDRESS),
  topic0: hexToBytea(`0x${'09'.repeat(32)}`),
  topic1: null,
  topic2: null,
  topic3: null,
  data: new Uint8Array([logIndex]),
})

describe(`logs with their blocks (${isPostgresUrl(process.env.DATABASE_URL ?? '') ? 'Postgres' : 'PGlite'})`, () => {
  test('a log stores neither its block hash nor its timestamp: both are its block’s, read with it, also after its block is replaced', async () => {
    const db = testDb()
    const columns = await db.query<{ column_name: string }>(
      sql`select column_name from information_schema.columns where table_schema = current_schema() and table_name = 'logs' order by ordinal_position`,
    )
    // The database's columns are the schema's, and neither holds the block's hash or timestamp.
    const names = columns.map((column) => column.column_name)
    expect(names).toEqual(Object.values(getTableColumns(schema.logs)).map((column) => column.name))
    expect(names).not.toContain('block_hash')
    expect(names).not.toContain('block_timestamp')

    await createLogPartitioner(db, { size: 100 }).ensure(1, 3)
    await db.copyInTransaction([
      { table: schema.blocks, rows: [1, 2, 3].map((number) => blockRow(number)) },
      { table: schema.logs, rows: [logRow(1, 0), logRow(1, 1), logRow(3, 0)] },
    ])
    const read = async (cap: number) =>
      (await logStatements(db.drizzle, logAddressIsAnyOf(schema.logs.address, [ADDRESS]), cap).withBlocks).map((row) => [
        row.blockNumber,
        row.logIndex,
        byteaToHex(row.blockHash),
        row.blockTimestamp,
        byteaToHex(row.data),
      ])
    expect(await read(10)).toEqual([
      [1, 0, hashOf(1), 1_700_000_002, '0x00'],
      [1, 1, hashOf(1), 1_700_000_002, '0x01'],
      [3, 0, hashOf(3), 1_700_000_006, '0x00'],
    ])
    // The cap is the logs', before the join: two logs, in chain order.
    expect((await read(2)).map(([number, index]) => [number, index])).toEqual([
      [1, 0],
      [1, 1],
    ])

    // Block 3 replaced (a reorg rewrites a block and its logs in one transaction): its log now reads the new block's.
    await db.transaction(async (tx) => {
      await tx.delete(schema.blocks).where(eq(schema.blocks.number, 3))
      await tx.insert(schema.blocks).values(blockRow(3, 7))
    })
    expect((await read(10))[2]).toEqual([3, 0, hashOf(3, 7), 1_700_000_013, '0x00'])
  })

  test('the join comes after the limit and reads the covering index, not the blocks’ headers', async () => {
    const db = testDb()
    const plan = await db.transaction(async (tx) => {
      // Tables this small are read whole when allowed: the question is which index the join can use.
      await tx.execute(sql`set local enable_seqscan = off`)
      await tx.execute(sql`set local enable_bitmapscan = off`)
      await tx.execute(sql`set local enable_hashjoin = off`)
      await tx.execute(sql`set local enable_mergejoin = off`)
      const { withBlocks } = logStatements(tx, logAddressIsAnyOf(schema.logs.address, [ADDRESS]), 100)
      const lines = (await tx.execute(sql`explain ${withBlocks.getSQL()}`)) as unknown as { rows?: object[] } | object[]
      return (Array.isArray(lines) ? lines : lines.rows!).map((line) => String(Object.values(line)[0])).join('\n')
    })
    expect(plan).toMatch(/Index Only Scan using blocks_number_hash_timestamp_idx on blocks/)
    // The limit is inside the join's outer side: the join never runs for logs beyond the cap.
    expect(plan.indexOf('Limit')).toBeGreaterThan(plan.indexOf('Nested Loop'))
  })
})
