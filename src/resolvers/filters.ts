import { and, asc, between, gte, sql } from 'drizzle-orm'
import type { Hash, Hex } from 'viem'
import { type BlockSelector, type LogFilter, logFilter, newQuantityId } from '../codecs/index.js'
import { blockHashesBetween, byteaToHex, type Db, schema } from '../db/index.js'
import { FilterNotFoundError, InvalidBlockRangeError, LimitExceededError, TooManyFiltersError } from '../errors.js'
import { formatLog } from '../objects/log.js'
import type { PendingBlock } from '../pending/index.js'
import type { AnswerCache } from './cache.js'
import type { ChainState } from './chain.js'
import {
  type FilterCursor,
  type FilterKind,
  type FilterStore,
  MAX_FILTER_BYTES_PER_CLIENT,
  MAX_FILTERS,
  MAX_FILTERS_PER_CLIENT,
  type StoredFilter,
} from './filter-store.js'
import type { GetLogsParameters, Log, LogLimits } from './logs.js'
import { matchesFilter, type PendingView } from './pending.js'

/**
 * Blocks one poll of a block or pending-transaction filter reads at most; a filter further behind (the index
 * backfilling) catches up over the next polls. Base makes 150 blocks in a filter's 5-minute timeout.
 */
export const MAX_FILTER_BLOCKS_PER_POLL = 1_000
/** Transaction hashes one poll of a pending-transaction filter answers at most (~700 KB); the rest come next. */
export const MAX_FILTER_TRANSACTIONS_PER_POLL = 10_000
/** Polls that found their filter moved by another poll meanwhile are done again at most this many times. */
const MAX_CONTENDED_POLLS = 3
/**
 * Blocks last delivered that a block or log filter remembers: a reorg up to this deep below its last block is
 * found and the new branch delivered from its fork; a deeper one is delivered from this far back. As deep as
 * `eth_subscribe` `logs` goes (events.ts) and as the rewind keeps undone logs (`UNDONE_LOG_BLOCKS` in
 * ingest/store.ts), so that each log a filter delivered from a replaced block can be taken back.
 */
export const FILTER_REORG_DEPTH = 64
/**
 * Bytes of each remembered block hash a filter keeps: enough to tell two blocks at one height apart (a false
 * match is a 2^-64 chance per height compared), and 64 of them (~1.3 KB of JSON) take about what 16 whole
 * hashes did, in memory, in the primary of `--workers` and in Redis alike.
 */
export const FILTER_HASH_PREFIX_BYTES = 8
const HASH_PREFIX_CHARS = 2 + 2 * FILTER_HASH_PREFIX_BYTES

/** What a filter remembers of a block hash (a whole hash stored by an older version is cut the same way). */
export const hashPrefix = (hash: Hex): Hex => hash.slice(0, HASH_PREFIX_CHARS) as Hex

/**
 * What a cursor remembers, in place of a replaced block's hash prefix, once it has taken back that block's
 * logs: it matches no block, so the fork is found where it was, and no log in `undone_logs`.
 */
const TAKEN_BACK: Hex = '0x'

const cursorAt = (number: number, hashes: Hex[] = [], index = 0): FilterCursor => ({ number, index, hashes })

type BlockHash = { number: number; hash: Hash }
/** A block a filter delivered, as it remembers it. */
type DeliveredBlock = { number: number; prefix: Hex }
/**
 * What a poll reads of the chain past a cursor: the block its changes start at, the hashes up to where it
 * may go, and the blocks the cursor delivered that a reorg replaced (none without one).
 */
type ChainRead = { from: number; hashes: BlockHash[]; undone: DeliveredBlock[] }

/**
 * Stateful filters (`eth_newFilter`, `eth_newBlockFilter`, `eth_newPendingTransactionFilter`, polled with
 * `eth_getFilterChanges`), as clients use them over HTTP: ethers' contract and `pending` listeners, viem's
 * `watchPendingTransactions` and `createEventFilter`, web3.py's `create_filter`.
 * https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_newfilter
 *
 * A filter is a cursor, not a buffer of events: each poll reads what lies past it from the index (and the
 * pre-confirmed blocks, for pending transactions) and moves it. So any process holding the cursor answers a
 * poll (the store: memory, the primary of the workers, or Redis), and a filter costs the same whether it is
 * polled every second or every four minutes. As in geth, changes start after the head the filter was
 * installed at, and a filter not polled for 5 minutes is gone (`filter not found`, which clients answer by
 * installing it again). After a reorg, the changes start again at the first block of the new branch; a log
 * filter first reports the logs it matched in the replaced blocks again, with `removed: true`, as geth does.
 */
export function createFilterResolvers({
  db,
  chain,
  cache,
  pendingView,
  getLogs,
  store,
  maxBlocksPerPoll = MAX_FILTER_BLOCKS_PER_POLL,
  maxTransactionsPerPoll = MAX_FILTER_TRANSACTIONS_PER_POLL,
}: {
  db: Db
  chain: ChainState
  cache: AnswerCache
  pendingView: PendingView
  getLogs(parameters: GetLogsParameters): Promise<Log[]>
  store: FilterStore
  /** Bounds of one poll (tests make them small). */
  maxBlocksPerPoll?: number
  maxTransactionsPerPoll?: number
}) {
  async function head(): Promise<{ number: number; hash: Hash | null }> {
    const view = await chain.view()
    return view.head === null ? { number: -1, hash: null } : { number: view.head.number, hash: view.head.hash }
  }

  /** Installs a filter for `client` (an API key's or an address's name; `null` for none), within its share. */
  async function install(kind: FilterKind, criteria: unknown, cursor: FilterCursor, client: string | null): Promise<Hex> {
    const id = newQuantityId()
    if (!(await store.install(id, { kind, criteria, cursor }, client)))
      throw new TooManyFiltersError(MAX_FILTERS_PER_CLIENT, MAX_FILTER_BYTES_PER_CLIENT, MAX_FILTERS)
    return id
  }

  /** Where a pending-transaction filter installed now starts: after every transaction known so far. */
  async function pendingPosition(): Promise<FilterCursor> {
    const newest = await pendingView.newest()
    if (newest !== null) return cursorAt(newest.number, [], newest.transactionCount)
    return cursorAt((await head()).number + 1)
  }

  /** Nothing new for a block or log filter: the cursor is at the head it knows, or past it (a replica behind). */
  function upToDate(cursor: FilterCursor, tip: { number: number; hash: Hash | null }): boolean {
    const last = cursor.hashes.at(-1)
    if (cursor.number > tip.number) return last === undefined
    return cursor.number === tip.number && (last === undefined || (tip.hash !== null && hashPrefix(last) === hashPrefix(tip.hash)))
  }

  /**
   * The chain past the cursor, in one read: the hashes from the oldest block the cursor remembers up to
   * `blocks` past it, and the first block not yet delivered. That is the one after the cursor, or, when a
   * reorg replaced blocks it delivered, the first of the new branch (where the hashes stop agreeing).
   * `notBefore`: a filter's `fromBlock` still ahead of the cursor, where its changes start instead.
   */
  async function readPast(cursor: FilterCursor, tip: { number: number }, blocks: number, notBefore = 0): Promise<ChainRead> {
    if (notBefore > cursor.number + 1) {
      if (notBefore > tip.number) return { from: notBefore, hashes: [], undone: [] }
      const hashes = await blockHashes(Math.max(0, notBefore - FILTER_REORG_DEPTH), Math.min(tip.number, notBefore + blocks - 1))
      return { from: notBefore, hashes, undone: [] }
    }
    const known = cursor.hashes.map(hashPrefix)
    const oldest = cursor.number - known.length + 1
    const hashes = await blockHashes(Math.max(0, oldest), Math.min(tip.number, cursor.number + blocks))
    if (known.length === 0) return { from: cursor.number + 1, hashes, undone: [] }
    const top = Math.min(cursor.number, tip.number)
    const byNumber = new Map(hashes.map((block) => [block.number, hashPrefix(block.hash)]))
    const knownFrom = (number: number): DeliveredBlock[] => known.slice(number - oldest).map((prefix, at) => ({ number: number + at, prefix }))
    // A cursor above the tip with its tip block still canonical is not a reorg (a replica behind, or a
    // rewind whose new branch is not indexed yet): nothing is delivered or taken back until the chain shows.
    for (let number = top; number >= oldest; number--)
      if (byNumber.get(number) === known[number - oldest]) {
        if (number === top) return { from: cursor.number + 1, hashes, undone: [] }
        return { from: number + 1, hashes, undone: knownFrom(number + 1) }
      }
    return { from: oldest, hashes, undone: knownFrom(oldest) }
  }

  /** The cursor after delivering up to block `to`, with the hashes read up to it. */
  function deliveredThrough(hashes: BlockHash[], to: number): FilterCursor {
    return cursorAt(
      to,
      hashes
        .filter((block) => block.number <= to)
        .slice(-FILTER_REORG_DEPTH)
        .map((block) => hashPrefix(block.hash)),
    )
  }

  /** The cursor of a filter installed now: at the head, with the hashes of the blocks up to it. */
  async function atHead(): Promise<FilterCursor> {
    const tip = await head()
    return deliveredThrough(await blockHashes(Math.max(0, tip.number - FILTER_REORG_DEPTH + 1), tip.number), tip.number)
  }

  /** Block hashes of a range of the index; kept in the answer cache (cleared on a reorg) for the other filters polling it. */
  function blockHashes(from: number, to: number): Promise<BlockHash[]> {
    if (from > to) return Promise.resolve([])
    return cache.remember(
      `filter-hashes:${from}-${to}`,
      () => blockHashesBetween(db, from, to),
      (hashes) => hashes.length * 120,
    )
  }

  async function blockChanges(cursor: FilterCursor): Promise<{ changes: Hash[]; next: FilterCursor }> {
    const tip = await head()
    if (upToDate(cursor, tip)) return { changes: [], next: cursor }
    const { from, hashes } = await readPast(cursor, tip, maxBlocksPerPoll)
    const delivered = hashes.filter((block) => block.number >= from)
    const last = delivered.at(-1)
    if (last === undefined) return { changes: [], next: cursor }
    return { changes: delivered.map((block) => block.hash), next: deliveredThrough(hashes, last.number) }
  }

  async function logChanges(filter: LogFilter, cursor: FilterCursor, limits: LogLimits): Promise<{ changes: Log[]; next: FilterCursor }> {
    // A filter on one block hash has no new logs to report: its logs are eth_getFilterLogs'.
    if (filter.blockHash !== undefined) return { changes: [], next: cursor }
    const tip = await head()
    if (upToDate(cursor, tip)) return { changes: [], next: cursor }
    const window = Math.min(limits.maxBlockRange, maxBlocksPerPoll)
    const startsAt = filter.fromBlock.kind === 'number' && filter.fromBlock.number <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(filter.fromBlock.number) : 0
    const { from, hashes, undone } = await readPast(cursor, tip, window, startsAt)
    const { removed, through } = undone.length === 0 ? { removed: [], through: null } : await undoneLogs(filter, undone, limits)
    // More to take back than one answer holds: the rest on the next polls, before any of the new branch.
    if (through !== null) return { changes: removed, next: takenBackThrough(cursor, through) }
    let to = Math.min(hashes.at(-1)?.number ?? -1, from + window - 1)
    if (filter.toBlock.kind === 'number' && filter.toBlock.number < BigInt(to)) to = Number(filter.toBlock.number)
    if (from > to) return { changes: removed, next: removed.length === 0 ? cursor : deliveredThrough(hashes, from - 1) }
    const read = (end: number) => getLogs({ filter: { ...filter, fromBlock: numbered(from), toBlock: numbered(end) }, limits })
    let changes: Log[]
    try {
      changes = await read(to)
    } catch (error) {
      // Too many logs for one answer: the blocks that fit now, the rest on the next polls.
      const fits = error instanceof LimitExceededError ? rangeThatFits(error) : null
      if (fits === null || fits < from || fits >= to) throw error
      to = fits
      changes = await read(to)
    }
    return { changes: removed.length === 0 ? changes : [...removed, ...changes], next: deliveredThrough(hashes, to) }
  }

  /**
   * The logs of the replaced blocks `undone` (by number and hash prefix) that match the filter, with
   * `removed: true`, in the order they were delivered: what geth's filters report of a reorg before the new
   * branch's logs. The rewind kept them (ingest/store.ts rewindStatements: the newest 64 blocks it undoes, for
   * 10 minutes), those of each height undone by every rewind since: the prefix picks the block the filter
   * delivered. At most the endpoint's `eth_getLogs` count, the oldest first.
   */
  async function undoneLogs(filter: LogFilter, undone: DeliveredBlock[], limits: LogLimits): Promise<{ removed: Log[]; through: number | null }> {
    const { undoneLogs } = schema
    const delivered = new Map(undone.map((block) => [block.number, block.prefix]))
    const rows = (
      await db.drizzle
        .select()
        .from(undoneLogs)
        .where(between(undoneLogs.blockNumber, undone[0]!.number, undone.at(-1)!.number))
        .orderBy(asc(undoneLogs.blockNumber), asc(undoneLogs.logIndex))
    ).filter((row) => delivered.get(row.blockNumber) === hashPrefix(byteaToHex(row.blockHash)))
    const numberOf = (selector: BlockSelector | undefined) => (selector?.kind === 'number' ? selector.number : null)
    const fromNumber = numberOf(filter.fromBlock)
    const toNumber = numberOf(filter.toBlock)
    const removed: (Log & { number: number })[] = []
    for (const row of rows) {
      if ((fromNumber !== null && BigInt(row.blockNumber) < fromNumber) || (toNumber !== null && BigInt(row.blockNumber) > toNumber)) continue
      const log = formatLog(row)
      if (matchesFilter(log, filter)) removed.push({ ...log, removed: true, number: row.blockNumber })
    }
    const strip = (logs: typeof removed): Log[] => logs.map(({ number: _number, ...log }) => log)
    if (removed.length <= limits.maxLogs) return { removed: strip(removed), through: null }
    // Whole blocks only (one at least, however many logs it has), so that the next poll goes on from a block.
    const over = removed[limits.maxLogs]!.number
    let cut = removed.findIndex((log) => log.number === over)
    // The rest all in the block that goes over the count: all of it now (eth_getLogs gives one block's logs whole).
    if (cut === 0) cut = removed.findIndex((log) => log.number > over)
    if (cut === -1) return { removed: strip(removed), through: null }
    return { removed: strip(removed.slice(0, cut)), through: removed[cut - 1]!.number }
  }

  /** The cursor after taking back the logs of the replaced blocks up to `through`: still at the same block. */
  function takenBackThrough(cursor: FilterCursor, through: number): FilterCursor {
    const oldest = cursor.number - cursor.hashes.length + 1
    return { ...cursor, hashes: cursor.hashes.map((hash, at) => (oldest + at <= through ? TAKEN_BACK : hash)) }
  }

  /** Transactions past the cursor: from sealed blocks it fell behind, then from the pre-confirmed ones. */
  async function pendingTransactionChanges(cursor: FilterCursor): Promise<{ changes: Hash[]; next: FilterCursor }> {
    const [tip, pendingBlocks] = await Promise.all([head(), pendingView.blocks()])
    const changes: Hash[] = []
    let next = cursor
    if (cursor.number <= tip.number) {
      const to = Math.min(tip.number, cursor.number + maxBlocksPerPoll - 1)
      const rows = await db.drizzle
        .select({ hash: schema.transactions.hash, blockNumber: schema.transactions.blockNumber, index: schema.transactions.transactionIndex })
        .from(schema.transactions)
        .where(
          and(
            between(schema.transactions.blockNumber, cursor.number, to),
            gte(sql`(${schema.transactions.blockNumber}, ${schema.transactions.transactionIndex})`, sql`(${cursor.number}, ${cursor.index})`),
          ),
        )
        .orderBy(asc(schema.transactions.blockNumber), asc(schema.transactions.transactionIndex))
        .limit(maxTransactionsPerPoll)
      for (const row of rows) changes.push(byteaToHex(row.hash))
      const last = rows.at(-1)
      // A full answer stops after its last transaction: the next poll goes on from there.
      if (last !== undefined && rows.length === maxTransactionsPerPoll) return { changes, next: cursorAt(last.blockNumber, [], last.index + 1) }
      next = cursorAt(to + 1)
      if (to < tip.number) return { changes, next }
    }
    for (const block of pendingBlocks) {
      if (block.number < next.number) continue
      const start = block.number === next.number ? next.index : 0
      for (const transaction of pendingTransactions(block, start)) changes.push(transaction)
      next = cursorAt(block.number, [], Math.max(start, block.transactionCount))
    }
    return { changes, next }
  }

  async function changesOf(filter: StoredFilter, limits: LogLimits): Promise<{ changes: unknown[]; next: FilterCursor }> {
    switch (filter.kind) {
      case 'blocks':
        return blockChanges(filter.cursor)
      case 'pendingTransactions':
        return pendingTransactionChanges(filter.cursor)
      case 'logs':
        return logChanges(criteriaOf(filter), filter.cursor, limits)
    }
  }

  async function found(id: string): Promise<StoredFilter> {
    const filter = await store.get(id)
    if (filter === null) throw new FilterNotFoundError()
    return filter
  }

  return {
    /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_newfilter */
    async newFilter(filter: LogFilter, client: string | null = null): Promise<Hex> {
      // Refused as `eth_getLogs` refuses it (geth's NewFilter too), not installed to answer nothing.
      const { fromBlock, toBlock } = filter
      if (fromBlock?.kind === 'number' && toBlock?.kind === 'number' && fromBlock.number > toBlock.number) throw new InvalidBlockRangeError()
      return install('logs', criteriaOnTheWire(filter), await atHead(), client)
    },
    async newBlockFilter(client: string | null = null): Promise<Hex> {
      return install('blocks', null, await atHead(), client)
    },
    async newPendingTransactionFilter(client: string | null = null): Promise<Hex> {
      return install('pendingTransactions', null, await pendingPosition(), client)
    },
    /** Block hashes, transaction hashes or logs since the last poll, in chain order. */
    async getFilterChanges({ id, limits }: { id: string; limits: LogLimits }): Promise<unknown[]> {
      for (let attempt = 1; ; attempt++) {
        const filter = await found(id)
        const { changes, next } = await changesOf(filter, limits)
        if (next === filter.cursor || (await store.advance(id, filter.cursor, next))) return changes
        // Another poll moved the cursor meanwhile and delivered these: read again from where it left it.
        if (attempt === MAX_CONTENDED_POLLS) return []
      }
    },
    /** Every log the filter matches, as `eth_getLogs` with its criteria answers. */
    async getFilterLogs({ id, limits }: { id: string; limits: LogLimits }): Promise<Log[]> {
      const filter = await found(id)
      if (filter.kind !== 'logs') throw new FilterNotFoundError()
      return getLogs({ filter: criteriaOf(filter), limits })
    },
    uninstallFilter: (id: string): Promise<boolean> => store.remove(id),
  }
}

const numbered = (number: number) => ({ kind: 'number' as const, number: BigInt(number) })

/** A filter's criteria as `eth_newFilter` takes them (JSON, with no bigint): what a store keeps, in Redis too. */
function criteriaOnTheWire(filter: LogFilter): Record<string, unknown> {
  const selector = (block: BlockSelector) => (block.kind === 'number' ? `0x${block.number.toString(16)}` : block.kind === 'tag' ? block.tag : block.hash)
  const criteria = { address: filter.addresses, topics: filter.topics }
  return filter.blockHash !== undefined
    ? { ...criteria, blockHash: filter.blockHash }
    : { ...criteria, fromBlock: selector(filter.fromBlock), toBlock: selector(filter.toBlock) }
}

/** The criteria were checked when installed: parsed again here, the same way, wherever the poll lands. */
function criteriaOf(filter: StoredFilter): LogFilter {
  return logFilter.parse(filter.criteria)
}

/** The last block of the range a limit error suggests (`data.to`), if it names one. */
function rangeThatFits(error: LimitExceededError): number | null {
  const to = (error.data as { to?: unknown } | undefined)?.to
  return typeof to === 'string' ? Number(to) : null
}

function pendingTransactions(block: PendingBlock, start: number): Hash[] {
  return block.transactions.filter((transaction) => transaction.index >= start).map((transaction) => transaction.hash)
}
