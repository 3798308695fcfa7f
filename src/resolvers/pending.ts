import type { Address, Hash, Hex } from 'viem'
import type { BlockSelector, LogFilter } from '../codecs/index.js'
import { PENDING_BLOCK_HASH, type PendingBlock, type PendingLog, type PendingReceipt, type PendingState } from '../pending/index.js'
import type { PendingTransaction } from '../pending/index.js'
import type { ChainState } from './chain.js'

const hex = (value: bigint | number) => `0x${value.toString(16)}` as Hex

export function isPendingTag(selector: BlockSelector | undefined): boolean {
  return selector?.kind === 'tag' && selector.tag === 'pending'
}

export function matchesFilter(log: { address: Address; topics: Hash[] }, filter: Pick<LogFilter, 'addresses' | 'topics'>): boolean {
  if (filter.addresses !== null && !filter.addresses.includes(log.address)) return false
  return filter.topics.every((alternatives, position) => {
    if (alternatives === null) return true
    const topic = log.topics[position]
    return topic !== undefined && alternatives.includes(topic)
  })
}

/** The RPC object of a pre-confirmed transaction, as a node shows it once mined, with the pending block hash. */
export function formatPendingTransaction(block: PendingBlock, index: number): Record<string, unknown> {
  const transaction = block.transactions[index]!
  const receipt = block.receipts[index]
  return {
    ...transaction.fields,
    hash: transaction.hash,
    blockHash: PENDING_BLOCK_HASH,
    blockNumber: hex(block.number),
    transactionIndex: hex(index),
    from: transaction.from,
    // For fee-market transactions nodes report the price actually paid.
    gasPrice: (receipt?.effectiveGasPrice as Hex | undefined) ?? transaction.fields.gasPrice,
  }
}

export function formatPendingBlock(block: PendingBlock, includeTransactions: boolean): Record<string, unknown> {
  return {
    hash: PENDING_BLOCK_HASH,
    parentHash: block.parentHash,
    miner: block.feeRecipient,
    number: hex(block.number),
    gasLimit: hex(block.gasLimit),
    gasUsed: hex(block.cumulativeGasUsed),
    timestamp: hex(block.timestamp),
    extraData: block.extraData,
    baseFeePerGas: hex(block.baseFeePerGas),
    transactions: includeTransactions
      ? block.transactions.map((_, index) => formatPendingTransaction(block, index))
      : block.transactions.map((transaction) => transaction.hash),
  }
}

/** The pre-confirmed blocks above the indexed head, as the resolvers see them. */
export function createPendingView({ chain, pending }: { chain: ChainState; pending: PendingState | null }) {
  async function blocks(): Promise<PendingBlock[]> {
    if (pending === null) return []
    const view = await chain.view()
    return pending.blocks(view.head?.number ?? -1)
  }

  return {
    blocks,
    /** The newest pending block, or `null` when `pending` should answer as `latest`. */
    async newest(): Promise<PendingBlock | null> {
      return (await blocks()).at(-1) ?? null
    },
    /** Pre-confirmed logs that match the filter's addresses and topics, in block and log order. */
    async logs(filter: Pick<LogFilter, 'addresses' | 'topics'>): Promise<PendingLog[]> {
      const matching: PendingLog[] = []
      for (const block of await blocks())
        for (const receipt of block.receipts)
          for (const log of receipt?.logs ?? []) if (matchesFilter(log, filter)) matching.push(log)
      return matching
    },
    async transaction(hash: Hash): Promise<{ block: PendingBlock; index: number } | null> {
      for (const block of await blocks()) {
        const index = block.transactions.findIndex((transaction: PendingTransaction) => transaction.hash === hash)
        if (index !== -1) return { block, index }
      }
      return null
    },
    async receipt(hash: Hash): Promise<PendingReceipt | null> {
      for (const block of await blocks()) {
        const index = block.transactions.findIndex((transaction) => transaction.hash === hash)
        if (index !== -1) return block.receipts[index] ?? null
      }
      return null
    },
  }
}

export type PendingView = ReturnType<typeof createPendingView>
