import type { RpcTransactionReceipt } from 'viem'
import type { LogRow } from '../db/index.js'
import { formatLog } from './logs.js'

/**
 * Receipts as the index answers them: the upstream's receipt with its logs as `formatLog` (resolvers/logs.ts)
 * writes them, rendered once at ingest into `block_receipts` (ingest/block-data.ts).
 */

export type ReceiptRow = { transactionIndex: number; body: Record<string, unknown> }

/** Puts each log back into its receipt, at the `logs` key the upstream's receipt had. */
export function assemble(receipt: ReceiptRow, logs: LogRow[]): RpcTransactionReceipt {
  return { ...receipt.body, logs: logs.map(formatLog) } as unknown as RpcTransactionReceipt
}

/**
 * A block's receipts, each as the JSON text `eth_getBlockReceipts` answers, from its receipt rows (in index
 * order) and log rows, for `block_receipts` at ingest: the same texts `renderReceipts` builds from legacy rows.
 */
export function renderReceiptItems(receipts: ReceiptRow[], logs: LogRow[]): string[] {
  const logsByTransaction = new Map<number, LogRow[]>()
  for (const log of logs) {
    const transactionLogs = logsByTransaction.get(log.transactionIndex)
    if (transactionLogs === undefined) logsByTransaction.set(log.transactionIndex, [log])
    else transactionLogs.push(log)
  }
  return receipts.map((receipt) => JSON.stringify(assemble(receipt, logsByTransaction.get(receipt.transactionIndex) ?? [])))
}
