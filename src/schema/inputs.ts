import { z } from 'zod'
import { BLOCK_TAGS, blockArgument, type LogFilter, logFilter, toQuantity } from '../codecs/index.js'
import { PENDING_BLOCK_HASH } from '../objects/receipt.js'
import { builder } from './builder.js'
import { invalidArgument } from './argument-error.js'

/** Page size of `logs` and `transactions` connections when `first` is not given, and its ceiling. */
export const DEFAULT_PAGE_SIZE = 100
export const MAX_PAGE_SIZE = 10_000

export const BlockTag = builder.enumType('BlockTag', {
  description: '`PENDING` is the pre-confirmed (Flashblocks) view, and answers as `LATEST` when there is none.',
  values: Object.fromEntries(BLOCK_TAGS.map((tag) => [tag.toUpperCase(), { value: tag }])) as {
    [tag in (typeof BLOCK_TAGS)[number] as Uppercase<tag>]: { value: tag }
  },
})

export type BlockInputShape = { number?: bigint | null; hash?: `0x${string}` | null; tag?: (typeof BLOCK_TAGS)[number] | null }

export const BlockInput = builder.inputRef<BlockInputShape>('BlockInput').implement({
  description: 'A block by number, hash or tag: exactly one of them.',
  isOneOf: true,
  fields: (t) => ({
    number: t.field({ type: 'BigInt' }),
    hash: t.field({ type: 'Hash' }),
    tag: t.field({ type: BlockTag }),
  }),
})

/** The JSON-RPC form of a block input (hex number, tag or EIP-1898 object), for the shared codecs. */
function toRpcBlock(value: BlockInputShape): z.input<typeof blockArgument> {
  if (value.number !== undefined && value.number !== null) return toQuantity(value.number)
  if (value.hash !== undefined && value.hash !== null) return { blockHash: value.hash }
  return value.tag ?? 'latest'
}

/** Block numbers are int64 in JSON-RPC (geth's `rpc.BlockNumber`); past it, said in GraphQL's terms, not as hex. */
const MAX_BLOCK_NUMBER = 2n ** 63n - 1n

function checkBlockNumber(value: BlockInputShape | null | undefined, context: z.core.$RefinementCtx, path: PropertyKey[] = []) {
  if (typeof value?.number === 'bigint' && value.number > MAX_BLOCK_NUMBER)
    context.addIssue({ code: 'custom', path: [...path, 'number'], message: `block number larger than int64 (at most ${MAX_BLOCK_NUMBER})` })
}

/** A `BlockInput` to the resolvers' block selector, through the JSON-RPC block-argument codec. */
export const blockSelector = z
  .custom<BlockInputShape>()
  .superRefine((value, context) => checkBlockNumber(value, context))
  .transform(toRpcBlock)
  .pipe(blockArgument)

type LogFilterShape = {
  fromBlock?: BlockInputShape | null
  toBlock?: BlockInputShape | null
  blockHash?: `0x${string}` | null
  addresses?: `0x${string}`[] | null
  topics?: (`0x${string}`[] | null)[] | null
}

export const LogFilterInput = builder.inputRef<LogFilterShape>('LogFilter').implement({
  description:
    'The filter of `eth_getLogs`: a block range (default `LATEST` to `LATEST`) or one block by hash, any of the addresses, ' +
    'and per topic position any of the listed topics (`null` matches anything).',
  fields: (t) => ({
    fromBlock: t.field({ type: BlockInput }),
    toBlock: t.field({ type: BlockInput }),
    blockHash: t.field({ type: 'Hash' }),
    addresses: t.field({ type: ['Address'] }),
    topics: t.field({ type: t.listRef(t.listRef('Hash'), { required: false }) }),
  }),
})

/** A `LogFilter` input to the resolvers' filter, through the `eth_getLogs` filter codec. */
export const logFilterSchema = z
  .custom<LogFilterShape>()
  .superRefine((filter, context) => {
    for (const end of ['fromBlock', 'toBlock'] as const) {
      if (filter[end]?.hash !== undefined && filter[end]?.hash !== null)
        context.addIssue({ code: 'custom', path: [end], message: 'takes a number or a tag; filter one block by hash with blockHash' })
      checkBlockNumber(filter[end], context, [end])
    }
  })
  .transform(
    (filter): z.input<typeof logFilter> => ({
      // A hash here was refused above.
      ...(filter.fromBlock ? { fromBlock: toRpcBlock(filter.fromBlock) as string } : {}),
      ...(filter.toBlock ? { toBlock: toRpcBlock(filter.toBlock) as string } : {}),
      ...(filter.blockHash ? { blockHash: filter.blockHash } : {}),
      address: filter.addresses ?? null,
      topics: filter.topics ?? null,
    }),
  )
  .pipe(logFilter)

export type LogMatch = Pick<LogFilter, 'addresses' | 'topics'>

export const LogMatchInput = builder.inputRef<Pick<LogFilterShape, 'addresses' | 'topics'>>('LogMatch').implement({
  description: 'The address and topic part of a log filter, for subscriptions.',
  fields: (t) => ({
    addresses: t.field({ type: ['Address'] }),
    topics: t.field({ type: t.listRef(t.listRef('Hash'), { required: false }) }),
  }),
})

export const logMatchSchema = z
  .custom<Pick<LogFilterShape, 'addresses' | 'topics'> | null | undefined>()
  .transform((match): z.input<typeof logFilter> => ({ address: match?.addresses ?? null, topics: match?.topics ?? null }))
  .pipe(logFilter)
  .transform(({ addresses, topics }): LogMatch => ({ addresses, topics }))

/**
 * Opaque page cursors: the position of the last item of a page, `block:index`; the first block of the range the
 * first page read, `block:index:from`, so that a range starting at a tag (`LATEST`, `PENDING`…) goes on from where
 * it started however far the tag has moved since; and the first 8 bytes of the item's block hash, `…@hash`, so
 * that a page after a block a reorg replaced is refused (pagination.ts `expectCursorBlock`).
 */
export function encodeCursor(
  blockNumber: number | bigint | string,
  index: number | bigint | string,
  fromBlock?: number | null,
  blockHash?: string | null,
): string {
  const from = fromBlock === undefined || fromBlock === null ? '' : `:${fromBlock}`
  // Never a pre-confirmed item's (its block has no hash yet).
  const prefix = blockHash === undefined || blockHash === null || blockHash === PENDING_BLOCK_HASH ? '' : `@${blockHash.slice(2, 18).toLowerCase()}`
  return Buffer.from(`${BigInt(blockNumber)}:${BigInt(index)}${from}${prefix}`).toString('base64url')
}

/**
 * Where a cursor can point: a block number a double holds exactly, and a log or transaction index as the
 * index stores it (Postgres `integer`); past them, no page of this API ended there.
 */
const MAX_CURSOR_BLOCK = Number.MAX_SAFE_INTEGER
const MAX_CURSOR_INDEX = 2 ** 31 - 1

export const cursorSchema = z
  .string()
  .transform((value, context) => {
    const match = /^(\d{1,16}):(\d{1,10})(?::(\d{1,16}))?(?:@([0-9a-f]{16}))?$/.exec(Buffer.from(value, 'base64url').toString())
    const fromBlock = match?.[3] === undefined ? null : Number(match[3])
    if (match === null || Number(match[1]) > MAX_CURSOR_BLOCK || Number(match[2]) > MAX_CURSOR_INDEX || (fromBlock ?? 0) > Number(match[1])) {
      context.addIssue({ code: 'custom', message: 'not a cursor from this API' })
      return z.NEVER
    }
    return { blockNumber: Number(match[1]), index: Number(match[2]), fromBlock, blockHash: match[4] ?? null }
  })
  .nullish()

/** A page's last item: its block and index, the range's first block where it moves, and its block's hash prefix. */
export type Cursor = { blockNumber: number; index: number; fromBlock: number | null; blockHash: string | null }

export const PageInfo = builder.objectRef<{ endCursor: string | null; hasNextPage: boolean }>('PageInfo').implement({
  fields: (t) => ({
    endCursor: t.exposeString('endCursor', { nullable: true, description: 'Pass as `after` for the next page.' }),
    hasNextPage: t.exposeBoolean('hasNextPage'),
  }),
})

/**
 * Parses a value the schema assembled itself (not a single argument, which the zod plugin validates) with
 * the same wording as the plugin's errors.
 */
export function parseArgument<output>(schema: z.ZodType<output>, value: unknown, name: string): output {
  const parsed = schema.safeParse(value)
  if (parsed.success) return parsed.data
  throw invalidArgument(parsed.error, [name])
}
