import { type SQL, sql } from 'drizzle-orm'
import type { RpcTransaction, RpcTransactionReceipt } from 'viem'
import { inflateAny } from '../codecs/deflated.js'
import { inflateSegment, SEGMENT_ITEMS } from '../codecs/segmented.js'
import { arrayLiteral, type Db, schema } from '../db/index.js'

const { blockReceipts, blockTransactions, transactions } = schema

/** The transactions `where` found in one segment of their block's stream, and the segment's compressed bytes. */
type SegmentRow = {
  block_number: number | string
  /** The transactions' hashes (hex, without `0x`) and indexes, comma-separated: text reads the same on every driver. */
  hashes: string
  indexes: string
  /** The segment, or the whole stream when it was written without segments. */
  segment: Uint8Array
  /** Whether `segment` is the whole stream (a `block_receipts` row written before migration 0009). */
  whole: boolean
}

export type Located<item> = { hash: `0x${string}`; blockNumber: number; transactionIndex: number; item: item }

/**
 * The slice of a segmented stream (codecs/segmented.ts) that holds the transaction's item, in SQL: Postgres
 * returns a few KB instead of the block's whole stream. Rows without offsets (written before segments) give the whole.
 */
function segmentSlice(table: typeof blockTransactions | typeof blockReceipts): SQL {
  const start = sql`${table.segmentOffsets}[${transactions.transactionIndex} / ${sql.raw(String(SEGMENT_ITEMS))} + 1]`
  const end = sql`${table.segmentOffsets}[${transactions.transactionIndex} / ${sql.raw(String(SEGMENT_ITEMS))} + 2]`
  return sql`case when ${table.segmentOffsets} is null then ${table.deflated} else substring(${table.deflated} from ${start} + 1 for ${end} - ${start}) end`
}

/**
 * Reads of the per-block bodies: each block's transactions (`block_transactions`) and receipts
 * (`block_receipts`), whole or one item at a time through the `transactions` table's keys.
 */
export function createBlockBodies({ db }: { db: Db }) {
  /**
   * Items of the stream whose transactions `where` picks (on `transactions`), from their segments: one row, one
   * slice and one inflate per segment, however many of its transactions are asked for (a GraphQL block's).
   */
  async function located<item>(table: typeof blockTransactions | typeof blockReceipts, where: SQL): Promise<Located<item>[]> {
    const rows = await db.query<SegmentRow>(sql`
      select ${table.blockNumber} as block_number, string_agg(encode(${transactions.hash}, 'hex'), ',') as hashes,
        string_agg(${transactions.transactionIndex}::text, ',') as indexes,
        ${segmentSlice(table)} as segment, ${table.segmentOffsets} is null as whole
      from ${transactions} join ${table} on ${table.blockNumber} = ${transactions.blockNumber}
      where ${where}
      group by ${table.blockNumber}, ${transactions.transactionIndex} / ${sql.raw(String(SEGMENT_ITEMS))}`)
    return rows.flatMap((row) => {
      const items = inflateSegment<item>(row.segment)
      const hashes = row.hashes.split(',')
      return row.indexes.split(',').map((text, position) => {
        const transactionIndex = Number(text)
        const item = items[row.whole ? transactionIndex : transactionIndex % SEGMENT_ITEMS]
        if (item === undefined)
          throw new Error(`block ${row.block_number}: no item ${transactionIndex} in its stored ${table === blockReceipts ? 'receipts' : 'transactions'}`)
        return { hash: `0x${hashes[position]!}` as const, blockNumber: Number(row.block_number), transactionIndex, item }
      })
    })
  }

  /** Indexed transactions by hash, with their place in the chain. */
  function transactionsWhere(where: SQL): Promise<Located<RpcTransaction>[]> {
    return located<RpcTransaction>(blockTransactions, where)
  }

  /** Indexed receipts of the transactions `where` picks. */
  function receiptsWhere(where: SQL): Promise<Located<RpcTransactionReceipt>[]> {
    return located<RpcTransactionReceipt>(blockReceipts, where)
  }

  /** Each block's transactions in order, by block number; a block not indexed is absent. */
  async function blockTransactionsOf(numbers: readonly number[]): Promise<Map<number, RpcTransaction[]>> {
    if (numbers.length === 0) return new Map()
    if (!numbers.every(Number.isSafeInteger)) throw new TypeError('block numbers must be integers')
    const rows = await db.query<{ block_number: number | string; deflated: Uint8Array }>(
      sql`select ${blockTransactions.blockNumber} as block_number, ${blockTransactions.deflated} as deflated from ${blockTransactions}
          where ${blockTransactions.blockNumber} = any(${arrayLiteral(new Set(numbers))}::bigint[])`,
    )
    return new Map(rows.map((row) => [Number(row.block_number), JSON.parse(inflateAny(row.deflated).toString('utf8')) as RpcTransaction[]]))
  }

  return { transactionsWhere, receiptsWhere, blockTransactionsOf }
}

export type BlockBodies = ReturnType<typeof createBlockBodies>
