import { and, asc, between, eq, inArray, or, sql } from 'drizzle-orm'
import type { Address, RpcTransaction } from 'viem'
import type { BlockSelector } from '../codecs/index.js'
import { byteaToHex, type Db, hexToBytea, schema } from '../db/index.js'
import { createBlockBodies } from './block-bodies.js'
import type { ChainState } from './chain.js'
import type { LogLimits } from './logs.js'
import { formatPendingTransaction } from '../objects/transaction.js'
import { isPendingTag, type PendingView } from './pending.js'

/** Position of a transaction in the chain: a page of transactions continues after it. */
export type TransactionCursor = { blockNumber: number; transactionIndex: number }

export type GetAccountTransactionsParameters = {
  address: Address
  fromBlock: BlockSelector
  toBlock: BlockSelector
  first: number
  after: TransactionCursor | null
  /** The endpoint's `eth_getLogs` limits, which bound the block range read. */
  limits: LogLimits
}

export type TransactionsPage = { transactions: RpcTransaction[]; hasNextPage: boolean }

type ResolveLogRange = (
  filter: { addresses: null; topics: []; fromBlock: BlockSelector; toBlock: BlockSelector },
  limits: LogLimits,
) => Promise<{
  fromNumber: number
  toNumber: number
}>

/**
 * An account's history: the transactions it sent or received, found by the keys in `transactions` and read
 * from their blocks' stored bodies (block-bodies.ts). The `transactions` table has no index on
 * `from`/`to`, so every read is bounded by a block range with the `eth_getLogs` limits (the block-number
 * index narrows it, the address is a filter), and paged like `getLogsPage`.
 */
export function createAccountHistoryResolvers({
  db,
  chain,
  pendingView,
  resolveLogRange,
}: {
  db: Db
  chain: ChainState
  pendingView: PendingView
  resolveLogRange: ResolveLogRange
}) {
  const bodies = createBlockBodies({ db })

  async function getAccountTransactions({ address, fromBlock, toBlock, first, after, limits }: GetAccountTransactionsParameters): Promise<TransactionsPage> {
    const { confirmed: range, pending: pendingBlocks } = await pendingView.split({ fromBlock, toBlock })
    let confirmed: RpcTransaction[] = []
    if (range !== null) {
      const { fromNumber, toNumber } = await resolveLogRange({ addresses: null, topics: [], ...range }, limits)
      const key = hexToBytea(address)
      const position =
        after === null
          ? undefined
          : sql`(${schema.transactions.blockNumber}, ${schema.transactions.transactionIndex}) > (${after.blockNumber}, ${after.transactionIndex})`
      const rows = await db.drizzle
        .select({ hash: schema.transactions.hash })
        .from(schema.transactions)
        .where(
          and(between(schema.transactions.blockNumber, fromNumber, toNumber), or(eq(schema.transactions.from, key), eq(schema.transactions.to, key)), position),
        )
        .orderBy(asc(schema.transactions.blockNumber), asc(schema.transactions.transactionIndex))
        .limit(first + 1)
      const found =
        rows.length === 0
          ? []
          : await bodies.transactionsWhere(
              inArray(
                schema.transactions.hash,
                rows.map((row) => row.hash),
              ),
            )
      const byHash = new Map(found.map((located) => [located.hash, located.item]))
      confirmed = rows.map((row) => byHash.get(byteaToHex(row.hash))).filter((transaction) => transaction !== undefined)
    }
    const transactions = [...confirmed]
    if (confirmed.length <= first)
      for (const block of pendingBlocks)
        block.transactions.forEach((transaction, position) => {
          const involved = transaction.from === address || transaction.to?.toLowerCase() === address
          const later = after === null || block.number > after.blockNumber || (block.number === after.blockNumber && transaction.index > after.transactionIndex)
          if (involved && later) transactions.push(formatPendingTransaction(block, position) as unknown as RpcTransaction)
        })
    return { transactions: transactions.slice(0, first), hasNextPage: transactions.length > first }
  }

  /**
   * The default start of an account's history: the newest `maxBlockRange` blocks up to `toBlock`, so that a
   * query without `fromBlock` is never refused for its range.
   */
  async function recentBlocksStart(toBlock: BlockSelector, limits: LogLimits): Promise<BlockSelector> {
    const view = await chain.view()
    const resolved = await chain.resolve(toBlock)
    const end = resolved.status === 'known' && !isPendingTag(toBlock) ? resolved.number : (view.head?.number ?? 0)
    const start = Math.max(view.firstBlock ?? 0, end - limits.maxBlockRange + 1)
    return { kind: 'number', number: BigInt(start) }
  }

  return { getAccountTransactions, recentBlocksStart }
}
