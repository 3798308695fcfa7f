import type { LogFilter } from '../codecs/index.js'
import { LimitExceededError } from '../errors.js'
import type { GraphqlContext } from './builder.js'
import { cursorSchema, DEFAULT_PAGE_SIZE, encodeCursor, parseArgument } from './inputs.js'

export const PAGE_SIZE_DESCRIPTION = `Page size: ${DEFAULT_PAGE_SIZE} by default (or \`--public-max-logs\` when lower), at most \`--public-max-logs\`.`

/** `first` beyond the configured result limit is refused, as `eth_getLogs` refuses more results. */
export function pageSize(first: number | null | undefined, context: GraphqlContext): number {
  const { maxLogs } = context.limits
  if (first === null || first === undefined) return Math.min(DEFAULT_PAGE_SIZE, maxLogs)
  if (first > maxLogs) throw new LimitExceededError(`first: at most ${maxLogs} items per page`)
  return first
}

/**
 * One page of logs for a filter, with the cursor of its last log: shared by `logs` and `Account.logs`. A range
 * that starts at a tag which moves (`LATEST`, `SAFE`, `FINALIZED`, `PENDING`) starts, on the next pages, at the
 * block the first page started at (the cursor keeps it): blocks sealed between two pages would otherwise move
 * the start past logs not yet given, and the pages together would be no one `eth_getLogs` answer.
 */
export async function logsPage(context: GraphqlContext, filter: LogFilter, args: { first?: number | null; after?: string | null }) {
  const after = parseArgument(cursorSchema, args.after, 'after')
  const moves = filter.blockHash === undefined && filter.fromBlock.kind === 'tag' && filter.fromBlock.tag !== 'earliest'
  const pinned: LogFilter =
    moves && after?.fromBlock !== undefined && after.fromBlock !== null ? { ...filter, fromBlock: { kind: 'number', number: BigInt(after.fromBlock) } } : filter
  const page = await context.resolvers.getLogsPage({
    filter: pinned,
    first: pageSize(args.first, context),
    after: after ? { blockNumber: after.blockNumber, logIndex: after.index } : null,
    limits: context.limits,
  })
  const last = page.logs.at(-1)
  return { ...page, endCursor: last ? encodeCursor(last.blockNumber!, last.logIndex!, page.fromNumber) : null }
}
