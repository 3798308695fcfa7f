import type { LogFilter } from '../codecs/index.js'
import { CursorReorgedError, LimitExceededError } from '../errors.js'
import type { GraphqlContext } from './builder.js'
import { type Cursor, cursorSchema, DEFAULT_PAGE_SIZE, encodeCursor, parseArgument } from './inputs.js'

export const PAGE_SIZE_DESCRIPTION = `Page size: ${DEFAULT_PAGE_SIZE} by default (or \`--public-max-logs\` when lower), at most \`--public-max-logs\`.`

/** A page's `after` argument, parsed (`null` for the first page). */
export function pageCursor(after: string | null | undefined): Cursor | null {
  return parseArgument(cursorSchema, after, 'after') ?? null
}

/** `first` beyond the configured result limit is refused, as `eth_getLogs` refuses more results. */
export function pageSize(first: number | null | undefined, context: GraphqlContext): number {
  const { maxLogs } = context.limits
  if (first === null || first === undefined) return Math.min(DEFAULT_PAGE_SIZE, maxLogs)
  if (first > maxLogs) throw new LimitExceededError(`first: at most ${maxLogs} items per page`)
  return first
}

/**
 * One page of logs for a filter, with the cursor of its last log: shared by `logs` and `Account.logs`. The cursor
 * keeps the first block the range read, for a range starting at a tag that moves (resolvers/logs.ts getLogsPage).
 */
export async function logsPage(context: GraphqlContext, filter: LogFilter, args: { first?: number | null; after: Cursor | null }) {
  const { after } = args
  await expectCursorBlock(context, after)
  const page = await context.resolvers.getLogsPage({
    filter,
    first: pageSize(args.first, context),
    after: after ? { blockNumber: after.blockNumber, logIndex: after.index, fromBlock: after.fromBlock } : null,
    limits: context.limits,
  })
  const last = page.logs.at(-1)
  return { ...page, endCursor: last ? encodeCursor(last.blockNumber!, last.logIndex!, page.fromNumber, last.blockHash) : null }
}

/**
 * Refuses a cursor whose block a reorg has replaced since its page was read (its hash prefix is not the indexed
 * block's): the pages after it would mix two branches without a word. A cursor without one (a pending block's,
 * or an older cursor) is taken as it is.
 */
export async function expectCursorBlock(context: GraphqlContext, after: Cursor | null): Promise<void> {
  if (after === null || after.blockHash === null) return
  const hash = await context.resolvers.indexedBlockHash(after.blockNumber)
  if (hash !== undefined && hash?.slice(2, 18).toLowerCase() !== after.blockHash) throw new CursorReorgedError(after.blockNumber)
}
