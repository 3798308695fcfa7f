import { asc, eq, sql } from 'drizzle-orm'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createTestDatabase, type TestDatabase } from '../../test/fixtures/db.js'
import { arrayLiteral, createDb, type Db, hexToBytea, byteaToHex, renderStatement, schema } from './index.js'
import { attachLogPartitions } from './log-partitions.js'

let database: TestDatabase
let db: Db

beforeAll(async () => {
  database = await createTestDatabase()
  db = await createDb({ databaseUrl: database.databaseUrl })
})

afterAll(async () => {
  await db?.close()
  await database?.drop()
})

describe(`createDb (${process.env.DATABASE_URL ? 'Postgres' : 'PGlite'})`, () => {
  test('migrations are applied and applying them again is a no-op', async () => {
    await db.close()
    db = await createDb({ databaseUrl: database.databaseUrl })
    const tables = await db.query<{ name: string }>(sql`select table_name as name from information_schema.tables where table_schema = 'public' order by 1`)
    expect(tables.map((table) => table.name)).toEqual(expect.arrayContaining(['account_changes', 'blocks', 'logs', 'receipts', 'sync_state', 'transactions']))
    // Reads write nothing: upstream state read through is kept in memory (resolvers/accounts.ts), not in a table.
    expect(tables.map((table) => table.name)).not.toContain('account_reads')
  })

  test('an array literal bound as one parameter reads back as the values, quotes, backslashes and commas included', async () => {
    const texts = ['logs_0', '0xAbC', 'a"b', 'c\\d', 'e,f', '{g}', 'h i', '']
    const numbers = [0, 7, 9_007_199_254_740_991]
    // Read back as JSON: the Postgres client here leaves array types as their text.
    const [row] = await db.query<{ texts: string[]; numbers: string[] }>(
      sql`select to_json(${arrayLiteral(texts)}::text[]) as texts, to_json(${arrayLiteral(numbers)}::bigint[]::text[]) as numbers`,
    )
    expect(row!.texts).toEqual(texts)
    expect(row!.numbers).toEqual(numbers.map(String))
    expect(arrayLiteral(new Set([3, 3, 4]))).toBe('{3,4}')
  })

  test('a statement rendered once runs with the values of each call, bytes and numbers as drizzle SQL reads them, and refuses a wrong count', async () => {
    const bytes = hexToBytea('0x00ff10')
    const rendered = renderStatement(sql`select ${''}::bytea as bytes, ${''}::bigint as number, octet_length(${''}::text) as length`)
    for (const [value, number, text] of [
      [bytes, 9_007_199_254_740_991, 'é,"'],
      [hexToBytea('0x'), 0, ''],
    ] as const) {
      const [fromRendered] = await db.query<Record<string, unknown>>(rendered.withParameters(value, number, text))
      const [fromSql] = await db.query<Record<string, unknown>>(
        sql`select ${value}::bytea as bytes, ${number}::bigint as number, octet_length(${text}::text) as length`,
      )
      expect(fromRendered).toEqual(fromSql)
      expect(byteaToHex(fromRendered!.bytes as Uint8Array)).toBe(byteaToHex(value))
      expect(String(fromRendered!.number)).toBe(String(number))
    }
    expect(() => rendered.withParameters(bytes, 1)).toThrow(/takes 3 parameters, not 2/)
  })

  test('COPY round-trips bytes, nulls, JSON with characters COPY treats specially, and numerics', async () => {
    // Logs go into a partition of their block range (log-partitions.ts); the ingester attaches it before its COPY.
    await attachLogPartitions(db, 7, 7)
    const awkward = { text: 'tab\there\nnewline \\ backslash "quote" \u00e9 \u2603', nested: [1, null, { a: '\r' }] }
    await db.copyInTransaction(
      [
        {
          table: schema.blocks,
          rows: [{ number: 7, hash: hexToBytea(`0x${'07'.repeat(32)}`), parentHash: new Uint8Array(32), timestamp: 1_700_000_000, header: awkward }],
        },
        {
          table: schema.logs,
          rows: [0, 1].map((logIndex) => ({
            blockNumber: 7,
            logIndex,
            blockHash: hexToBytea(`0x${'07'.repeat(32)}`),
            blockTimestamp: 1_700_000_000,
            transactionHash: hexToBytea(`0x${'aa'.repeat(32)}`),
            transactionIndex: 0,
            address: hexToBytea(`0x${'5c'.repeat(20)}`),
            topic0: logIndex === 0 ? hexToBytea(`0x${'09'.repeat(32)}`) : null,
            topic1: null,
            topic2: null,
            topic3: null,
            data: new Uint8Array(0),
          })),
        },
        {
          table: schema.accountChanges,
          rows: [
            { address: hexToBytea(`0x${'5c'.repeat(20)}`), blockNumber: 7, balanceBefore: '0', nonceBefore: 0, balance: (2n ** 255n).toString(), nonce: 3 },
          ],
        },
      ],
      [sql`insert into ${schema.syncState} (key, value) values ('probe', '1'::jsonb)`],
    )
    const [block] = await db.drizzle.select().from(schema.blocks).where(eq(schema.blocks.number, 7))
    expect(block?.header).toEqual(awkward)
    expect(byteaToHex(block!.hash)).toBe(`0x${'07'.repeat(32)}`)
    const logs = await db.drizzle.select().from(schema.logs).orderBy(asc(schema.logs.logIndex))
    expect(logs.map((log) => [log.topic0 && byteaToHex(log.topic0), byteaToHex(log.data), log.blockTimestamp])).toEqual([
      [`0x${'09'.repeat(32)}`, '0x', 1_700_000_000],
      [null, '0x', 1_700_000_000],
    ])
    const [change] = await db.drizzle.select().from(schema.accountChanges)
    expect(change).toMatchObject({ balance: (2n ** 255n).toString(), nonce: 3 })
  })

  test('a failing statement rolls the whole COPY batch back', async () => {
    const row = { number: 8, hash: hexToBytea(`0x${'08'.repeat(32)}`), parentHash: new Uint8Array(32), timestamp: 1, header: {} }
    await expect(db.copyInTransaction([{ table: schema.blocks, rows: [row] }], [sql`select 1/0`])).rejects.toThrow()
    expect(await db.drizzle.select().from(schema.blocks).where(eq(schema.blocks.number, 8))).toEqual([])
  })
})
