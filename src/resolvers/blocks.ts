import { asc, eq } from 'drizzle-orm'
import type { Hash, RpcBlock, RpcTransaction } from 'viem'
import type { BlockSelector } from '../codecs/index.js'
import { byteaToHex, type Db, hexToBytea, schema } from '../db/index.js'
import { ANSWER_BYTES, type AnswerCache } from './cache.js'
import type { ChainState } from './chain.js'
import { formatPendingBlock, formatPendingTransaction, isPendingTag, type PendingView } from './pending.js'

export type GetBlockParameters = { block: BlockSelector; includeTransactions: boolean }

export function createBlockResolvers({
  db,
  chain,
  cache,
  pendingView,
}: { db: Db; chain: ChainState; cache: AnswerCache; pendingView: PendingView }) {
  async function blockNumberOf(selector: BlockSelector): Promise<number | null> {
    const resolved = await chain.resolve(selector)
    return resolved.status === 'known' ? resolved.number : null
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_getblockbynumber (and ByHash) */
  async function getBlock({ block, includeTransactions }: GetBlockParameters): Promise<RpcBlock | null> {
    if (isPendingTag(block)) {
      const newest = await pendingView.newest()
      if (newest !== null) return formatPendingBlock(newest, includeTransactions) as unknown as RpcBlock
    }
    const number = await blockNumberOf(block)
    if (number === null) return null
    return cache.remember(
      `block:${number}:${includeTransactions}`,
      () => loadBlock(number, includeTransactions),
      (loaded) => ANSWER_BYTES.header + (loaded?.transactions.length ?? 0) * (includeTransactions ? ANSWER_BYTES.transaction : 70),
    )
  }

  async function loadBlock(number: number, includeTransactions: boolean): Promise<RpcBlock | null> {
    const [headerRows, transactionRows] = await Promise.all([
      db.drizzle.select({ header: schema.blocks.header }).from(schema.blocks).where(eq(schema.blocks.number, number)),
      includeTransactions
        ? db.drizzle
            .select({ body: schema.transactions.body })
            .from(schema.transactions)
            .where(eq(schema.transactions.blockNumber, number))
            .orderBy(asc(schema.transactions.transactionIndex))
        : db.drizzle
            .select({ hash: schema.transactions.hash })
            .from(schema.transactions)
            .where(eq(schema.transactions.blockNumber, number))
            .orderBy(asc(schema.transactions.transactionIndex)),
    ])
    const header = headerRows[0]?.header
    if (header === undefined) return null
    const transactions = transactionRows.map((row) => ('body' in row ? row.body : byteaToHex(row.hash)))
    return { ...header, transactions } as unknown as RpcBlock
  }

  return { getBlock, blockNumberOf }
}

export type TransactionLookup = { hash: Hash }

export function createTransactionResolvers({ db, cache, pendingView }: { db: Db; cache: AnswerCache; pendingView: PendingView }) {
  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_gettransactionbyhash */
  async function getTransaction({ hash }: TransactionLookup): Promise<RpcTransaction | null> {
    const confirmed = await cache.remember(`transaction:${hash}`, () => loadTransaction(hash), () => ANSWER_BYTES.transaction)
    if (confirmed !== null) return confirmed
    const pending = await pendingView.transaction(hash)
    return pending === null ? null : (formatPendingTransaction(pending.block, pending.index) as unknown as RpcTransaction)
  }

  async function loadTransaction(hash: Hash): Promise<RpcTransaction | null> {
    const rows = await db.drizzle
      .select({ body: schema.transactions.body })
      .from(schema.transactions)
      .where(eq(schema.transactions.hash, hexToBytea(hash)))
    return (rows[0]?.body as RpcTransaction | undefined) ?? null
  }

  return { getTransaction }
}
