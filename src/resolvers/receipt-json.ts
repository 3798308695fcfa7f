import { type SQL, sql } from 'drizzle-orm'
import type { PgColumn } from 'drizzle-orm/pg-core'
import type { RpcTransactionReceipt } from 'viem'
import { type LogRow, schema } from '../db/index.js'
import { formatLog } from './logs.js'

const { blocks, logs, receipts } = schema

/** zlib's default: 6 inflates faster than 1 (smaller input) and still deflates a block in ~0.5 ms. */
export const BLOCK_RECEIPTS_DEFLATE_LEVEL = 6

/**
 * Receipts as JSON text, built from the stored receipts (the upstream's JSON with `logs` emptied, see
 * ingest/block-data.ts) and log rows, without objects in between: a block of ~160 logs is ~115 KB of JSON
 * that would otherwise be decoded into rows, re-encoded to hex, assembled into objects and stringified.
 * Postgres hex-encodes the bytes (once per log; block and transaction fields once per block and receipt),
 * and the text is written the way `JSON.stringify(formatLog(row))` writes a log (resolvers/logs.ts):
 * same keys, same order.
 */

export type ReceiptRow = { transactionIndex: number; body: Record<string, unknown> }

/** Puts each log back into its receipt, at the `logs` key the upstream's receipt had. */
export function assemble(receipt: ReceiptRow, logs: LogRow[]): RpcTransactionReceipt {
  return { ...receipt.body, logs: logs.map(formatLog) } as unknown as RpcTransactionReceipt
}

/**
 * A block's `eth_getBlockReceipts` answer from its receipt rows (in index order) and log rows, for
 * `block_receipts` at ingest: the same text `renderReceipts` builds from the stored rows.
 */
export function renderBlockReceipts(receipts: ReceiptRow[], logs: LogRow[]): string {
  const logsByTransaction = new Map<number, LogRow[]>()
  for (const log of logs) {
    const transactionLogs = logsByTransaction.get(log.transactionIndex)
    if (transactionLogs === undefined) logsByTransaction.set(log.transactionIndex, [log])
    else transactionLogs.push(log)
  }
  return JSON.stringify(receipts.map((receipt) => assemble(receipt, logsByTransaction.get(receipt.transactionIndex) ?? [])))
}

/** One row of the statement below: a receipt (`kind` 0) or one of its logs (`kind` 1). */
export type ReceiptJsonRow = {
  kind: number
  transaction_index: number
  log_index: number | null
  /** Receipt: the stored receipt as text. Log: its address. */
  a: string
  /** Receipt: its transaction hash. Log: its data. */
  b: string
  /** Receipt: the block's hash, number and timestamp, in hex and space-separated. Log: its topics, `","0x`-separated. */
  c: string
}

const hex = (column: PgColumn) => sql`encode(${column}, 'hex')`

/** The rows for the receipts `receiptFilter` picks and the logs `logFilter` picks, in no particular order. */
export function receiptJsonRows(receiptFilter: SQL, logFilter: SQL): SQL {
  return sql`
    select 0 as kind, ${receipts.transactionIndex} as transaction_index, null::int as log_index, ${receipts.body}::text as a,
      ${hex(receipts.transactionHash)} as b,
      (select ${hex(blocks.hash)} || ' ' || to_hex(${blocks.number}) || ' ' || to_hex(${blocks.timestamp}) from ${blocks} where ${blocks.number} = ${receipts.blockNumber}) as c
    from ${receipts} where ${receiptFilter}
    union all
    select 1, ${logs.transactionIndex}, ${logs.logIndex}, ${hex(logs.address)}, ${hex(logs.data)},
      concat_ws('","0x', ${hex(logs.topic0)}, ${hex(logs.topic1)}, ${hex(logs.topic2)}, ${hex(logs.topic3)})
    from ${logs} where ${logFilter}`
}

const EMPTY_LOGS = '"logs":[]'
/** Offset of the `]` that closes the stored receipt's empty `logs`. */
const LOGS_CLOSE = EMPTY_LOGS.length - 1

const byLogIndex = (left: ReceiptJsonRow, right: ReceiptJsonRow) => left.log_index! - right.log_index!

/** The receipts of `rows` as JSON texts, by index, each with its logs back in its `logs` array. */
export function renderReceipts(rows: ReceiptJsonRow[]): string[] {
  const receiptRows = rows.filter((row) => row.kind === 0).sort((left, right) => left.transaction_index - right.transaction_index)
  const logRows = rows.filter((row) => row.kind === 1).sort(byLogIndex)
  const byIndex = new Map<number, { logTail: string; logs: string[] }>()
  for (const row of receiptRows) {
    const [blockHash, blockNumber, blockTimestamp] = row.c.split(' ')
    // What follows `data` in each of this receipt's logs, up to the log index.
    const logTail = `","blockHash":"0x${blockHash}","blockNumber":"0x${blockNumber}","blockTimestamp":"0x${blockTimestamp}","transactionHash":"0x${row.b}","transactionIndex":"0x${row.transaction_index.toString(16)}","logIndex":"0x`
    byIndex.set(row.transaction_index, { logTail, logs: [] })
  }
  for (const row of logRows) {
    const receipt = byIndex.get(row.transaction_index)
    if (receipt === undefined) continue
    // concat_ws skips null topics, which only ever trail the others.
    const topics = row.c === '' ? '' : `"0x${row.c}"`
    receipt.logs.push(`{"address":"0x${row.a}","topics":[${topics}],"data":"0x${row.b}${receipt.logTail}${row.log_index!.toString(16)}","removed":false}`)
  }
  return receiptRows.map((row) => {
    const body = row.a
    const logJsons = byIndex.get(row.transaction_index)!.logs
    if (logJsons.length === 0) return body
    const at = body.indexOf(EMPTY_LOGS)
    if (at !== -1) return `${body.slice(0, at + LOGS_CLOSE)}${logJsons.join(',')}${body.slice(at + LOGS_CLOSE)}`
    // A receipt stored without a `logs` key gets one at the end, as `{ ...body, logs }` would.
    return `${body.slice(0, -1)},"logs":[${logJsons.join(',')}]}`
  })
}
