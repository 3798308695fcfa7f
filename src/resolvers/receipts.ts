import { and, asc, eq } from 'drizzle-orm'
import type { Hash, RpcTransactionReceipt } from 'viem'
import type { BlockSelector } from '../codecs/index.js'
import { type Db, hexToBytea, schema } from '../db/index.js'
import { ANSWER_BYTES, type AnswerCache } from './cache.js'
import type { ChainState } from './chain.js'
import { isPendingTag, type PendingView } from './pending.js'
import type { LogRow } from '../db/index.js'
import { formatLog } from './logs.js'

const bytesOfReceipts = (receipts: RpcTransactionReceipt[]) =>
  receipts.reduce((sum, receipt) => sum + ANSWER_BYTES.receipt + receipt.logs.length * ANSWER_BYTES.log, 0)

export type ReceiptRow = { transactionIndex: number; body: Record<string, unknown> }

/** Puts each log back into its receipt, at the `logs` key the upstream's receipt had. */
export function assemble(receipt: ReceiptRow, logs: LogRow[]): RpcTransactionReceipt {
  return { ...receipt.body, logs: logs.map(formatLog) } as unknown as RpcTransactionReceipt
}

export function createReceiptResolvers({
  db,
  chain,
  cache,
  pendingView,
}: { db: Db; chain: ChainState; cache: AnswerCache; pendingView: PendingView }) {
  /** https://github.com/ethereum/execution-apis (eth_getBlockReceipts); `null` for an unknown block. */
  async function getBlockReceipts({ block }: { block: BlockSelector }): Promise<RpcTransactionReceipt[] | null> {
    if (isPendingTag(block)) {
      const newest = await pendingView.newest()
      if (newest !== null)
        return newest.receipts.filter((receipt) => receipt !== null) as unknown as RpcTransactionReceipt[]
    }
    const resolved = await chain.resolve(block)
    if (resolved.status !== 'known') return null
    return cache.remember(`receipts:${resolved.number}`, () => loadBlockReceipts(resolved.number), bytesOfReceipts)
  }

  async function loadBlockReceipts(number: number): Promise<RpcTransactionReceipt[]> {
    const [receiptRows, logRows] = await Promise.all([
      db.drizzle
        .select({ transactionIndex: schema.receipts.transactionIndex, body: schema.receipts.body })
        .from(schema.receipts)
        .where(eq(schema.receipts.blockNumber, number))
        .orderBy(asc(schema.receipts.transactionIndex)),
      db.drizzle
        .select()
        .from(schema.logs)
        .where(eq(schema.logs.blockNumber, number))
        .orderBy(asc(schema.logs.logIndex)),
    ])
    const logsByTransaction = new Map<number, LogRow[]>()
    for (const log of logRows) {
      const list = logsByTransaction.get(log.transactionIndex)
      if (list) list.push(log)
      else logsByTransaction.set(log.transactionIndex, [log])
    }
    return receiptRows.map((receipt) => assemble(receipt, logsByTransaction.get(receipt.transactionIndex) ?? []))
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_gettransactionreceipt */
  async function getTransactionReceipt({ hash }: { hash: Hash }): Promise<RpcTransactionReceipt | null> {
    const confirmed = await cache.remember(`receipt:${hash}`, () => loadTransactionReceipt(hash), (receipt) =>
      bytesOfReceipts(receipt ? [receipt] : []),
    )
    return confirmed ?? ((await pendingView.receipt(hash)) as unknown as RpcTransactionReceipt | null)
  }

  async function loadTransactionReceipt(hash: Hash): Promise<RpcTransactionReceipt | null> {
    const rows = await db.drizzle
      .select({
        blockNumber: schema.receipts.blockNumber,
        transactionIndex: schema.receipts.transactionIndex,
        body: schema.receipts.body,
      })
      .from(schema.receipts)
      .where(eq(schema.receipts.transactionHash, hexToBytea(hash)))
    const receipt = rows[0]
    if (receipt === undefined) return null
    const logRows = await db.drizzle
      .select()
      .from(schema.logs)
      .where(and(eq(schema.logs.blockNumber, receipt.blockNumber), eq(schema.logs.transactionIndex, receipt.transactionIndex)))
      .orderBy(asc(schema.logs.logIndex))
    return assemble(receipt, logRows)
  }

  return { getBlockReceipts, getTransactionReceipt }
}
