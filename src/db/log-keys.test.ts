import { and, asc, between, sql } from 'drizzle-orm'
import type { Hex } from 'viem'
import { describe, expect, test } from 'vitest'
import { useTestDb } from '../../test/fixtures/db.js'
import { byteaToHex, hexToBytea, isPostgresUrl, schema } from './index.js'
import { addressKey, columnIsAnyOf, logAddressIsAnyOf, logTopic0IsAnyOf, logTopicTailIsAnyOf, topic0Key, topicTailKey } from './log-keys.js'
import { createLogPartitioner } from './log-partitions.js'

const testDb = useTestDb()
const { logs } = schema

// Two addresses with the same last 8 bytes (their key), two topics with the same first 8 bytes (theirs).
const SHARED_TAIL = 'cafebabecafebabe'
const A: Hex = `0x${'11'.repeat(12)}${SHARED_TAIL}`
const B: Hex = `0x${'22'.repeat(12)}${SHARED_TAIL}`
const C: Hex = `0x${'11'.repeat(12)}${'0123456789abcdef'}`
const SHARED_HEAD = 'deadbeefdeadbeef'
const T1: Hex = `0x${SHARED_HEAD}${'aa'.repeat(24)}`
const T2: Hex = `0x${SHARED_HEAD}${'bb'.repeat(24)}`
const T3: Hex = `0x${'ee'.repeat(32)}`

const ADDRESSES = [A, B, C]
const TOPICS = [T1, T2, T3, null]
// Wallets padded to 32 bytes, as a Transfer's `from` and `to` are: W1 and W2 share their last 8 bytes (their key).
const W1: Hex = `0x${'00'.repeat(12)}${'11'.repeat(12)}${SHARED_TAIL}`
const W2: Hex = `0x${'00'.repeat(12)}${'22'.repeat(12)}${SHARED_TAIL}`
const W3: Hex = `0x${'00'.repeat(12)}${'33'.repeat(20)}`
const WALLETS = [W1, W2, W3, null]

/** The wallet a log's topic1 (`position`) or topic2 (`position + 1`) holds, in turn. */
function walletAt(position: number): Hex | null {
  return WALLETS[position % WALLETS.length]!
}
function walletOf(position: number): Uint8Array | null {
  const wallet = walletAt(position)
  return wallet === null ? null : hexToBytea(wallet)
}

/** Every (address, topic0) pair in each of blocks 0..9, with its block and position (topic1 and topic2 wallets in turn). */
function rows() {
  const all = []
  for (let block = 0; block < 10; block++) {
    let index = 0
    for (const address of ADDRESSES)
      for (const topic0 of TOPICS)
        all.push({
          blockNumber: block,
          logIndex: index++,
          blockHash: hexToBytea(`0x${block.toString(16).padStart(64, '0')}`),
          blockTimestamp: 1_700_000_000 + block,
          transactionHash: hexToBytea(`0x${(block * 100 + index).toString(16).padStart(64, '0')}`),
          transactionIndex: index,
          address: hexToBytea(address),
          topic0: topic0 === null ? null : hexToBytea(topic0),
          topic1: walletOf(index),
          topic2: walletOf(index + 1),
          topic3: null,
          data: hexToBytea('0x'),
        })
  }
  return all
}

/** The (address, topic0) pairs of the logs matching `where` in blocks 2..5, in chain order. */
async function matching(where: ReturnType<typeof logAddressIsAnyOf>) {
  const found = await testDb()
    .drizzle.select({ address: logs.address, topic0: logs.topic0, block: logs.blockNumber })
    .from(logs)
    .where(and(between(logs.blockNumber, 2, 5), where))
    .orderBy(asc(logs.blockNumber), asc(logs.logIndex))
  return found.map((row) => `${byteaToHex(row.address)}/${row.topic0 === null ? null : byteaToHex(row.topic0)}@${row.block}`)
}

const expected = (addresses: Hex[], topics: (Hex | null)[]) => {
  const pairs = []
  for (let block = 2; block <= 5; block++)
    for (const address of ADDRESSES)
      for (const topic of TOPICS) if (addresses.includes(address) && topics.includes(topic)) pairs.push(`${address}/${topic}@${block}`)
  return pairs
}

/** The test database with the rows above in it (written by the first test that asks). */
async function withRows() {
  const db = testDb()
  if ((await db.drizzle.select({ block: logs.blockNumber }).from(logs).limit(1)).length > 0) return db
  await createLogPartitioner(db, { size: 100 }).ensure(0, 9)
  await db.copyInTransaction([{ table: logs, rows: rows() }])
  return db
}

describe(`log keys (${isPostgresUrl(process.env.DATABASE_URL ?? '') ? 'Postgres' : 'PGlite'})`, () => {
  test('keys: the last 8 bytes of an address, the first 8 of a topic0, the last 8 of a topic1 or topic2', () => {
    expect(byteaToHex(addressKey(A))).toBe(`0x${SHARED_TAIL}`)
    expect(byteaToHex(topicTailKey(W1))).toBe(`0x${SHARED_TAIL}`)
    expect(byteaToHex(topicTailKey(W3))).toBe(`0x${'33'.repeat(8)}`)
    expect(byteaToHex(addressKey('0x4200000000000000000000000000000000000006'))).toBe('0x0000000000000006')
    expect(byteaToHex(topic0Key(T1))).toBe(`0x${SHARED_HEAD}`)
  })

  test('values sharing a key are told apart: each query gets exactly the logs of its whole values', async () => {
    await withRows()
    expect(await matching(and(logAddressIsAnyOf(logs.address, [A]), logTopic0IsAnyOf(logs.topic0, [T1]))!)).toEqual(expected([A], [T1]))
    expect(await matching(and(logAddressIsAnyOf(logs.address, [B]), logTopic0IsAnyOf(logs.topic0, [T2]))!)).toEqual(expected([B], [T2]))
    expect(await matching(and(logAddressIsAnyOf(logs.address, [A, B]), logTopic0IsAnyOf(logs.topic0, [T2, T3]))!)).toEqual(expected([A, B], [T2, T3]))
    expect(await matching(logAddressIsAnyOf(logs.address, [B]))).toEqual(expected([B], TOPICS))
    expect(await matching(logTopic0IsAnyOf(logs.topic0, [T1]))).toEqual(expected(ADDRESSES, [T1]))
    expect(await matching(logAddressIsAnyOf(logs.address, [C, A]))).toEqual(expected([A, C], TOPICS))
    expect(await matching(columnIsAnyOf(logs.address, [C]))).toEqual(expected([C], TOPICS))
  })

  test('wallets sharing a key are told apart in topic1 and topic2: each query gets exactly the logs of its whole values', async () => {
    const db = await withRows()
    const positions = async (where: ReturnType<typeof logAddressIsAnyOf>) => {
      const found = await db.drizzle
        .select({ block: logs.blockNumber, index: logs.logIndex })
        .from(logs)
        .where(and(between(logs.blockNumber, 2, 5), where))
        .orderBy(asc(logs.blockNumber), asc(logs.logIndex))
      return found.map((row) => `${row.block}/${row.index}`)
    }
    const wanted = (keep: (row: ReturnType<typeof rows>[number]) => boolean) =>
      rows()
        .filter((row) => row.blockNumber >= 2 && row.blockNumber <= 5 && keep(row))
        .map((row) => `${row.blockNumber}/${row.logIndex}`)
    const holds = (value: Uint8Array | null, wallets: Hex[]) => value !== null && wallets.includes(byteaToHex(value))
    for (const wallets of [[W1], [W2], [W3], [W1, W3], [W1, W2]]) {
      expect(await positions(logTopicTailIsAnyOf(logs.topic1, wallets))).toEqual(wanted((row) => holds(row.topic1, wallets)))
      expect(await positions(logTopicTailIsAnyOf(logs.topic2, wallets))).toEqual(wanted((row) => holds(row.topic2, wallets)))
    }
    // A token's Transfers to one wallet: address, topic0 and topic2 together. A's T3 logs go to W1, never to
    // W2, which shares W1's key: asked for W2, they are read by the key and told apart by the whole value.
    const transfersTo = (wallet: Hex) =>
      and(logAddressIsAnyOf(logs.address, [A]), logTopic0IsAnyOf(logs.topic0, [T3]), logTopicTailIsAnyOf(logs.topic2, [wallet]))!
    const toW1 = wanted((row) => byteaToHex(row.address) === A && row.topic0 !== null && byteaToHex(row.topic0) === T3 && holds(row.topic2, [W1]))
    expect(toW1.length).toBeGreaterThan(0)
    expect(await positions(transfersTo(W1))).toEqual(toW1)
    expect(await positions(transfersTo(W2))).toEqual([])
  })

  test('the conditions are the indexes’ own expressions: the planner reads the keyed indexes', async () => {
    const plan = (where: ReturnType<typeof logAddressIsAnyOf>) =>
      testDb().transaction(async (tx) => {
        // A table this small is read whole when allowed: the question is whether the index can be used.
        await tx.execute(sql`set local enable_seqscan = off`)
        await tx.execute(sql`set local enable_bitmapscan = off`)
        const statement = tx
          .select()
          .from(logs)
          .where(and(between(logs.blockNumber, 2, 5), where))
        const lines = (await tx.execute(sql`explain ${statement.getSQL()}`)) as unknown as { rows?: object[] } | object[]
        return (Array.isArray(lines) ? lines : lines.rows!).map((line) => Object.values(line)[0]).join('\n')
      })
    expect(await plan(and(logAddressIsAnyOf(logs.address, [A]), logTopic0IsAnyOf(logs.topic0, [T1]))!)).toMatch(
      /Index Cond: \(\(substr\(address, 13, 8\) = '[^']+'::bytea\) AND \(substr\(topic0, 1, 8\) = '/,
    )
    // A and B share their key: it is looked up once (the topics' keys by the index or beside it, as the planner likes).
    expect(await plan(and(logAddressIsAnyOf(logs.address, [A, B]), logTopic0IsAnyOf(logs.topic0, [T1, T3]))!)).toMatch(
      /Index Cond: \(\(substr\(address, 13, 8\) = '[^']+'::bytea\)/,
    )
    expect(await plan(and(logAddressIsAnyOf(logs.address, [A, C]), logTopic0IsAnyOf(logs.topic0, [T1]))!)).toMatch(
      /Index Cond: \(\(substr\((address, 13, 8\) = ANY|topic0, 1, 8\) = ')/,
    )
    expect(await plan(logTopic0IsAnyOf(logs.topic0, [T1]))).toMatch(/Index Cond: \(\(substr\(topic0, 1, 8\) = /)
    expect(await plan(logTopicTailIsAnyOf(logs.topic1, [W1]))).toMatch(/Index Cond: \(\(substr\(topic1, 25, 8\) = /)
    expect(await plan(logTopicTailIsAnyOf(logs.topic2, [W3]))).toMatch(/Index Cond: \(\(substr\(topic2, 25, 8\) = /)
  })
})
