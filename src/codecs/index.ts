/**
 * Wire codecs, defined once as zod schemas and used by JSON-RPC, GraphQL and REST alike (STYLE.md §3).
 * Hex on the wire, bigint inside: https://ethereum.org/en/developers/docs/apis/json-rpc/#hex-encoding
 */
import { type Address, type Hash, type Hex, isAddress } from 'viem'
import { z } from 'zod'
import { isAttributionCode } from '../attribution/index.js'

import { asQuantityId } from './quantity-id.js'

export { newQuantityId } from './quantity-id.js'

const MAX_UINT256 = 2n ** 256n - 1n
/** Filter ids are 16 bytes in hex (34 characters); anything much longer was never one. */
const MAX_FILTER_ID_LENGTH = 66

export const BLOCK_TAGS = ['latest', 'pending', 'safe', 'finalized', 'earliest'] as const
export type BlockTag = (typeof BLOCK_TAGS)[number]

/** `0x`-prefixed hex quantity. Leading zeros are accepted, as reth and anvil do; empty `0x` is not. */
export const quantity = z
  .string({ error: 'expected a hex quantity string' })
  .regex(/^0x[0-9a-fA-F]{1,64}$/, { error: 'expected a 0x-prefixed hex quantity' })
  .transform((value) => BigInt(value))
  .refine((value) => value <= MAX_UINT256, { error: 'quantity exceeds 256 bits' })

export const hexData = z
  .string({ error: 'expected hex data' })
  .regex(/^0x([0-9a-fA-F]{2})*$/, { error: 'expected 0x-prefixed hex data of whole bytes' })
  .transform((value) => value.toLowerCase() as Hex)

/**
 * The message of a missing argument; `describeParamsError` names its position as geth does
 * (`missing value for required argument 1`).
 */
export const MISSING_ARGUMENT = 'missing value for required argument'

const describeType = (input: unknown) => (input === null ? 'null' : Array.isArray(input) ? 'an array' : `a ${typeof input}`)

/** What is wrong with a fixed-size hex string, in geth's words (`hexutil.UnmarshalFixedJSON`), or `null`. */
function fixedHexProblem(value: string, bytes: number, typeName: string, what: string): string | null {
  const expected = `a 0x-prefixed ${bytes}-byte hex ${what}`
  if (!/^0[xX]/.test(value)) return `hex string without 0x prefix, want ${expected}`
  const digits = value.length - 2
  if (digits !== bytes * 2) return `hex string has length ${digits}, want ${bytes * 2} for ${typeName} (${expected})`
  if (!/^[0-9a-fA-F]*$/.test(value.slice(2))) return `invalid hex string, want ${expected}`
  return null
}

/** A fixed-size hex value (`0x` or `0X`, as geth accepts), normalised to `0x` and lower case. */
function fixedHex<type extends Hex>(bytes: number, typeName: string, what: string) {
  return z
    .string({
      error: (issue) => (issue.input === undefined ? MISSING_ARGUMENT : `expected a 0x-prefixed ${bytes}-byte hex ${what}, got ${describeType(issue.input)}`),
    })
    .superRefine((value, context) => {
      const problem = fixedHexProblem(value, bytes, typeName, what)
      if (problem !== null) context.addIssue({ code: 'custom', message: problem })
    })
    .transform((value) => `0x${value.slice(2).toLowerCase()}` as type)
}

/** 20-byte address, any case; normalised to lower case (checksums are not enforced on reads, like geth). */
export const address = fixedHex<Address>(20, 'common.Address', 'address')

/**
 * Whether a 20-byte hex address is all lower-case, all upper-case (neither carries a checksum) or EIP-55
 * checksummed: mixed case with a wrong checksum is likely mistyped. https://eips.ethereum.org/EIPS/eip-55
 */
export function hasValidChecksum(value: string): boolean {
  const body = value.slice(2)
  return body === body.toUpperCase() || isAddress(`0x${body}`, { strict: true })
}

const BAD_CHECKSUM = 'mixed case but an invalid EIP-55 checksum'

/**
 * `address`, refusing a mixed-case address whose EIP-55 checksum is wrong: GraphQL's `Address` input, which
 * has no node's behaviour to match (JSON-RPC's `address` follows geth and ignores checksums).
 */
export const checkedAddress = z
  .unknown()
  .superRefine((value, context) => {
    if (typeof value === 'string' && fixedHexProblem(value, 20, 'common.Address', 'address') === null && !hasValidChecksum(value))
      context.addIssue({ code: 'custom', message: `address has ${BAD_CHECKSUM}` })
  })
  .pipe(address)

/** 32-byte hash or topic, normalised to lower case. */
export const hash = fixedHex<Hash>(32, 'common.Hash', 'hash')

/** Whether `value` is a 32-byte hash as `hash` takes it (any case), without parsing it: for raw params on a hot path. */
export function isHashText(value: unknown): value is string {
  return typeof value === 'string' && fixedHexProblem(value, 32, 'common.Hash', 'hash') === null
}

/**
 * A filter's id as `eth_newFilter` and its siblings answered it: any string (an unknown one is `filter not found`).
 * A hex id is read as the quantity it is (any case, leading zeros or not), so it finds the id `newQuantityId` (quantity-id.ts) gave.
 */
export const filterId = z
  .string({ error: 'expected a filter id string' })
  .max(MAX_FILTER_ID_LENGTH, { error: `expected a filter id of at most ${MAX_FILTER_ID_LENGTH} characters` })
  .transform((id) => (/^0x[0-9a-f]+$/i.test(id) ? asQuantityId(id.slice(2)) : id))

export const blockTag = z.enum(BLOCK_TAGS, { error: `expected one of ${BLOCK_TAGS.join(', ')}` })

export type BlockSelector = { kind: 'tag'; tag: BlockTag } | { kind: 'number'; number: bigint } | { kind: 'hash'; hash: Hash; requireCanonical: boolean }

/** geth keeps block numbers in an `int64` (rpc/types.go); anything above is refused with -32602. */
const MAX_BLOCK_NUMBER = 2n ** 63n - 1n
const BLOCK_HASH_LENGTH = 66
const EXPECTED_NUMBER_OR_TAG = `expected a 0x-prefixed hex block number of at most 64 bits or one of ${BLOCK_TAGS.join(', ')}`

type Parsed<value> = { value: value } | { problem: string }

/**
 * A block number or tag as geth's `BlockNumber` reads it: a tag, or hex with `0x` or `0X` (leading zeros
 * accepted, as reth and anvil do). `tooHigh` is geth's message for a number above int64, which differs
 * between `BlockNumber` and `BlockNumberOrHash`.
 */
function parseNumberOrTag(input: unknown, tooHigh: string): Parsed<BlockSelector> {
  if (input === undefined) return { problem: MISSING_ARGUMENT }
  if (typeof input !== 'string') return { problem: `${EXPECTED_NUMBER_OR_TAG}, got ${describeType(input)}` }
  if ((BLOCK_TAGS as readonly string[]).includes(input)) return { value: { kind: 'tag', tag: input as BlockTag } }
  if (!/^0[xX][0-9a-fA-F]{1,16}$/.test(input)) return { problem: EXPECTED_NUMBER_OR_TAG }
  const number = BigInt(`0x${input.slice(2)}`)
  if (number > MAX_BLOCK_NUMBER) return { problem: tooHigh }
  return { value: { kind: 'number', number } }
}

/**
 * geth's `BlockNumberOrHash`: a number, a tag, a bare 32-byte block hash (a 66-character string), or an
 * EIP-1898 object `{blockHash, requireCanonical?}` / `{blockNumber}`. https://eips.ethereum.org/EIPS/eip-1898
 */
function parseBlockArgument(input: unknown): Parsed<BlockSelector> {
  if (typeof input === 'string' && input.length === BLOCK_HASH_LENGTH) {
    const problem = fixedHexProblem(input, 32, 'common.Hash', 'block hash')
    return problem === null ? { value: { kind: 'hash', hash: `0x${input.slice(2).toLowerCase()}` as Hash, requireCanonical: false } } : { problem }
  }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return parseNumberOrTag(input, 'blocknumber too high')
  const object = input as Record<string, unknown>
  const unknownKey = Object.keys(object).find((key) => key !== 'blockHash' && key !== 'blockNumber' && key !== 'requireCanonical')
  if (unknownKey !== undefined)
    return { problem: `unknown field ${JSON.stringify(unknownKey)} in block argument, expected blockHash, blockNumber or requireCanonical` }
  if (object.blockHash !== undefined && object.blockNumber !== undefined)
    return { problem: 'cannot specify both BlockHash and BlockNumber, choose one or the other' }
  if (object.requireCanonical !== undefined && typeof object.requireCanonical !== 'boolean')
    return { problem: `requireCanonical must be a boolean, got ${describeType(object.requireCanonical)}` }
  if (object.blockHash !== undefined) {
    const parsed = hash.safeParse(object.blockHash)
    if (!parsed.success) return { problem: `blockHash: ${parsed.error.issues[0]?.message}` }
    return { value: { kind: 'hash', hash: parsed.data, requireCanonical: object.requireCanonical === true } }
  }
  if (object.blockNumber !== undefined) {
    const parsed = parseNumberOrTag(object.blockNumber, 'block number larger than int64')
    return 'problem' in parsed ? { problem: `blockNumber: ${parsed.problem}` } : parsed
  }
  return { problem: 'invalid arguments; neither block nor hash specified' }
}

/** A zod schema over one of the parsers above. */
function parsedBy(parse: (input: unknown) => Parsed<BlockSelector>) {
  return z.unknown().transform((input, context): BlockSelector => {
    const parsed = parse(input)
    if ('value' in parsed) return parsed.value
    context.addIssue({ code: 'custom', message: parsed.problem })
    return z.NEVER
  })
}

/** A block number or tag, as `eth_getBlockByNumber` and `eth_getLogs`' `fromBlock`/`toBlock` take it. */
export const blockNumberOrTagSelector = parsedBy((input) => parseNumberOrTag(input, 'block number larger than int64'))

/** Block argument of state and receipt methods: number, tag, block hash or an EIP-1898 object. */
export const blockArgument = parsedBy(parseBlockArgument)

/** An omitted or `null` block argument means `latest` (geth, reth and anvil do the same for state reads). */
export const optionalBlockArgument = z
  .unknown()
  .optional()
  .transform((input): unknown => (input === undefined || input === null ? 'latest' : input))
  .pipe(blockArgument)

/** A required boolean argument, e.g. `eth_getBlockByNumber`'s full-transactions flag (geth refuses it missing). */
export const requiredBoolean = z.boolean({
  error: (issue) => (issue.input === undefined ? MISSING_ARGUMENT : `expected a boolean, got ${describeType(issue.input)}`),
})

const MAX_TOPIC_POSITIONS = 4
/**
 * Most addresses, and most alternatives at one topic position, one log filter may list. Larger lists are
 * refused with -32602 naming the limit (a 65,533-entry list once reached the database's bind-parameter
 * limit); below it the list is sent to the database as one array parameter.
 */
export const MAX_FILTER_ADDRESSES = 1_000
export const MAX_TOPIC_ALTERNATIVES = 1_000

const topicPosition = z
  .union([
    z.null(),
    hash,
    z.array(hash.nullable()).max(MAX_TOPIC_ALTERNATIVES, { error: `too many topic alternatives: at most ${MAX_TOPIC_ALTERNATIVES} per position` }),
  ])
  .transform((value) => {
    // `null`, `[]` and any array holding `null` all match every topic at this position.
    if (value === null) return null
    if (Array.isArray(value)) return value.length === 0 || value.includes(null) ? null : (value as Hash[])
    return [value]
  })

const LOG_FILTER_FIELDS = ['fromBlock', 'toBlock', 'address', 'topics', 'blockHash'] as const

/**
 * `eth_getLogs` filter (also `eth_newFilter`'s and the `logs` subscription's). A field it does not know is
 * refused as reth (Base's node) refuses it, not ignored: a misspelt `blockhash` would otherwise be a query of
 * the latest block. https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_getlogs
 */
export const logFilter = z
  .strictObject(
    {
      fromBlock: blockNumberOrTagSelector.nullish(),
      toBlock: blockNumberOrTagSelector.nullish(),
      address: z
        .union([address, z.array(address).max(MAX_FILTER_ADDRESSES, { error: `too many addresses: at most ${MAX_FILTER_ADDRESSES} per filter` })])
        .nullish(),
      topics: z.array(topicPosition).max(MAX_TOPIC_POSITIONS, { error: 'exceed max topics' }).nullish(),
      blockHash: hash.nullish(),
    },
    {
      error: (issue) =>
        issue.code === 'unrecognized_keys'
          ? `unknown field \`${issue.keys[0]}\`, expected one of ${LOG_FILTER_FIELDS.map((field) => `\`${field}\``).join(', ')}`
          : 'expected a filter object',
    },
  )
  .refine((filter) => filter.blockHash == null || (filter.fromBlock == null && filter.toBlock == null), {
    error: 'cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other',
  })
  .transform((filter): LogFilter => {
    // An absent, null or empty address list matches every address, as in geth.
    const addresses =
      filter.address === undefined || filter.address === null
        ? null
        : Array.isArray(filter.address)
          ? filter.address.length === 0
            ? null
            : filter.address
          : [filter.address]
    const topics = (filter.topics ?? []).slice()
    while (topics.length > 0 && topics[topics.length - 1] === null) topics.pop()
    const base = { addresses, topics }
    if (filter.blockHash != null) return { ...base, blockHash: filter.blockHash }
    return {
      ...base,
      fromBlock: filter.fromBlock ?? { kind: 'tag', tag: 'latest' },
      // From `pending`, an open end is `pending` too (reth's and Base's node's rule), elsewhere `latest`.
      toBlock: filter.toBlock ?? { kind: 'tag', tag: filter.fromBlock?.kind === 'tag' && filter.fromBlock.tag === 'pending' ? 'pending' : 'latest' },
    }
  })

export type LogFilter = {
  /** `null` matches every address. */
  addresses: Address[] | null
  /** Per position: `null` matches anything, otherwise any of the listed topics. */
  topics: (Hash[] | null)[]
} & ({ blockHash: Hash; fromBlock?: undefined; toBlock?: undefined } | { blockHash?: undefined; fromBlock: BlockSelector; toBlock: BlockSelector })

/**
 * A call as `eth_call`, `eth_estimateGas` and `eth_createAccessList` take it (geth's `TransactionArgs`), when
 * flashgate runs it itself. `nonce`, `chainId` and `type` are accepted and not used (calls skip the nonce
 * check, as geth's do); any other field (blobs, EIP-7702 authorizations), or fields geth refuses together,
 * fail the parse, and the call goes to the node as it was sent.
 */
export const callRequest = z
  .strictObject({
    from: address.nullish(),
    to: address.nullish(),
    gas: quantity.nullish(),
    gasPrice: quantity.nullish(),
    maxFeePerGas: quantity.nullish(),
    maxPriorityFeePerGas: quantity.nullish(),
    value: quantity.nullish(),
    data: hexData.nullish(),
    input: hexData.nullish(),
    accessList: z.array(z.strictObject({ address, storageKeys: z.array(hash) })).nullish(),
    nonce: quantity.nullish(),
    chainId: quantity.nullish(),
    type: quantity.nullish(),
  })
  .refine((call) => call.gasPrice == null || (call.maxFeePerGas == null && call.maxPriorityFeePerGas == null))
  .refine((call) => call.data == null || call.input == null || call.data === call.input)
  .transform((call) => ({
    from: call.from ?? undefined,
    to: call.to ?? undefined,
    gas: call.gas ?? undefined,
    gasPrice: call.gasPrice ?? undefined,
    maxFeePerGas: call.maxFeePerGas ?? undefined,
    maxPriorityFeePerGas: call.maxPriorityFeePerGas ?? undefined,
    value: call.value ?? 0n,
    data: call.input ?? call.data ?? '0x',
    accessList: call.accessList ?? undefined,
  }))

export type CallRequest = z.output<typeof callRequest>

/**
 * The params of `eth_call`, `eth_estimateGas` and `eth_createAccessList`, kept as sent (they are forwarded as
 * they are), and `local` for the one case flashgate may answer itself: a call it can run, a block argument,
 * and no state or block overrides.
 */
export const callParams = z.array(z.unknown()).transform((params) => {
  const [call, block, ...overrides] = params
  const request = callRequest.safeParse(call)
  const selector = blockArgument.safeParse(block ?? undefined)
  const local = request.success && selector.success && overrides.every((override) => override == null) ? { request: request.data, block: selector.data } : null
  return { params, local }
})

export type CallParams = z.output<typeof callParams>

export function toQuantity(value: bigint | number): Hex {
  return `0x${value.toString(16)}`
}

type Issue = z.core.$ZodIssue

/** zod's own message for a union none of whose alternatives matched; a union with its own message keeps it. */
const DEFAULT_UNION_MESSAGE = 'Invalid input'

/**
 * The issue that says most about a failed union: when every alternative wants a literal (a subscription
 * kind), one issue listing them; otherwise the alternative that got furthest (a type mismatch says least).
 * Paths of the alternatives' issues are relative to the union.
 */
export function unionIssue(issue: Issue): Issue {
  if (issue.code !== 'invalid_union' || issue.message !== DEFAULT_UNION_MESSAGE) return issue
  const candidates = issue.errors
    .map((branch) => branch[0])
    .filter((candidate): candidate is Issue => candidate !== undefined)
    .map((candidate) => {
      const inner = unionIssue(candidate)
      return { ...inner, path: [...issue.path, ...candidate.path, ...(inner === candidate ? [] : inner.path.slice(candidate.path.length))] } as Issue
    })
  if (candidates.length === 0) return issue
  const literals = candidates.flatMap((candidate) => (candidate.code === 'invalid_value' ? candidate.values : []))
  const samePath = candidates.every((candidate) => candidate.path.join('.') === candidates[0]!.path.join('.'))
  if (samePath && candidates.every((candidate) => candidate.code === 'invalid_value'))
    return { ...candidates[0]!, message: `expected one of ${literals.map((value) => JSON.stringify(value)).join(', ')}` }
  const score = (candidate: Issue) => candidate.path.length * 2 + (candidate.code === 'invalid_type' ? 0 : 1)
  return candidates.reduce((best, candidate) => (score(candidate) > score(best) ? candidate : best))
}

/**
 * Formats a zod error as geth does for JSON-RPC params: `invalid argument 0: …`, `missing value for required
 * argument 1`, `too many arguments, want at most 2`. `params` (the positional params as sent) names the first
 * missing argument when a tuple is too short.
 */
export function describeParamsError(error: z.ZodError, params?: unknown): string {
  const first = error.issues[0]
  if (first === undefined) return 'invalid params'
  const issue = unionIssue(first)
  const [position, ...rest] = issue.path
  if (position === undefined && issue.code === 'too_small' && issue.origin === 'array')
    return `${MISSING_ARGUMENT} ${Array.isArray(params) ? params.length : Number(issue.minimum) - 1}`
  if (position === undefined && issue.code === 'too_big' && issue.origin === 'array') return `too many arguments, want at most ${issue.maximum}`
  if (typeof position === 'number' && issue.message === MISSING_ARGUMENT && rest.length === 0) return `${MISSING_ARGUMENT} ${position}`
  const where = rest.length > 0 ? ` (${rest.join('.')})` : ''
  if (typeof position === 'number') return `invalid argument ${position}${where}: ${issue.message}`
  return `invalid params: ${issue.message}`
}

/**
 * A wallet address for builder-code registration: all lower-case, all upper-case, or EIP-55 checksummed;
 * a mixed-case address with a wrong checksum is refused (it is likely mistyped). Normalised to lower case.
 * https://eips.ethereum.org/EIPS/eip-55
 */
export const walletAddress = z
  .string({ error: 'walletAddress must be a string' })
  .regex(/^0x[0-9a-fA-F]{40}$/, { error: 'walletAddress must be a 0x-prefixed 20-byte hex address' })
  .refine(hasValidChecksum, { error: `walletAddress has ${BAD_CHECKSUM}` })
  .transform((value) => value.toLowerCase() as Address)

/** An attribution code as recorded from calldata: 1–32 printable ASCII characters without a comma. */
export const attributionCode = z
  .string({ error: 'expected a builder code' })
  .refine(isAttributionCode, { error: 'a builder code is 1 to 32 printable ASCII characters without commas' })

export const SERIES_INTERVALS = ['minute', 'hour', 'day'] as const
export type SeriesInterval = (typeof SERIES_INTERVALS)[number]
export const seriesInterval = z.enum(SERIES_INTERVALS, { error: `interval must be one of ${SERIES_INTERVALS.join(', ')}` })
