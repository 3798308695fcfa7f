import { asc, eq } from 'drizzle-orm'
import { type Address, type Hash, type Hex, type RpcBlock, type RpcTransaction, toHex } from 'viem'
import type { BlockSelector } from '../codecs/index.js'
import { byteaToHex, type Db, hexToBytea, schema } from '../db/index.js'
import { ANSWER_BYTES, type AnswerCache, blockBytes, transactionBytes } from './cache.js'
import type { ForwardedTransactions, PendingBlock } from '../pending/index.js'
import { formatPendingTransaction, formatPoolTransaction } from '../objects/transaction.js'
import type { PendingView } from './pending.js'
import type { ReadContext } from './context.js'
import { formatPendingBlock } from '../objects/block.js'
import type { History } from './history.js'
import { createBlockBodies } from './block-bodies.js'

export type GetBlockParameters = { block: BlockSelector; includeTransactions: boolean }

export function createBlockResolvers({ db, chain, cache, pendingView, history }: ReadContext) {
  const bodies = createBlockBodies({ db })

  async function blockNumberOf(selector: BlockSelector): Promise<number | null> {
    const resolved = await chain.resolve(selector)
    return resolved.status === 'known' ? resolved.number : null
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_getblockbynumber (and ByHash) */
  async function getBlock({ block, includeTransactions }: GetBlockParameters): Promise<RpcBlock | null> {
    const resolved = await pendingView.resolve(block)
    if (resolved.kind === 'pending') return (await pendingBlock(resolved.block, includeTransactions)) as unknown as RpcBlock
    const found = await chain.resolve(resolved.selector)
    // Older than the index (or not known to it by hash): the chain's history, from the upstream.
    if (found.status === 'beforeIndex') return history.block(found.number, includeTransactions)
    if (found.status === 'unknownHash' && resolved.selector.kind === 'hash') return history.blockByHash(resolved.selector.hash, includeTransactions)
    if (found.status !== 'known') return null
    const number = found.number
    return cache.remember(`block:${number}:${includeTransactions}`, () => loadBlock(number, includeTransactions), blockBytes)
  }

  /** A pre-confirmed block, with the optional header fields its parent has (the parent is indexed, or pending too). */
  async function pendingBlock(block: PendingBlock, includeTransactions: boolean): Promise<Record<string, unknown>> {
    const parent = await loadHeader(block.number - 1)
    return formatPendingBlock(block, {
      includeTransactions,
      parent: parent ?? (await loadHeader((await chain.view()).head?.number ?? -1)),
      convention: pendingView.sizeConvention,
      formatTransaction: formatPendingTransaction,
    })
  }

  async function loadHeader(number: number): Promise<Record<string, unknown> | null> {
    if (number < 0) return null
    return cache.remember(
      `header:${number}`,
      async () => {
        const rows = await db.drizzle.select({ header: schema.blocks.header }).from(schema.blocks).where(eq(schema.blocks.number, number))
        return (rows[0]?.header as Record<string, unknown> | undefined) ?? null
      },
      () => ANSWER_BYTES.header,
    )
  }

  async function loadBlock(number: number, includeTransactions: boolean): Promise<RpcBlock | null> {
    const [headerRows, transactions] = await Promise.all([
      db.drizzle.select({ header: schema.blocks.header }).from(schema.blocks).where(eq(schema.blocks.number, number)),
      includeTransactions
        ? bodies.blockTransactionsOf([number]).then((byNumber) => byNumber.get(number) ?? [])
        : db.drizzle
            .select({ hash: schema.transactions.hash })
            .from(schema.transactions)
            .where(eq(schema.transactions.blockNumber, number))
            .orderBy(asc(schema.transactions.transactionIndex))
            .then((rows) => rows.map((row) => byteaToHex(row.hash))),
    ])
    const header = headerRows[0]?.header
    if (header === undefined) return null
    return { ...header, transactions } as unknown as RpcBlock
  }

  /**
   * `eth_getBlockTransactionCountByNumber` (and ByHash): the number of transactions of the block `getBlock`
   * answers, so that it names the same block at every tag (the index's head, not the node's); `null` when unknown.
   */
  async function getBlockTransactionCount({ block }: { block: BlockSelector }): Promise<Hex | null> {
    // A pre-confirmed block counts a transaction no decoder knows, which its list leaves out (state.ts).
    const resolved = await pendingView.resolve(block)
    if (resolved.kind === 'pending') return toHex(resolved.block.transactionCount)
    const found = await getBlock({ block, includeTransactions: false })
    return found === null ? null : toHex(found.transactions.length)
  }

  /**
   * `eth_getTransactionByBlockNumberAndIndex` (and BlockHashAndIndex): the transaction at `index` of that block,
   * or `null`. Found by its own `transactionIndex`: in a pre-confirmed block that left out a transaction no
   * decoder knows, those after it are not at their position in the list.
   */
  async function getTransactionByBlockAndIndex({ block, index }: { block: BlockSelector; index: bigint }): Promise<RpcTransaction | null> {
    const found = await getBlock({ block, includeTransactions: true })
    if (found === null) return null
    const wanted = toHex(index)
    const transactions = found.transactions as RpcTransaction[]
    const atPosition = index < BigInt(transactions.length) ? transactions[Number(index)] : undefined
    if (atPosition?.transactionIndex === wanted) return atPosition
    return transactions.find((transaction) => transaction.transactionIndex === wanted) ?? null
  }

  /**
   * `eth_getUncleCountByBlockNumber` (and ByHash): the length of the block's own `uncles` (the stored header keeps
   * it as the node sent it; 0 after the merge and on OP chains, a pending block has none), naming the same block
   * as `getBlock` at every tag; `null` for an unknown block, as geth and reth answer (anvil errs with -32001).
   */
  async function getUncleCount({ block }: { block: BlockSelector }): Promise<Hex | null> {
    const found = await getBlock({ block, includeTransactions: false })
    return found === null ? null : toHex(found.uncles?.length ?? 0)
  }

  /**
   * `eth_getUncleByBlockNumberAndIndex` (and BlockHashAndIndex): `null` for an unknown block or an index past its
   * `uncles`, from the index. The index keeps no uncle headers, so one that exists is asked of the upstream by
   * the hash of the block the index resolved (a pre-merge chain's; the same block whatever the node's head).
   */
  async function getUncleByBlockAndIndex({ block, index }: { block: BlockSelector; index: bigint }): Promise<RpcBlock | null> {
    const found = await getBlock({ block, includeTransactions: false })
    if (found === null || found.hash === null || index >= BigInt(found.uncles?.length ?? 0)) return null
    return history.uncle(found.hash, index)
  }

  return { getBlock, blockNumberOf, pendingBlock, getBlockTransactionCount, getTransactionByBlockAndIndex, getUncleCount, getUncleByBlockAndIndex }
}

export type TransactionLookup = { hash: Hash }

export function createTransactionResolvers({
  db,
  cache,
  pendingView,
  forwarded,
  history,
  preConfirmedNonce,
}: {
  db: Db
  cache: AnswerCache
  pendingView: PendingView
  /** Transactions forwarded (by this process, or by any it shares them with): found, as in a node's pool, until a flashblock shows them. */
  forwarded: ForwardedTransactions | null
  history: History
  /** An account's nonce after the sealed chain and the pre-confirmed blocks (resolvers/accounts.ts). */
  preConfirmedNonce: (address: Address) => Promise<bigint>
}) {
  const bodies = createBlockBodies({ db })

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_gettransactionbyhash */
  async function getTransaction({ hash }: TransactionLookup): Promise<RpcTransaction | null> {
    const confirmed = await cache.remember(`transaction:${hash}`, () => loadTransaction(hash), transactionBytes)
    if (confirmed !== null) return confirmed
    const pending = await pendingView.transaction(hash)
    if (pending !== null) return formatPendingTransaction(pending.block, pending.position) as unknown as RpcTransaction
    const inPool = forwarded === null ? null : await forwarded.transaction(hash)
    // In the pool while its nonce is still to be taken: once the chain (or a pre-confirmed block) has taken it,
    // by this transaction or another (a replacement sent elsewhere, an EIP-7702 authorization), a node's pool
    // holds it no more.
    // (Before the index holds a block, nothing can have taken it.) When the nonce cannot be read, the node says.
    const taken = inPool === null ? null : await preConfirmedNonce(inPool.from).catch(() => null)
    if (inPool !== null && taken !== null && BigInt(inPool.nonce) >= taken) return formatPoolTransaction(inPool) as unknown as RpcTransaction
    // Its block may have sealed while we looked: the index commits a block before the pending view lets go
    // of it, so a transaction gone from the pending view is in the index now (or pre-confirmed meanwhile).
    const sealed = await loadTransaction(hash)
    if (sealed !== null) return sealed
    if (inPool !== null) {
      const shown = await pendingView.transaction(hash)
      if (shown !== null) return formatPendingTransaction(shown.block, shown.position) as unknown as RpcTransaction
    }
    return history.transaction(hash)
  }

  async function loadTransaction(hash: Hash): Promise<RpcTransaction | null> {
    const [found] = await bodies.transactionsWhere(eq(schema.transactions.hash, hexToBytea(hash)))
    return found?.item ?? null
  }

  return { getTransaction }
}
