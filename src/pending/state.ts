import { EventEmitter } from 'node:events'
import type { Logger } from 'pino'
import type { Address, Hash, Hex } from 'viem'
import type { FeedReceipt, FlashblockMessage } from './message.js'
import { buildPendingReceipt, PENDING_BLOCK_HASH, type PendingReceipt } from './receipts.js'
import { decodePendingTransaction, type PendingTransaction } from './transactions.js'

/** A feed silent for this long is stale: `pending` then answers as `latest` (DESIGN.md §5). */
export const FLASHBLOCK_STALE_MS = 2_000
/**
 * Pre-confirmed blocks kept at most: if the index stops advancing (upstream down) while the feed goes on,
 * the oldest go first; 32 blocks is a minute of Base.
 */
const MAX_PENDING_BLOCKS = 32

export type PendingBlock = {
  number: number
  payloadId: string
  /** Index of the last flashblock applied. */
  lastIndex: number
  parentHash: Hash
  timestamp: bigint
  baseFeePerGas: bigint
  gasLimit: bigint
  feeRecipient: Address
  extraData: Hex
  transactions: PendingTransaction[]
  /** Aligned with `transactions`; `null` where no receipt could be had yet. */
  receipts: (PendingReceipt | null)[]
  /** Latest balance of each account the feed reported for this block. */
  balances: Map<Address, bigint>
  /** Whether the feed sent balances at all (older feeds do not). */
  reportsBalances: boolean
  cumulativeGasUsed: bigint
  logCount: number
}

export type ApplyOutcome = 'started' | 'appended' | 'duplicate' | 'ignored' | 'dropped'

export type PendingStateEvents = {
  /** The pending view changed (a flashblock applied, a block confirmed or the state dropped). */
  update: []
  /** Transactions newly pre-confirmed, in order, with their receipts. */
  transactions: [block: PendingBlock, transactions: PendingTransaction[]]
}

export type PendingStateConfig = {
  logger: Logger
  /** Fetches the receipt of a pre-confirmed transaction the feed sent none for (a pending-aware upstream). */
  fetchReceipt?: (hash: Hash) => Promise<Record<string, unknown> | null>
  staleAfterMs?: number
  now?: () => number
}

/**
 * The pre-confirmed blocks above the indexed head, built from Flashblocks messages under Base's sequence
 * rules: index 0 starts a block, the next index appends, a duplicate is ignored, a gap or an out-of-order
 * index drops everything until the next index 0; blocks go as their canonical blocks are indexed.
 */
export function createPendingState(config: PendingStateConfig) {
  const { logger } = config
  const staleAfterMs = config.staleAfterMs ?? FLASHBLOCK_STALE_MS
  const now = config.now ?? Date.now
  const events = new EventEmitter<PendingStateEvents>()
  let blocks: PendingBlock[] = []
  let awaitingStart = true
  let confirmedHead = -1
  let lastMessageAt = Number.NEGATIVE_INFINITY
  // Messages are applied one at a time, in arrival order (sender recovery is asynchronous).
  let queue: Promise<unknown> = Promise.resolve()

  function drop(reason: string) {
    if (blocks.length > 0) logger.warn({ reason }, 'dropping pre-confirmed state until the next index 0')
    blocks = []
    awaitingStart = true
    events.emit('update')
  }

  function normaliseFetchedReceipt(receipt: Record<string, unknown>, block: PendingBlock): PendingReceipt {
    const logs = ((receipt.logs as Record<string, unknown>[] | undefined) ?? []).map((log) => ({
      ...log,
      blockHash: PENDING_BLOCK_HASH,
      blockNumber: `0x${block.number.toString(16)}`,
    }))
    return { ...receipt, blockHash: PENDING_BLOCK_HASH, logs } as unknown as PendingReceipt
  }

  async function appendTransactions(block: PendingBlock, message: FlashblockMessage): Promise<PendingTransaction[]> {
    const decoded = await Promise.all(message.diff.transactions.map((raw) => decodePendingTransaction(raw)))
    const feedReceipts = message.metadata?.receipts
    for (const transaction of decoded) {
      const transactionIndex = block.transactions.length
      const feedReceipt: FeedReceipt | undefined = feedReceipts?.[transaction.hash]
      let receipt: PendingReceipt | null = null
      if (feedReceipt !== undefined) {
        receipt = buildPendingReceipt({
          transaction,
          receipt: feedReceipt,
          transactionIndex,
          firstLogIndex: block.logCount,
          previousCumulativeGasUsed: block.cumulativeGasUsed,
          block: { number: block.number, timestamp: block.timestamp, baseFeePerGas: block.baseFeePerGas },
        })
        block.cumulativeGasUsed = feedReceipt.cumulativeGasUsed
      } else if (config.fetchReceipt !== undefined) {
        const fetched = await config.fetchReceipt(transaction.hash).catch((error: unknown) => {
          logger.warn({ err: error, hash: transaction.hash }, 'could not fetch a pre-confirmed receipt')
          return null
        })
        if (fetched !== null) {
          receipt = normaliseFetchedReceipt(fetched, block)
          block.cumulativeGasUsed = BigInt((fetched.cumulativeGasUsed as Hex | undefined) ?? block.cumulativeGasUsed)
        }
      }
      block.logCount += receipt?.logs.length ?? 0
      block.transactions.push(transaction)
      block.receipts.push(receipt)
    }
    const balances = message.metadata?.new_account_balances
    if (balances !== undefined) {
      block.reportsBalances = true
      for (const [address, balance] of Object.entries(balances)) block.balances.set(address as Address, balance)
    }
    block.lastIndex = message.index
    return decoded
  }

  async function applyNow(message: FlashblockMessage): Promise<ApplyOutcome> {
    lastMessageAt = now()
    const current = blocks.at(-1)
    if (message.index === 0) {
      if (message.base === undefined) {
        drop('index 0 without base')
        return 'dropped'
      }
      const number = Number(message.base.block_number)
      if (number <= confirmedHead) return 'ignored'
      if (current !== undefined && current.payloadId === message.payload_id) return 'duplicate'
      // A block replaces any pending block at its height or above (the builder restarted it).
      blocks = blocks.filter((block) => block.number < number)
      const block: PendingBlock = {
        number,
        payloadId: message.payload_id,
        lastIndex: -1,
        parentHash: message.base.parent_hash,
        timestamp: message.base.timestamp,
        baseFeePerGas: message.base.base_fee_per_gas,
        gasLimit: message.base.gas_limit,
        feeRecipient: message.base.fee_recipient,
        extraData: message.base.extra_data ?? '0x',
        transactions: [],
        receipts: [],
        balances: new Map(),
        reportsBalances: false,
        cumulativeGasUsed: 0n,
        logCount: 0,
      }
      const added = await appendTransactions(block, message)
      blocks.push(block)
      if (blocks.length > MAX_PENDING_BLOCKS) blocks = blocks.slice(-MAX_PENDING_BLOCKS)
      awaitingStart = false
      events.emit('update')
      events.emit('transactions', block, added)
      return 'started'
    }
    if (awaitingStart || current === undefined) return 'ignored'
    if (message.payload_id === current.payloadId && message.index <= current.lastIndex) return 'duplicate'
    if (message.payload_id !== current.payloadId || message.index !== current.lastIndex + 1) {
      drop(`expected index ${current.lastIndex + 1} of ${current.payloadId}, got ${message.index} of ${message.payload_id}`)
      return 'dropped'
    }
    const added = await appendTransactions(current, message)
    events.emit('update')
    events.emit('transactions', current, added)
    return 'appended'
  }

  return {
    events,
    /** Applies one message after those before it; resolves with what the sequence rules made of it. */
    apply(message: FlashblockMessage): Promise<ApplyOutcome> {
      const result = queue.then(() => applyNow(message))
      queue = result.catch((error: unknown) => {
        logger.error({ err: error }, 'failed to apply a flashblock')
        drop('failed to apply a flashblock')
      })
      return result
    },
    /**
     * The canonical block `number` was indexed: its pre-confirmation goes. If the canonical transactions
     * do not start with the pre-confirmed ones, what was built on them is wrong too, and all of it goes.
     */
    confirm({ number, hash, transactionHashes }: { number: number; hash: Hash; transactionHashes: Hash[] }) {
      confirmedHead = Math.max(confirmedHead, number)
      const confirmed = blocks.find((block) => block.number === number)
      const contradicted =
        confirmed !== undefined &&
        confirmed.transactions.some((transaction, index) => transactionHashes[index] !== transaction.hash)
      const child = blocks.find((block) => block.number === number + 1)
      if (contradicted || (child !== undefined && child.parentHash !== hash)) {
        drop(`canonical block ${number} differs from its pre-confirmation`)
        return
      }
      const before = blocks.length
      blocks = blocks.filter((block) => block.number > number)
      if (blocks.length !== before) events.emit('update')
    },
    /** The pending blocks above the indexed head, oldest first; empty when the feed is stale. */
    blocks(headNumber: number): PendingBlock[] {
      // Blocks the index already holds are gone for good (a process without the ingester learns of
      // canonical blocks only through the head it reads).
      if (blocks.length > 0 && blocks[0]!.number <= headNumber) blocks = blocks.filter((block) => block.number > headNumber)
      if (now() - lastMessageAt > staleAfterMs) return []
      return blocks
    },
    /** Forgets everything (the feed connection was lost). */
    reset(reason: string) {
      drop(reason)
    },
    get lastMessageAt() {
      return lastMessageAt
    },
  }
}

export type PendingState = ReturnType<typeof createPendingState>
