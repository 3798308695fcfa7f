import { sql } from 'drizzle-orm'
import { describe, expect, test } from 'vitest'
import { useTestDb } from '../../test/fixtures/db.js'
import { COPY_PIECE_ROWS, encodeCopy, encodeCopyPieces } from './copy.js'
import { hexToBytea, isPostgresUrl, schema } from './index.js'

const testDb = useTestDb()
const usesPostgres = isPostgresUrl(process.env.DATABASE_URL ?? '')

/** Wei amounts at the edges of numeric's base-10,000 digits, zero groups in the middle and at the end. */
const AMOUNTS = [
  0n,
  1n,
  9_999n,
  10_000n,
  10_001n,
  100_000_000n,
  1_000_000_000_000_000_000n,
  1_000_000_007_000_000_000n,
  123_456_789_012_345_678_901_234_567_890n,
  2n ** 255n,
  2n ** 256n - 1n,
  10n ** 77n,
]
/** Block numbers and nonces around the 32-bit boundary, up to the largest safe integer. */
const COUNTS = [0, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 1_700_000_000_123, Number.MAX_SAFE_INTEGER]

describe('binary COPY', () => {
  test('account changes, numeric and bigint columns included, go in binary form', () => {
    const { format } = encodeCopy({ table: schema.accountChanges, rows: [] })
    expect(format).toBe('binary')
  })

  test('numeric and bigint values round-trip exactly', async () => {
    const address = hexToBytea(`0x${'5c'.repeat(20)}`)
    const rows = AMOUNTS.map((amount, index) => ({
      address,
      blockNumber: COUNTS[index % COUNTS.length]! + index,
      balanceBefore: amount.toString(),
      nonceBefore: COUNTS[(index + 3) % COUNTS.length]!,
      balance: amount.toString(),
      nonce: COUNTS[index % COUNTS.length]!,
    }))
    await testDb().copyInTransaction([{ table: schema.accountChanges, rows }])
    const stored = await testDb().query<{ block_number: string; balance: string; balance_before: string; nonce: string; nonce_before: string }>(sql`
      select block_number::text, balance::text, balance_before::text, nonce::text, nonce_before::text
      from ${schema.accountChanges} order by ${schema.accountChanges.blockNumber}`)
    expect(stored).toEqual(
      rows
        .toSorted((left, right) => left.blockNumber - right.blockNumber)
        .map((row) => ({
          block_number: String(row.blockNumber),
          balance: row.balance,
          balance_before: row.balanceBefore,
          nonce: String(row.nonce),
          nonce_before: String(row.nonceBefore),
        })),
    )
  })

  test('integer arrays (segment offsets) round-trip in binary form, empty and null ones included', async () => {
    const rows = [
      { blockNumber: 1, deflated: new Uint8Array([1]), plainLength: 1, adler32: 1, segmentOffsets: [0, 5, 2 ** 31 - 1] },
      { blockNumber: 2, deflated: new Uint8Array([2]), plainLength: 2, adler32: 2, segmentOffsets: [] },
    ]
    expect(encodeCopy({ table: schema.blockTransactions, rows }).format).toBe('binary')
    await testDb().copyInTransaction([
      { table: schema.blockTransactions, rows },
      { table: schema.blockReceipts, rows: [{ blockNumber: 3, deflated: new Uint8Array([3]), segmentOffsets: null }] },
    ])
    const stored = await testDb().query<{ offsets: string | null }>(sql`
      select segment_offsets::text as offsets from ${schema.blockTransactions}
      union all select segment_offsets::text from ${schema.blockReceipts}`)
    expect(stored.map((row) => row.offsets)).toEqual(['{0,5,2147483647}', '{}', null])
  })

  test('a numeric value that is not a whole number is refused before anything is sent', () => {
    const row = { address: new Uint8Array(20), blockNumber: 1, balanceBefore: '1.5', nonceBefore: 0, balance: '1', nonce: 0 }
    expect(() => encodeCopy({ table: schema.accountChanges, rows: [row] })).toThrow(/whole number/)
  })

  test('pieces joined are the whole COPY, for counts of rows around the piece size', () => {
    const rowsOf = (count: number) =>
      Array.from({ length: count }, (_, index) => ({
        address: hexToBytea(`0x${(index % 256).toString(16).padStart(2, '0').repeat(20)}`),
        blockNumber: index,
        balanceBefore: String(index * 7),
        nonceBefore: index,
        balance: String(index * 11),
        nonce: index + 1,
      }))
    for (const count of [0, 1, 2, 3, 4, 6, 7]) {
      const batch = { table: schema.accountChanges, rows: rowsOf(count) }
      const pieces = [...{ [Symbol.iterator]: () => encodeCopyPieces(batch, 3).pieces }]
      expect(pieces).toHaveLength(Math.max(1, Math.ceil(count / 3)))
      expect(Buffer.concat(pieces)).toEqual(Buffer.from(encodeCopy(batch).payload))
    }
  })

  test('a table of several pieces lands whole; a bad value in a later piece fails the batch, which leaves nothing, and the next batch lands', async () => {
    const rows = Array.from({ length: 2 * COPY_PIECE_ROWS + 1 }, (_, index) => ({
      address: hexToBytea(`0x${'7e'.repeat(12)}${index.toString(16).padStart(16, '0')}`),
      blockNumber: index,
      balanceBefore: String(index),
      nonceBefore: index,
      balance: String(index + 1),
      nonce: index + 1,
    }))
    const stored = async () =>
      (
        await testDb().query<{ count: number; sum: string }>(sql`
          select count(*)::int as count, coalesce(sum(${schema.accountChanges.blockNumber} + ${schema.accountChanges.balance}), 0)::text as sum
          from ${schema.accountChanges} where substr(${schema.accountChanges.address}, 1, 12) = ${hexToBytea(`0x${'7e'.repeat(12)}`)}`)
      )[0]!
    const bad = rows.map((row, index) => (index === COPY_PIECE_ROWS + 5 ? { ...row, balance: '0.5' } : row))
    await expect(testDb().copyInTransaction([{ table: schema.accountChanges, rows: bad }])).rejects.toThrow(/whole number/)
    expect(await stored()).toEqual({ count: 0, sum: '0' })
    await testDb().copyInTransaction([{ table: schema.accountChanges, rows }])
    expect(await stored()).toEqual({ count: rows.length, sum: String(rows.reduce((sum, row) => sum + row.blockNumber + Number(row.balance), 0)) })
  })

  test('a batch that need not be durable commits without waiting for the disk on Postgres, in the same transaction as its rows; others wait', async () => {
    const address = hexToBytea(`0x${'de'.repeat(20)}`)
    // The setting as the batch's own transaction sees it, written beside its rows.
    const commitSetting = (key: string) =>
      sql`insert into ${schema.syncState} (key, value) values (${key}, to_jsonb(current_setting('synchronous_commit')))
          on conflict (key) do update set value = excluded.value`
    const row = (blockNumber: number) => ({ address, blockNumber, balanceBefore: '0', nonceBefore: 0, balance: '1', nonce: 1 })
    await testDb().copyInTransaction([{ table: schema.accountChanges, rows: [row(1)] }], [commitSetting('probe_durable')])
    await testDb().copyInTransaction([{ table: schema.accountChanges, rows: [row(2)] }], [commitSetting('probe_deep')], { durable: false })
    const settings = await testDb().query<{ key: string; value: string }>(
      sql`select key, value #>> '{}' as value from ${schema.syncState} where key in ('probe_durable', 'probe_deep') order by key`,
    )
    expect(settings).toEqual([
      { key: 'probe_deep', value: usesPostgres ? 'off' : 'on' },
      { key: 'probe_durable', value: 'on' },
    ])
    // Set for that transaction alone: the next statement on the pool waits for its commits again.
    expect((await testDb().query<{ value: string }>(sql`select current_setting('synchronous_commit') as value`))[0]!.value).toBe('on')
    const stored = await testDb().query<{ count: number }>(
      sql`select count(*)::int as count from ${schema.accountChanges} where ${schema.accountChanges.address} = ${address}`,
    )
    expect(stored[0]!.count).toBe(2)
  })
})
