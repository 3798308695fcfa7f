import type { Hash } from 'viem'
import { type LogFilter, toQuantity } from '../codecs/index.js'
import { PLAN_FOR_VALUES, type RenderedStatement } from '../db/index.js'
import { columnIsAnyOfText, logAddressIsAnyOfText, logTopic0IsAnyOfText, logTopicTailIsAnyOfText, type Param, TAIL_KEYED_TOPICS } from '../db/log-keys.js'
import {
  BlockRangeBeyondHeadError,
  HeaderNotFoundError,
  HistoryUnavailableError,
  InvalidBlockRangeError,
  LimitExceededError,
  UnknownBlockError,
} from '../errors.js'
import type { ResolvedBlock } from './chain.js'
import type { ReadContext } from './context.js'
import { type HexLogFields, type Log, logFromHex } from '../objects/log.js'
import { UpstreamAnswerTooLargeError } from '../upstream/index.js'

export type LogLimits = {
  /** Largest `toBlock - fromBlock + 1` one `eth_getLogs` may span. */
  maxBlockRange: number
  /** Largest number of logs one `eth_getLogs` may return. */
  maxLogs: number
  /**
   * Largest planner cost (Postgres `EXPLAIN` units) of a log query that no index answers exactly; 0 for no
   * estimate. Such queries are estimated before they run, so that one filter cannot scan the whole table.
   */
  maxQueryCost?: number
  /**
   * Largest answer, in bytes of its logs' JSON (estimated as `logJsonBytes` does); none when absent. Counted by
   * Postgres as it reads, so that a range of logs with large data is refused before it is sent, not after.
   */
  maxBytes?: number
}

/**
 * A log's JSON in an answer, beside its data: the address, four topics, two hashes, the numbers and the keys
 * take less than this (~620 bytes with four topics), so an answer is never larger than its estimate.
 */
export const LOG_JSON_FIXED_BYTES = 700
/** A log's bytes in an answer, estimated: the fixed part and its data as hex (two digits a byte, as Postgres counts it). */
export const logJsonBytes = (log: Log) => LOG_JSON_FIXED_BYTES + log.data.length - 2

export type { Log } from '../objects/log.js'

/** The topic columns of `logs`, as the statement's text names them. */
const TOPIC_COLUMNS = ['topic0', 'topic1', 'topic2', 'topic3'] as const

/** The filter's address and topic conditions, as text (`Param` numbers their values), shared by range and block-hash queries. */
function matchConditions(filter: LogFilter, param: Param): string[] {
  const conditions: string[] = []
  if (filter.addresses !== null) conditions.push(logAddressIsAnyOfText(param, 'address', filter.addresses))
  filter.topics.forEach((alternatives, position) => {
    if (alternatives === null) return
    const column = TOPIC_COLUMNS[position]!
    if (position === 0) conditions.push(logTopic0IsAnyOfText(param, column, alternatives))
    else
      conditions.push(TAIL_KEYED_TOPICS.has(position) ? logTopicTailIsAnyOfText(param, column, alternatives) : columnIsAnyOfText(param, column, alternatives))
  })
  return conditions
}

/** The blocks and, for a page, the log after which a log query reads. */
type LogScan = { filter: LogFilter; fromNumber: number; toNumber: number; after?: LogCursor | null }

/**
 * The range a client should ask for instead, in Infura's words ("Try with this block range [0xA, 0xB]"),
 * which `@ponder/utils`' getLogsRetryHelper and other indexers parse, and as `error.data`.
 */
export function tooLarge(reason: string, from: number, to: number, limit: number): LimitExceededError {
  return new LimitExceededError(`${reason}. Try with this block range [${toQuantity(from)}, ${toQuantity(to)}].`, {
    data: { from: toQuantity(from), to: toQuantity(to), limit },
  })
}

/** The block number a range end stands for, or the `eth_getLogs` error for an end the index does not hold. */
export function rangeEnd(resolved: ResolvedBlock): number {
  switch (resolved.status) {
    case 'known':
      return resolved.number
    case 'beyondHead':
      throw new BlockRangeBeyondHeadError()
    case 'beforeIndex':
      throw new HistoryUnavailableError(
        `history before block ${toQuantity(resolved.firstBlock)} is not indexed; ask from block ${toQuantity(resolved.firstBlock)}`,
        {
          data: { firstBlock: toQuantity(resolved.firstBlock) },
        },
      )
    case 'unknownHash':
      throw new UnknownBlockError()
    case 'unavailable':
      throw new HeaderNotFoundError(resolved.tag)
  }
}

/** An `eth_getLogs` call: the filter, and the limits of the endpoint it came through. */
export type GetLogsParameters = { filter: LogFilter; limits: LogLimits }

/**
 * Position of a log in the chain: a page of logs continues after it. `fromBlock`: the first block of the range
 * the first page read, where later pages of a range starting at a tag that moves start too.
 */
export type LogCursor = { blockNumber: number; logIndex: number; fromBlock?: number | null }
export type GetLogsPageParameters = { filter: LogFilter; first: number; after: LogCursor | null; limits: LogLimits }
export type LogsPage = {
  logs: Log[]
  hasNextPage: boolean
  /** The first block of the range the page read (`null` for a block hash, or a range without blocks): the next pages start there too. */
  fromNumber: number | null
}

function isAfter(log: Pick<Log, 'blockNumber' | 'logIndex'>, cursor: LogCursor): boolean {
  const blockNumber = Number(log.blockNumber)
  return blockNumber > cursor.blockNumber || (blockNumber === cursor.blockNumber && Number(log.logIndex) > cursor.logIndex)
}

/** The address and topic part of a filter as a cache key (the codecs already lower-cased everything). */
function matchKey(filter: LogFilter): string {
  return `${filter.addresses?.join(',') ?? '*'}:${filter.topics.map((alternatives) => alternatives?.join('|') ?? '*').join(',')}`
}

/** An address with topic0: `logs_address_topic0_idx` answers it, then the block range. */
function byAddressAndTopic0(filter: LogFilter): boolean {
  return filter.addresses !== null && filter.topics[0] !== null && filter.topics[0] !== undefined
}

/**
 * Filters an index answers exactly: one block (the primary key), or an address with topic0
 * (`logs_address_topic0_idx`). Everything else is priced before it runs.
 */
function isIndexExact(filter: LogFilter, fromNumber: number, toNumber: number): boolean {
  return fromNumber === toNumber || byAddressAndTopic0(filter)
}

/** A filter naming a topic1 or topic2, which their own indexes (`logs_topic1_idx`, `logs_topic2_idx`) may answer. */
function namesKeyedTail(filter: LogFilter): boolean {
  return filter.topics.some((alternatives, position) => alternatives !== null && alternatives !== undefined && TAIL_KEYED_TOPICS.has(position))
}

/**
 * Filters whose plan is the same for all values: none (the block range), or an address with topic0 and
 * nothing keyed after it (their index, then the range). Any other filter is planned for its values
 * (`PLAN_FOR_VALUES`): by address alone, a hot token over a few blocks is best read by block range, a rare
 * address by its index; a token's Transfers to one wallet by the wallet's key, to a router that receives half
 * of them by the token's.
 */
function hasOnePlan(filter: LogFilter): boolean {
  const matchesAll = filter.addresses === null && filter.topics.every((alternatives) => alternatives === null)
  return matchesAll || (byAddressAndTopic0(filter) && !namesKeyedTail(filter))
}

/** The index of the first log that takes an answer past the endpoint's byte bound, or `null` when all fit. */
function firstPastBytes(logs: readonly Log[], limits: LogLimits): number | null {
  if (limits.maxBytes === undefined) return null
  let bytes = 0
  for (let index = 0; index < logs.length; index++) {
    bytes += logJsonBytes(logs[index]!)
    if (bytes > limits.maxBytes) return index
  }
  return null
}

/**
 * A `logs` row's columns as `queryLogs` reads them (`HexLogFields`, under its names), from a relation holding
 * `logs`' columns: every field is written in its JSON-RPC form by Postgres, so the driver reads text. No bytea
 * is parsed into a buffer and written back as hex in Node, which was a quarter of the time a selective
 * `eth_getLogs` spent there (75 logs: 3.4 ms p50 in all, of which 0.4 ms in Postgres).
 */
const HEX_LOG_COLUMNS = [
  ...(
    [
      ['address', 'address'],
      ['topic0', 'topic0'],
      ['topic1', 'topic1'],
      ['topic2', 'topic2'],
      ['topic3', 'topic3'],
      ['data', 'data'],
      ['block_hash', 'blockHash'],
      ['transaction_hash', 'transactionHash'],
    ] satisfies [string, keyof HexLogFields][]
  ).map(([column, field]) => `'0x' || encode(${column}, 'hex') as "${field}"`),
  ...(
    [
      ['block_number', 'blockNumber'],
      ['block_timestamp', 'blockTimestamp'],
      ['transaction_index', 'transactionIndex'],
      ['log_index', 'logIndex'],
    ] satisfies [string, keyof HexLogFields][]
  ).map(([column, field]) => `'0x' || to_hex(${column}) as "${field}"`),
].join(', ')

/** What an answer of logs takes in the answer cache: its JSON, which large data makes far more than the fixed part. */
function bytesOfLogs(logs: Log[]): number {
  let bytes = 0
  for (const log of logs) bytes += logJsonBytes(log)
  return bytes
}

/** The block numbers a log filter spans, checked against the index and the endpoint's limits. */
export type LogRange = { fromNumber: number; toNumber: number }

/**
 * `eth_getLogs` and its paged form. Limits come with each call (an endpoint policy's, or the event stream's),
 * so that one set of resolvers, with one cache and one chain state, serves every endpoint.
 */
export function createLogResolvers({ db, chain, cache, pendingView, history }: ReadContext) {
  /**
   * The logs `scan` asks for (its filter over its blocks, after its cursor), at most `cap`, in chain order. A filter that no index answers exactly is
   * first priced by the planner, and refused with a smaller range when it would cost more than allowed.
   */
  async function queryLogs(scan: LogScan, cap: number, limits: LogLimits): Promise<Log[]> {
    // Written as text, not with drizzle's SQL objects: building the statement from those took longer than
    // Postgres took to answer a one-block filter (a filter by block hash, as ethers and viem poll each block).
    const params: unknown[] = []
    const param: Param = (value) => `$${params.push(value)}`
    const { filter, fromNumber, toNumber, after } = scan
    const conditions = [
      fromNumber === toNumber ? `block_number = ${param(fromNumber)}` : `block_number between ${param(fromNumber)} and ${param(toNumber)}`,
      ...(after === undefined || after === null ? [] : [`(block_number, log_index) > (${param(after.blockNumber)}, ${param(after.logIndex)})`]),
      ...matchConditions(filter, param),
    ]
    // One block (a filter by block hash) has one plan too, whatever the filter names: its primary key bounds
    // what any plan reads to one block's logs. Planned per call, such a statement took 0.6 ms of Postgres'
    // time to parse and plan for 0.07 ms of execution (1M-log chain, an address and a topic1 by block hash, no
    // cache: 650 -> 1,472 req/s).
    if (!hasOnePlan(filter) && fromNumber !== toNumber) conditions.push(PLAN_FOR_VALUES)
    const query = `select * from "logs" where ${conditions.join(' and ')} order by block_number, log_index limit ${param(cap)}`
    const maxCost = limits.maxQueryCost ?? 0
    if (maxCost > 0 && !isIndexExact(filter, fromNumber, toNumber)) {
      const cost = await plannedCost({ sql: query, params })
      if (cost > maxCost) {
        const blocks = Math.max(1, Math.floor(((toNumber - fromNumber + 1) * maxCost) / cost))
        throw tooLarge(
          `query would scan too many logs (estimated cost ${Math.round(cost)}, at most ${maxCost}); filter by address and topic0, or ask for fewer blocks`,
          fromNumber,
          fromNumber + blocks - 1,
          blocks,
        )
      }
    }
    // Up to the first log that takes the answer past `maxBytes`, that one included (so that the caller knows the
    // bound was passed, and where): Postgres sums the logs' estimated sizes (`logJsonBytes`) as it reads them
    // and sends nothing after, however large their data.
    const sized =
      limits.maxBytes === undefined
        ? `(${query}) sized`
        : `(select *, sum(2 * octet_length(data) + ${LOG_JSON_FIXED_BYTES})
                over (order by block_number, log_index rows between unbounded preceding and 1 preceding) as bytes_before
             from (${query}) limited) sized
           where coalesce(bytes_before, 0) <= ${param(limits.maxBytes)}`
    // Read without drizzle's row mapping (over the nested selects it cost ~5 µs a row: 10 ms for 2,100 logs,
    // against 0.6 ms for the window in Postgres). The order is by `sized`'s columns, named in full so that they
    // are never taken for the hex text selected, which would sort as text.
    const rows = await db.query<HexLogFields>({ sql: `select ${HEX_LOG_COLUMNS} from ${sized} order by sized.block_number, sized.log_index`, params })
    return rows.map(logFromHex)
  }

  /** The planner's total cost of a statement, without running it. */
  async function plannedCost(statement: RenderedStatement): Promise<number> {
    const [row] = await db.query<Record<string, unknown>>({ sql: `explain (format json) ${statement.sql}`, params: statement.params })
    const plan = Object.values(row ?? {})[0]
    const parsed = (typeof plan === 'string' ? JSON.parse(plan) : plan) as [{ Plan: { 'Total Cost': number } }]
    return parsed[0].Plan['Total Cost']
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_getlogs */
  async function getLogs({ filter, limits }: GetLogsParameters): Promise<Log[]> {
    // `toBlock: pending`: the confirmed logs up to latest (none when `fromBlock` is pending too), then the
    // pre-confirmed ones; `fromBlock: pending` as `split` says. Without pending state, `pending` is `latest` below.
    if (filter.blockHash !== undefined) return confirmedLogs(filter, limits)
    const { confirmed, pending } = await pendingView.split(filter)
    if (pending.length === 0) return confirmed === null ? [] : confirmedLogs({ ...filter, ...confirmed }, limits)
    const logs = [
      ...(confirmed === null ? [] : await confirmedLogs({ ...filter, ...confirmed }, limits)),
      ...((await pendingView.logs(filter, pending)) as Log[]),
    ]
    // The result cap holds for the confirmed part only (checked there), as on Base's node, which asks reth's
    // capped filter for the blocks up to latest and adds the pre-confirmed logs: a few blocks' at most. The byte
    // bound holds for the whole answer, and names the range before the block that took it past.
    const overflow = firstPastBytes(logs, limits)
    if (overflow !== null) {
      const start = confirmed === null ? null : await resolveFullRange({ ...filter, ...confirmed }, limits)
      throw answerBytesError(Number(logs[overflow]!.blockNumber), start?.fromNumber ?? pending[0]!.number, limits)
    }
    return logs
  }

  /** The block numbers a filter spans, with the same checks and limits as `eth_getLogs`. */
  async function resolveLogRange(filter: LogFilter, limits: LogLimits): Promise<LogRange> {
    const range = await resolveFullRange(filter, limits)
    if (range === null) throw new UnknownBlockError()
    if (range.firstBlock !== null && range.fromNumber < range.firstBlock) throw historyError(range.firstBlock, range.toNumber, limits)
    return range
  }

  /**
   * As `resolveLogRange`, but a range may start below the index; `firstBlock` says where the index starts.
   * `null`: a block hash the index does not know.
   */
  async function resolveFullRange(filter: LogFilter, limits: LogLimits): Promise<{ fromNumber: number; toNumber: number; firstBlock: number | null } | null> {
    if (filter.blockHash !== undefined) {
      const block = await chain.blockByHash(filter.blockHash)
      return block === null ? null : { fromNumber: block.number, toNumber: block.number, firstBlock: null }
    }

    const [from, to] = await Promise.all([chain.resolve(filter.fromBlock), chain.resolve(filter.toBlock)])
    // A start past the head says more than "inverted range" when `toBlock` is `latest`.
    if (from.status === 'beyondHead') throw new BlockRangeBeyondHeadError()
    if ('number' in from && 'number' in to && from.number > to.number) throw new InvalidBlockRangeError()
    const firstBlock = from.status === 'beforeIndex' ? from.firstBlock : null
    const fromNumber = from.status === 'beforeIndex' ? from.number : rangeEnd(from)
    const toNumber = to.status === 'beforeIndex' ? to.number : rangeEnd(to)
    if (toNumber - fromNumber + 1 > limits.maxBlockRange) {
      const fits = fromNumber + limits.maxBlockRange - 1
      throw tooLarge(`block range too large: at most ${limits.maxBlockRange} blocks per query`, fromNumber, fits, limits.maxBlockRange)
    }
    return { fromNumber, toNumber, firstBlock }
  }

  /** Logs below the index refused (`--history refuse`, or a paged query): the range the index can answer. */
  function historyError(firstBlock: number, toNumber: number, limits: LogLimits): HistoryUnavailableError {
    const to = Math.max(firstBlock, Math.min(toNumber, firstBlock + limits.maxBlockRange - 1))
    return new HistoryUnavailableError(
      `history before block ${toQuantity(firstBlock)} is not indexed. Try with this block range [${toQuantity(firstBlock)}, ${toQuantity(to)}].`,
      { data: { from: toQuantity(firstBlock), to: toQuantity(to), limit: limits.maxBlockRange } },
    )
  }

  async function confirmedLogs(filter: LogFilter, limits: LogLimits): Promise<Log[]> {
    const range = await resolveFullRange(filter, limits)
    if (range === null) return logsOfHashBelowIndex(filter, filter.blockHash!, limits)
    const { fromNumber, toNumber, firstBlock } = range
    if (firstBlock !== null && fromNumber < firstBlock) return withHistory(filter, fromNumber, toNumber, firstBlock, limits)
    const logs = await cache.remember(
      `logs:${fromNumber}-${toNumber}:${matchKey(filter)}`,
      () => logsInRange(filter, fromNumber, toNumber, limits),
      bytesOfLogs,
    )
    // The cache is shared by every endpoint policy: an answer cached under larger limits is refused here.
    checkAnswer(logs, fromNumber, limits, toNumber)
    return logs
  }

  /** The result cap's and the byte bound's errors for a whole answer, in chain order. */
  function checkAnswer(logs: Log[], fromNumber: number, limits: LogLimits, toNumber: number): void {
    if (logs.length > resultCap(fromNumber, toNumber, limits)) throw resultCapError(Number(logs[limits.maxLogs]!.blockNumber), fromNumber, limits)
    const overflow = firstPastBytes(logs, limits)
    if (overflow !== null) throw answerBytesError(Number(logs[overflow]!.blockNumber), fromNumber, limits)
  }

  /**
   * A block hash the index does not know: the upstream's logs of that block if it lies below the index
   * (`--history upstream`), asked by the same hash (so never another branch's block at its height); else, as a
   * node answers a hash it does not know, `unknown block`.
   */
  async function logsOfHashBelowIndex(filter: LogFilter, blockHash: Hash, limits: LogLimits): Promise<Log[]> {
    const block = await history.blockByHash(blockHash, false)
    if (block === null) throw new UnknownBlockError()
    const number = Number(block.number)
    const logs = (await history
      .logsOfBlock({ address: filter.addresses ?? undefined, topics: filter.topics }, blockHash, limits.maxBytes)
      .catch((error: unknown) => {
        if (!(error instanceof UpstreamAnswerTooLargeError)) throw error
        throw new LimitExceededError(`query returned more than ${limits.maxBytes} bytes of logs in block ${toQuantity(number)}; add address or topic filters`)
      })) as Log[]
    checkAnswer(logs, number, limits, number)
    return logs
  }

  /** A range that starts below the index: the older part from the upstream (`--history upstream`), then the index's. */
  async function withHistory(filter: LogFilter, fromNumber: number, toNumber: number, firstBlock: number, limits: LogLimits): Promise<Log[]> {
    if (history.mode === 'refuse') throw historyError(firstBlock, toNumber, limits)
    const match = { address: filter.addresses ?? undefined, topics: filter.topics }
    const olderTo = Math.min(toNumber, firstBlock - 1)
    // A log's JSON is never longer than the bound's estimate of it (logJsonBytes): an upstream answer longer than
    // the bound would be refused below anyway, so it is read no further than the bound.
    const older = history.logs(match, fromNumber, olderTo, limits.maxBytes).catch((error: unknown) => {
      if (!(error instanceof UpstreamAnswerTooLargeError)) throw error
      throw new LimitExceededError(
        `query returned more than ${limits.maxBytes} bytes of logs in blocks [${toQuantity(fromNumber)}, ${toQuantity(olderTo)}]; ask for fewer blocks or add address or topic filters`,
      )
    }) as Promise<Log[]>
    const [olderLogs, indexed] = await Promise.all([older, toNumber >= firstBlock ? logsInRange(filter, firstBlock, toNumber, limits) : Promise.resolve([])])
    const logs = [...olderLogs, ...indexed]
    checkAnswer(logs, fromNumber, limits, toNumber)
    return logs
  }

  /**
   * Results allowed: `maxLogs`, except in one block (a range of one, or a block hash), whose logs are all
   * given, as reth gives them, within the byte bound: no smaller range exists for a client to ask for, and
   * clients that follow the chain (ethers, viem, Ponder) read each block's logs by its hash.
   */
  function resultCap(fromNumber: number, toNumber: number, limits: LogLimits): number {
    return fromNumber === toNumber ? Number.POSITIVE_INFINITY : limits.maxLogs
  }

  /**
   * The result cap's error, naming the range before the block where the result overflowed, or that block
   * alone when it is the first (one block is answered whole).
   */
  function resultCapError(overflowBlock: number, fromNumber: number, limits: LogLimits): LimitExceededError {
    // Every log of the blocks before the first one that overflows fits under the cap.
    return tooLarge(`query returned more than ${limits.maxLogs} results`, fromNumber, Math.max(fromNumber, overflowBlock - 1), limits.maxLogs)
  }

  /** The byte bound's error, naming the range before the block whose logs took the answer past it, if any. */
  function answerBytesError(overflowBlock: number, fromNumber: number, limits: LogLimits): LimitExceededError {
    const reason = `query returned more than ${limits.maxBytes} bytes of logs`
    if (overflowBlock > fromNumber) return tooLarge(reason, fromNumber, overflowBlock - 1, limits.maxBytes!)
    return new LimitExceededError(`${reason} in block ${toQuantity(fromNumber)}; add address or topic filters`)
  }

  /**
   * `eth_getLogs` in pages: the same filter, range checks and pending rules, but instead of refusing more
   * than `maxLogs` results it returns `first` of them after `after`, so that a client can walk any number
   * of logs (GraphQL `logs`). Keyset pagination on the primary key `(block_number, log_index)`.
   */
  /**
   * A range that starts at a tag which moves (`LATEST`, `SAFE`, `FINALIZED`, `PENDING`) starts, on the pages after
   * the first, at the block the first page started at (the cursor keeps it): blocks sealed between two pages
   * would otherwise move the start past logs not yet given, and the pages together would be no one `eth_getLogs`.
   */
  async function getLogsPage({ filter: asked, first, after, limits }: GetLogsPageParameters): Promise<LogsPage> {
    const pinnedAt = after?.fromBlock ?? null
    const filter: LogFilter =
      asked.blockHash !== undefined || pinnedAt === null || asked.fromBlock.kind !== 'tag' || asked.fromBlock.tag === 'earliest'
        ? asked
        : { ...asked, fromBlock: { kind: 'number', number: BigInt(pinnedAt) } }
    const { confirmed: range, pending } = filter.blockHash === undefined ? await pendingView.split(filter) : { confirmed: null, pending: [] }
    let confirmed: Log[] = []
    let start = pending[0]?.number ?? null
    if (range !== null || filter.blockHash !== undefined) {
      const { fromNumber, toNumber } = await resolveLogRange(range === null ? filter : { ...filter, ...range, blockHash: undefined }, limits)
      start = filter.blockHash === undefined ? fromNumber : null
      confirmed = await queryLogs({ filter, fromNumber, toNumber, after }, first + 1, limits)
      // A page past the byte bound ends before the log that passes it (a page holds at least one log, so that
      // a client always moves on); the rest comes on the next page.
      const overflow = firstPastBytes(confirmed, limits)
      if (overflow !== null) return { logs: confirmed.slice(0, Math.max(1, overflow)), hasNextPage: true, fromNumber: start }
    }
    const logs =
      pending.length > 0 && confirmed.length <= first
        ? [...confirmed, ...((await pendingView.logs(filter, pending)) as Log[]).filter((log) => after === null || isAfter(log, after))]
        : confirmed
    return { logs: logs.slice(0, first), hasNextPage: logs.length > first, fromNumber: start }
  }

  async function logsInRange(filter: LogFilter, fromNumber: number, toNumber: number, limits: LogLimits): Promise<Log[]> {
    const cap = resultCap(fromNumber, toNumber, limits)
    const logs = await queryLogs({ filter, fromNumber, toNumber }, Math.min(cap + 1, Number.MAX_SAFE_INTEGER), limits)
    if (logs.length > cap) throw resultCapError(Number(logs[limits.maxLogs]!.blockNumber), fromNumber, limits)
    // Checked before the answer is cached: rows cut at the byte bound are not the whole answer.
    const overflow = firstPastBytes(logs, limits)
    if (overflow !== null) throw answerBytesError(Number(logs[overflow]!.blockNumber), fromNumber, limits)
    return logs
  }

  return { getLogs, getLogsPage, resolveLogRange }
}
