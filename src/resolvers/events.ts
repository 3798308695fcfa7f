import type { Logger } from 'pino'
import type { Hash, RpcBlock, RpcTransaction } from 'viem'
import type { BlockSelector } from '../codecs/index.js'
import { loggableError } from '../errors.js'
import type { PendingBlock, PendingLog, PendingReceipt, PendingState, PendingTransaction } from '../pending/index.js'
import type { BlockWithHashes } from './batches.js'
import type { AnswerCache } from './cache.js'
import type { ChainState } from './chain.js'
import type { GetBlockParameters } from './blocks.js'
import type { GetLogsParameters, Log, LogLimits } from './logs.js'

/**
 * Blocks whose logs a process keeps after announcing them, to announce them again with `removed: true`
 * when a reorg undoes them: the bound on the reorg depth that subscribers hear of in full. The rows are
 * gone from the database by the time a process that does not ingest learns of the reorg, so what it
 * announced is all it can take back. 64 blocks is two minutes of Base and eight of Ethereum, far deeper
 * than either reorganises; a deeper reorg takes back the logs of the newest 64 blocks only.
 */
export const REORG_MEMORY_BLOCKS = 64
/** While anyone follows the chain, its head is also read this often, in case a notification went unheard. */
const SAFETY_POLL_MS = 2_000
/** A head announced before this process's database shows it (a read replica behind): looked for again this often… */
const ANNOUNCED_HEAD_RETRY_MS = 50
/** …for this long, after which the safety poll takes over. */
const ANNOUNCED_HEAD_WAIT_MS = 10_000
/** A catch-up that failed (the database away) is tried again after this long, doubling up to the maximum. */
const RETRY_BASE_MS = 100
const RETRY_MAX_MS = 5_000
/** Reads that disagree with each other (a reorg landed between them) are done again at most this many times in a row. */
const MAX_INCONSISTENT_READS = 5

/** The stream's own reads of a block's logs: one block at a time, never refused for how many logs it has. */
export const EVENT_LOG_LIMITS: LogLimits = { maxBlockRange: 1, maxLogs: Number.MAX_SAFE_INTEGER, maxQueryCost: 0 }

/**
 * What subscribers hear, in order, the same on every process: the one that ingests and those that do not.
 * https://geth.ethereum.org/docs/interacting-with-geth/rpc/pubsub
 */
export type ChainEventMap = {
  /** A new canonical block, as `eth_getBlockByNumber(n, false)` answers it (`newHeads` leaves out `transactions`). */
  head: [block: BlockWithHashes]
  /** The logs of the block just announced by `head`, in order; or the logs a reorg undid, with `removed: true`. */
  logs: [logs: Log[]]
  /** Transactions a flashblock pre-confirmed, in block order, as soon as it arrives. */
  pendingTransactions: [block: PendingBlock, transactions: PendingTransaction[]]
  /**
   * Transactions of a new canonical block that no flashblock pre-confirmed here (all of them on a chain
   * without a Flashblocks feed), whole, in block order, just before its `head`: with `pendingTransactions`,
   * each transaction once, as the HTTP pending-transaction filter reports them.
   */
  sealedTransactions: [transactions: RpcTransaction[]]
  /**
   * The pending block after a flashblock, as `eth_getBlockByNumber("pending", true)` answers it: whole
   * transactions, as Base's node sends `newFlashblocks` (base/base `rpc/pubsub.rs`, `get_latest_block(true)`).
   */
  flashblock: [block: Record<string, unknown>]
  /** Pre-confirmed logs whose receipts became known (from the frame, or hydrated), in order. */
  pendingLogs: [logs: PendingLog[]]
  /**
   * Pre-confirmed transactions with their receipts once those are known, as Base's node sends
   * `newFlashblockTransactions` whole (after it has run the flashblock: each transaction with its `logs`); at
   * once, without receipts (`null`), where none will come (a feed of frames alone).
   */
  flashblockTransactions: [block: PendingBlock, transactions: PendingTransaction[], receipts: PendingReceipt[] | null]
}

export type ChainEventName = keyof ChainEventMap
export type ChainEventListener<event extends ChainEventName> = (...args: ChainEventMap[event]) => void

/** The one event stream behind `eth_subscribe` (JSON-RPC over WebSocket) and GraphQL subscriptions. */
export type ChainEvents = {
  /** Calls `listener` with each `event` until the returned function is called. */
  subscribe<event extends ChainEventName>(event: event, listener: ChainEventListener<event>): () => void
}

type Announced = { number: number; hash: Hash; logs: Log[] | null }
/** Where announcing resumes: after this block (`hash` unknown after a reorg deeper than the memory). */
type Tip = { number: number; hash: Hash | null }

/**
 * Heads and logs are read from the database, whoever wrote them: `changed` (the ingester in this process
 * committed or rewound; or the one that ingests announced it over Postgres NOTIFY, db/notifications.ts)
 * starts a catch-up from the last block announced to the head the database shows. One read per block
 * (shared by every subscriber on every connection), and only while someone follows the chain. Each new
 * block must link to the last one announced; when it does not, or when that one is no longer canonical,
 * the announced blocks that a reorg undid are walked back and their logs announced with `removed: true`.
 * Notifications are wake-ups, not data: a lost one delays, and never skips or repeats, a block.
 *
 * Pre-confirmations (`pendingTransactions`, `flashblock`, `pendingLogs`) come from this process's own
 * pending view, which every process follows from the Flashblocks feed.
 */
export function createEventStream(options: {
  chain: ChainState
  cache: AnswerCache
  getBlock(parameters: GetBlockParameters): Promise<RpcBlock | null>
  /** `eth_getLogs` under `EVENT_LOG_LIMITS`. */
  getLogs(parameters: GetLogsParameters): Promise<Log[]>
  pendingBlock(block: PendingBlock, includeTransactions: boolean): Promise<Record<string, unknown>>
  /** The indexed blocks numbered `from` to `to`, with their hashes, in order (db/block-hashes.ts). */
  blockHashes(from: number, to: number): Promise<{ number: number; hash: Hash }[]>
  pending: PendingState | null
  logger: Logger | null
}) {
  const { chain, cache, pending, logger } = options
  const listeners = new Map<ChainEventName, Set<(args: readonly unknown[]) => void>>()

  /** The blocks announced, oldest first, at most `REORG_MEMORY_BLOCKS`; `tip` is the newest (or after a deep reorg, where to resume). */
  let announced: Announced[] = []
  /** `undefined` until someone follows the chain; `null` when the index was empty then (announcing starts at its first block). */
  let tip: Tip | null | undefined
  /** The view when the first listener came: blocks after its head are new to that listener. */
  let startView: ReturnType<ChainState['view']> | null = null
  /** Bumped when nobody follows any more, so that a catch-up under way leaves the state alone. */
  let generation = 0
  let running: Promise<void> | null = null
  let again = false
  let poll: NodeJS.Timeout | null = null
  let retry: NodeJS.Timeout | null = null
  let failures = 0
  /** The highest head announced by the ingester that this process's database did not show yet. */
  let awaited: { number: number; since: number } | null = null

  const count = (event: ChainEventName) => listeners.get(event)?.size ?? 0
  const following = () => count('head') + count('logs') + count('sealedTransactions') > 0
  /** Hashes pre-confirmed here, by block number, until that block is announced: not sent again when it seals. */
  const preConfirmed = new Map<number, Set<Hash>>()

  function emit<event extends ChainEventName>(event: event, ...args: ChainEventMap[event]) {
    for (const listener of [...(listeners.get(event) ?? [])]) {
      try {
        listener(args)
      } catch (error) {
        logger?.error({ err: loggableError(error), event }, 'a subscriber failed on an event')
      }
    }
  }

  function followingChanged() {
    if (following() && poll === null) {
      startView = chain.view()
      // A view that fails is read again by the catch-up.
      startView.catch(() => {})
      poll = setInterval(run, SAFETY_POLL_MS)
      poll.unref()
      run()
    } else if (!following() && poll !== null) {
      clearInterval(poll)
      poll = null
      generation++
      preConfirmed.clear()
      announced = []
      tip = undefined
      startView = null
    }
  }

  function subscribe<event extends ChainEventName>(event: event, listener: ChainEventListener<event>): () => void {
    // A wrapper of its own, so that one function subscribed twice is called twice and unsubscribed once.
    const entry = (args: readonly unknown[]) => listener(...(args as ChainEventMap[event]))
    let set = listeners.get(event)
    if (set === undefined) listeners.set(event, (set = new Set()))
    set.add(entry)
    followingChanged()
    return () => {
      if (set.delete(entry)) followingChanged()
    }
  }

  /** Starts a catch-up, or asks the one under way to run once more. */
  function run() {
    if (running !== null) {
      again = true
      return
    }
    running = (async () => {
      do {
        again = false
        await catchUp()
      } while (again)
    })().finally(() => {
      running = null
    })
  }

  async function catchUp() {
    if (retry !== null) clearTimeout(retry)
    retry = null
    try {
      for (let attempt = 1; !(await follow()); attempt++) {
        // What was read disagrees with itself (a reorg landed in between): read again, past cached answers.
        chain.invalidate()
        cache.clear()
        if (attempt === MAX_INCONSISTENT_READS) {
          later(RETRY_MAX_MS)
          return
        }
      }
      failures = 0
      if (awaited !== null && tip !== undefined && (tip?.number ?? -1) < awaited.number) {
        // Announced, but this process's database (a read replica) does not show it yet.
        if (Date.now() - awaited.since < ANNOUNCED_HEAD_WAIT_MS) later(ANNOUNCED_HEAD_RETRY_MS, true)
        else awaited = null
      } else awaited = null
    } catch (error) {
      const delay = Math.min(RETRY_BASE_MS * 2 ** failures++, RETRY_MAX_MS)
      logger?.warn({ err: loggableError(error), retryInMs: delay }, 'could not read the new blocks for subscribers; trying again')
      later(delay, true)
    }
  }

  function later(delayMs: number, fresh = false) {
    if (!following() || retry !== null) return
    retry = setTimeout(() => {
      retry = null
      if (fresh) chain.invalidate()
      run()
    }, delayMs)
    retry.unref()
  }

  /**
   * Announces the blocks after `tip` up to the head, taking back first what a reorg undid; `false` when
   * two reads disagreed (nothing inconsistent is announced: the caller reads again).
   */
  async function follow(): Promise<boolean> {
    if (!following()) return true
    const started = generation
    if (tip === undefined) {
      const { head, firstBlock } = await (startView ?? chain.view())
      if (started !== generation) return true
      // The newest blocks, known to be canonical then, with no logs announced: a reorg that reaches below the
      // head is walked back through them to where it forked, and the new branch is announced from there (a
      // node sends it all). Remembering the head alone, the new blocks below it were never announced.
      const recent = head === null ? [] : await options.blockHashes(Math.max(firstBlock ?? head.number, head.number - REORG_MEMORY_BLOCKS + 1), head.number)
      if (started !== generation) return true
      if (head !== null && recent.at(-1)?.hash !== head.hash) {
        // A reorg landed between the two reads: read both again, the view too.
        startView = null
        return false
      }
      tip = head === null ? null : { number: head.number, hash: head.hash }
      announced = recent.map((block) => ({ ...block, logs: null }))
    }
    const { head, firstBlock } = await chain.view()
    if (started !== generation || head === null) return true
    // A head at or below the block announced last, and not that block: blocks were undone.
    if (tip !== null && tip.hash !== null && tip.number >= head.number && !(tip.number === head.number && tip.hash === head.hash)) {
      if (!(await isCanonical({ number: tip.number, hash: tip.hash }))) await unwind()
      if (started !== generation) return true
    }
    let number = tip === null ? (firstBlock ?? head.number) : tip.number + 1
    while (number <= head.number) {
      const selector: BlockSelector = { kind: 'number', number: BigInt(number) }
      const block = (await options.getBlock({ block: selector, includeTransactions: false })) as BlockWithHashes | null
      if (started !== generation) return true
      // Gone since the view was read: a rewind under way.
      if (block === null) return false
      if (tip !== null && tip.hash !== null && block.parentHash !== tip.hash) {
        // Not the child of the block announced last: that one was undone, or what was read is stale.
        if (await isCanonical({ number: tip.number, hash: tip.hash })) return false
        const resumeAfter = await unwind()
        if (started !== generation) return true
        number = resumeAfter.number + 1
        continue
      }
      const logs =
        count('logs') > 0
          ? await options.getLogs({ filter: { addresses: null, topics: [], fromBlock: selector, toBlock: selector }, limits: EVENT_LOG_LIMITS })
          : null
      if (started !== generation) return true
      if (logs?.some((log) => log.blockHash !== block.hash)) return false
      const unconfirmed = count('sealedTransactions') > 0 ? await sealedTransactions(block) : []
      if (started !== generation) return true
      if (unconfirmed === null) return false
      if (unconfirmed.length > 0) emit('sealedTransactions', unconfirmed)
      announce(block, logs)
      number++
    }
    return true
  }

  function announce(block: BlockWithHashes, logs: Log[] | null) {
    const number = Number(block.number)
    tip = { number, hash: block.hash }
    announced.push({ number, hash: block.hash, logs })
    if (announced.length > REORG_MEMORY_BLOCKS) announced.shift()
    emit('head', block)
    if (logs !== null && logs.length > 0) emit('logs', logs)
  }

  /** The block's transactions that were not pre-confirmed here, whole; `null` when the block read is not `block` any more. */
  async function sealedTransactions(block: BlockWithHashes): Promise<RpcTransaction[] | null> {
    const confirmed = preConfirmed.get(Number(block.number))
    let unconfirmed: RpcTransaction[] = []
    if (!block.transactions.every((hash) => confirmed?.has(hash))) {
      const whole = await options.getBlock({ block: { kind: 'hash', hash: block.hash, requireCanonical: false }, includeTransactions: true })
      // Read again, with what was pre-confirmed still remembered.
      if (whole === null) return null
      unconfirmed = (whole.transactions as RpcTransaction[]).filter((transaction) => !confirmed?.has(transaction.hash))
    }
    for (const number of preConfirmed.keys()) if (number <= Number(block.number)) preConfirmed.delete(number)
    return unconfirmed
  }

  async function isCanonical(block: { number: number; hash: Hash }): Promise<boolean> {
    return (await chain.blockByHash(block.hash))?.number === block.number
  }

  /**
   * Takes back the announced blocks that are no longer canonical (the newest is not): their logs, in chain
   * order, with `removed: true`. Announcing resumes after the newest one still canonical.
   */
  async function unwind(): Promise<Tip> {
    const undone: Announced[] = []
    while (announced.length > 0 && !(await isCanonical(announced.at(-1)!))) undone.unshift(announced.pop()!)
    // Deeper than the memory: resume after the parent of the oldest block remembered, its hash unknown.
    const resumeAfter: Tip = announced.at(-1) ?? { number: (undone[0]?.number ?? tip!.number) - 1, hash: null }
    tip = resumeAfter
    const removed = undone.flatMap((block) => block.logs ?? []).map((log) => ({ ...log, removed: true }))
    if (removed.length > 0) emit('logs', removed)
    return resumeAfter
  }

  // Pre-confirmations, fanned out once for every subscriber of this process.
  let flashblocks = Promise.resolve()
  pending?.events.on('transactions', (block, transactions) => {
    emit('pendingTransactions', block, transactions)
    if (count('flashblockTransactions') > 0 && !pending.receiptsComing) emit('flashblockTransactions', block, transactions, null)
    if (count('sealedTransactions') > 0) {
      let hashes = preConfirmed.get(block.number)
      if (hashes === undefined) preConfirmed.set(block.number, (hashes = new Set()))
      for (const transaction of transactions) hashes.add(transaction.hash)
    }
    if (count('flashblock') === 0) return
    // In order: each flashblock's header is built after the previous one's.
    flashblocks = flashblocks.then(async () => {
      try {
        emit('flashblock', await options.pendingBlock(block, true))
      } catch (error) {
        logger?.warn({ err: loggableError(error) }, 'could not build the pending block for subscribers')
      }
    })
  })
  pending?.events.on('receipts', (block, receipts) => {
    if (count('flashblockTransactions') > 0) {
      // By their position in the block (an undecodable transaction takes one, and is in no list).
      const byIndex = new Map(block.transactions.map((transaction) => [transaction.index, transaction]))
      const known = receipts.filter((receipt) => byIndex.has(Number(receipt.transactionIndex)))
      const transactions = known.map((receipt) => byIndex.get(Number(receipt.transactionIndex))!)
      if (known.length > 0) emit('flashblockTransactions', block, transactions, known)
    }
    if (count('pendingLogs') === 0) return
    const logs = receipts.flatMap((receipt) => receipt.logs)
    if (logs.length > 0) emit('pendingLogs', logs)
  })
  pending?.events.on('withdrawn', (_block, receipts) => {
    if (count('pendingLogs') === 0) return
    const logs = receipts.flatMap((receipt) => receipt.logs).map((log) => ({ ...log, removed: true as const }))
    if (logs.length > 0) emit('pendingLogs', logs)
  })

  const events: ChainEvents = { subscribe }
  return {
    events,
    /**
     * The chain changed (blocks committed or rewound) or may have: catch up. `head`, when known, is the
     * head the ingester committed, looked for until this process's database shows it.
     */
    changed({ reorg, head }: { reorg: boolean; head?: number }) {
      if (reorg) awaited = null
      if (head !== undefined && head > (awaited?.number ?? -1)) awaited = { number: head, since: Date.now() }
      if (following()) run()
    },
  }
}

export type EventStream = ReturnType<typeof createEventStream>
