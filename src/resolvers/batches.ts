import { asc, inArray } from 'drizzle-orm'
import type { Hash, RpcBlock, RpcTransaction, RpcTransactionReceipt } from 'viem'
import type { BlockSelector } from '../codecs/index.js'
import { byteaToHex, type Db, hexToBytea, schema } from '../db/index.js'
import { InvalidBlockRangeError } from '../errors.js'
import type { ChainState } from './chain.js'
import { rangeEnd, tooLarge } from './logs.js'
import type { PendingBlock } from '../pending/index.js'
import { formatPendingTransaction } from '../objects/transaction.js'
import type { PendingView } from './pending.js'
import { createBlockBodies } from './block-bodies.js'

/** Largest `blocks(from, to)` range: whole blocks are large objects. */
export const MAX_BLOCKS_PER_QUERY = 100

/** A block as `eth_getBlockByNumber(n, false)` answers it: the header with its transaction hashes. */
export type BlockWithHashes = RpcBlock<'latest', false>

/**
 * Look-ups by many keys at once, one SQL statement per table whatever the number of keys, for the
 * per-request dataloaders of the GraphQL schema. Each answer is the object the single look-up
 * (`getBlock`, `getTransaction`, `getTransactionReceipt`) returns, aligned with the keys, `null` where
 * unknown; keys above the indexed head are looked up in the pre-confirmed blocks.
 */
/** A range of blocks, both ends included. */
export type BlockRange = { from: BlockSelector; to: BlockSelector }

export function createBatchResolvers({
  db,
  chain,
  pendingView,
  pendingBlock,
}: {
  db: Db
  chain: ChainState
  pendingView: PendingView
  pendingBlock: (block: PendingBlock, includeTransactions: boolean) => Promise<Record<string, unknown>>
}) {
  const bodies = createBlockBodies({ db })

  async function blocksByNumbers(numbers: readonly number[]): Promise<(BlockWithHashes | null)[]> {
    if (numbers.length === 0) return []
    const [headerRows, hashRows] = await Promise.all([
      db.drizzle
        .select({ number: schema.blocks.number, header: schema.blocks.header })
        .from(schema.blocks)
        .where(inArray(schema.blocks.number, [...numbers])),
      db.drizzle
        .select({ blockNumber: schema.transactions.blockNumber, hash: schema.transactions.hash })
        .from(schema.transactions)
        .where(inArray(schema.transactions.blockNumber, [...numbers]))
        .orderBy(asc(schema.transactions.blockNumber), asc(schema.transactions.transactionIndex)),
    ])
    const hashesByBlock = new Map<number, Hash[]>()
    for (const row of hashRows) {
      const list = hashesByBlock.get(row.blockNumber)
      if (list) list.push(byteaToHex(row.hash))
      else hashesByBlock.set(row.blockNumber, [byteaToHex(row.hash)])
    }
    const byNumber = new Map(
      headerRows.map((row) => [row.number, { ...row.header, transactions: hashesByBlock.get(row.number) ?? [] } as unknown as BlockWithHashes]),
    )
    const pending = byNumber.size < numbers.length ? await pendingView.blocks() : []
    return Promise.all(
      numbers.map(async (number) => {
        const confirmed = byNumber.get(number)
        if (confirmed !== undefined) return confirmed
        const block = pending.find((candidate) => candidate.number === number)
        return block === undefined ? null : ((await pendingBlock(block, false)) as unknown as BlockWithHashes)
      }),
    )
  }

  async function transactionsByHashes(hashes: readonly Hash[]): Promise<(RpcTransaction | null)[]> {
    if (hashes.length === 0) return []
    const found = await bodies.transactionsWhere(inArray(schema.transactions.hash, hashes.map(hexToBytea)))
    const byHash = new Map(found.map((located) => [located.hash, located.item]))
    return Promise.all(
      hashes.map(async (hash) => {
        const confirmed = byHash.get(hash)
        if (confirmed !== undefined) return confirmed
        const pending = await pendingView.transaction(hash)
        return pending === null ? null : (formatPendingTransaction(pending.block, pending.position) as unknown as RpcTransaction)
      }),
    )
  }

  async function receiptsByHashes(hashes: readonly Hash[]): Promise<(RpcTransactionReceipt | null)[]> {
    if (hashes.length === 0) return []
    const found = await bodies.receiptsWhere(inArray(schema.transactions.hash, hashes.map(hexToBytea)))
    const byHash = new Map(found.map((located) => [located.hash, located.item]))
    return Promise.all(hashes.map(async (hash) => byHash.get(hash) ?? ((await pendingView.receipt(hash)) as unknown as RpcTransactionReceipt | null)))
  }

  /**
   * The numbers of the blocks from `from` to `to` that exist, at most `MAX_BLOCKS_PER_QUERY`; `to: pending`
   * ends with the pre-confirmed blocks when there are any.
   */
  async function blockNumbersInRange({ from, to }: BlockRange): Promise<number[]> {
    const split = await pendingView.split({ fromBlock: from, toBlock: to })
    const pendingNumbers = split.pending.map((block) => block.number)
    if (split.confirmed === null) return pendingNumbers.slice(0, MAX_BLOCKS_PER_QUERY)
    const [start, end] = await Promise.all([chain.resolve(split.confirmed.fromBlock), chain.resolve(split.confirmed.toBlock)])
    const fromNumber = rangeEnd(start)
    const toNumber = rangeEnd(end)
    if (fromNumber > toNumber) throw new InvalidBlockRangeError()
    if (toNumber - fromNumber + 1 + pendingNumbers.length > MAX_BLOCKS_PER_QUERY)
      throw tooLarge(
        `block range too large: at most ${MAX_BLOCKS_PER_QUERY} blocks per query`,
        fromNumber,
        fromNumber + MAX_BLOCKS_PER_QUERY - 1,
        MAX_BLOCKS_PER_QUERY,
      )
    const numbers = Array.from({ length: toNumber - fromNumber + 1 }, (_, offset) => fromNumber + offset)
    return [...numbers, ...pendingNumbers]
  }

  return { blocksByNumbers, transactionsByHashes, receiptsByHashes, blockNumbersInRange }
}

export type BatchResolvers = ReturnType<typeof createBatchResolvers>
