/**
 * Wire codecs, defined once as zod schemas and used by JSON-RPC, GraphQL and REST alike (STYLE.md §3).
 * Hex on the wire, bigint inside: https://ethereum.org/en/developers/docs/apis/json-rpc/#hex-encoding
 */
import { type Address, type Hash, type Hex, checksumAddress } from 'viem'
import { z } from 'zod'
import { isAttributionCode } from '../attribution/index.js'

const MAX_UINT64 = 2n ** 64n - 1n
const MAX_UINT256 = 2n ** 256n - 1n

export const BLOCK_TAGS = ['latest', 'pending', 'safe', 'finalized', 'earliest'] as const
export type BlockTag = (typeof BLOCK_TAGS)[number]

/** `0x`-prefixed hex quantity. Leading zeros are accepted, as reth and anvil do; empty `0x` is not. */
export const quantity = z
  .string({ error: 'expected a hex quantity string' })
  .regex(/^0x[0-9a-fA-F]{1,64}$/, { error: 'expected a 0x-prefixed hex quantity' })
  .transform((value) => BigInt(value))
  .refine((value) => value <= MAX_UINT256, { error: 'quantity exceeds 256 bits' })

/** A block number: a quantity that fits in 64 bits. */
export const blockNumberQuantity = z
  .string({ error: 'expected a hex block number' })
  .regex(/^0x[0-9a-fA-F]{1,16}$/, { error: 'expected a 0x-prefixed hex block number of at most 64 bits' })
  .transform((value) => BigInt(value))
  .refine((value) => value <= MAX_UINT64)

export const hexData = z
  .string({ error: 'expected hex data' })
  .regex(/^0x([0-9a-fA-F]{2})*$/, { error: 'expected 0x-prefixed hex data of whole bytes' })
  .transform((value) => value.toLowerCase() as Hex)

/** 20-byte address, any case; normalised to lower case (checksums are not enforced on reads, like geth). */
export const address = z
  .string({ error: 'expected an address string' })
  .regex(/^0x[0-9a-fA-F]{40}$/, { error: 'expected a 0x-prefixed 20-byte hex address' })
  .transform((value) => value.toLowerCase() as Address)

/** 32-byte hash or topic, normalised to lower case. */
export const hash = z
  .string({ error: 'expected a hash string' })
  .regex(/^0x[0-9a-fA-F]{64}$/, { error: 'expected a 0x-prefixed 32-byte hex hash' })
  .transform((value) => value.toLowerCase() as Hash)

export const blockTag = z.enum(BLOCK_TAGS, { error: `expected one of ${BLOCK_TAGS.join(', ')}` })

export type BlockSelector =
  | { kind: 'tag'; tag: BlockTag }
  | { kind: 'number'; number: bigint }
  | { kind: 'hash'; hash: Hash; requireCanonical: boolean }

const blockNumberOrTag = z.union([blockTag, blockNumberQuantity], {
  error: 'expected a hex block number or one of latest, pending, safe, finalized, earliest',
})

/** A block number or tag, as `eth_getLogs` takes in `fromBlock`/`toBlock`. */
export const blockNumberOrTagSelector = blockNumberOrTag.transform(
  (value): BlockSelector =>
    typeof value === 'bigint' ? { kind: 'number', number: value } : { kind: 'tag', tag: value },
)

/**
 * Block argument of state and receipt methods: number, tag, or an EIP-1898 object.
 * https://eips.ethereum.org/EIPS/eip-1898
 */
export const blockArgument = z.union(
  [
    blockNumberOrTagSelector,
    z
      .object({ blockHash: hash, requireCanonical: z.boolean().optional() })
      .strict()
      .transform(
        (value): BlockSelector => ({
          kind: 'hash',
          hash: value.blockHash,
          requireCanonical: value.requireCanonical ?? false,
        }),
      ),
    z
      .object({ blockNumber: blockNumberOrTag })
      .strict()
      .transform(
        (value): BlockSelector =>
          typeof value.blockNumber === 'bigint'
            ? { kind: 'number', number: value.blockNumber }
            : { kind: 'tag', tag: value.blockNumber },
      ),
  ],
  { error: 'expected a block number, tag, or {blockHash}/{blockNumber} object' },
)

/** An omitted block argument means `latest` (geth and reth do the same for state reads). */
export const optionalBlockArgument = blockArgument
  .optional()
  .transform((value): BlockSelector => value ?? { kind: 'tag', tag: 'latest' })

const MAX_TOPIC_POSITIONS = 4

const topicPosition = z.union([z.null(), hash, z.array(hash.nullable())]).transform((value) => {
  // `null`, `[]` and any array holding `null` all match every topic at this position.
  if (value === null) return null
  if (Array.isArray(value)) return value.length === 0 || value.includes(null) ? null : (value as Hash[])
  return [value]
})

/** `eth_getLogs` filter. https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_getlogs */
export const logFilter = z
  .object(
    {
      fromBlock: blockNumberOrTagSelector.optional(),
      toBlock: blockNumberOrTagSelector.optional(),
      address: z.union([address, z.array(address)]).nullish(),
      topics: z
        .array(topicPosition)
        .max(MAX_TOPIC_POSITIONS, { error: 'exceed max topics' })
        .nullish(),
      blockHash: hash.optional(),
    },
    { error: 'expected a filter object' },
  )
  .refine((filter) => filter.blockHash === undefined || (filter.fromBlock === undefined && filter.toBlock === undefined), {
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
    if (filter.blockHash !== undefined) return { ...base, blockHash: filter.blockHash }
    return {
      ...base,
      fromBlock: filter.fromBlock ?? { kind: 'tag', tag: 'latest' },
      toBlock: filter.toBlock ?? { kind: 'tag', tag: 'latest' },
    }
  })

export type LogFilter = {
  /** `null` matches every address. */
  addresses: Address[] | null
  /** Per position: `null` matches anything, otherwise any of the listed topics. */
  topics: (Hash[] | null)[]
} & (
  | { blockHash: Hash; fromBlock?: undefined; toBlock?: undefined }
  | { blockHash?: undefined; fromBlock: BlockSelector; toBlock: BlockSelector }
)

export function toQuantity(value: bigint | number): Hex {
  return `0x${value.toString(16)}`
}

/** Formats a zod error as geth does for JSON-RPC params: `invalid argument 0: …`. */
export function describeParamsError(error: z.ZodError): string {
  const issue = error.issues[0]
  if (issue === undefined) return 'invalid params'
  const [position, ...rest] = issue.path
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
  .refine(
    (value) => {
      const body = value.slice(2)
      return body === body.toLowerCase() || body === body.toUpperCase() || checksumAddress(value as Address) === value
    },
    { error: 'walletAddress has mixed case but an invalid EIP-55 checksum' },
  )
  .transform((value) => value.toLowerCase() as Address)

/** An attribution code as recorded from calldata: 1–32 printable ASCII characters without a comma. */
export const attributionCode = z
  .string({ error: 'expected a builder code' })
  .refine(isAttributionCode, { error: 'a builder code is 1 to 32 printable ASCII characters without commas' })

export const SERIES_INTERVALS = ['minute', 'hour', 'day'] as const
export type SeriesInterval = (typeof SERIES_INTERVALS)[number]
export const seriesInterval = z.enum(SERIES_INTERVALS, { error: `interval must be one of ${SERIES_INTERVALS.join(', ')}` })
