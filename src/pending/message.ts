/**
 * Base's Flashblocks feed message, defined once for both sides: the wire form the devnet writes
 * (`FlashblockWireMessage`) and the lenient reader the feed parses it with (`flashblockMessage`).
 *
 * The sequencer sends one every ~200 ms: `index` 0 opens a block and carries `base`; every message's `diff`
 * lists only the transactions new since the previous one, with the block's cumulative roots and gas so far.
 * Since Base's Azul upgrade `metadata` is only `{block_number, access_list}`: no receipts, no balances. Older
 * feeds and other OP-Stack builders still send receipts (as `{"type":"0x2",…}` or the older `{"Eip1559":{…}}`)
 * and `new_account_balances`; they are used where present. `base` comes at index 0 only (older streams sent
 * `null` later); fields a builder adds are kept; a receipt that does not parse counts as absent rather than
 * voiding the flashblock.
 * https://github.com/ethereum-optimism/specs/blob/main/specs/protocol/flashblocks.md
 * https://docs.base.org/base-chain/flashblocks/websocket-reference
 */
import { promisify } from 'node:util'
import { brotliDecompress } from 'node:zlib'
import type { Address, Hash, Hex } from 'viem'
import { z } from 'zod'
import { address, hash, hexData, quantity } from '../codecs/index.js'

/** Consensus receipt types by their name in the older enum form. */
const RECEIPT_TYPE_BY_NAME = { Legacy: 0, Eip2930: 1, Eip1559: 2, Eip4844: 3, Eip7702: 4, Deposit: 0x7e }

// ---------------------------------------------------------------------------------------------------------
// The wire form (hex quantities, as in the Engine API payload)

/** Header fields fixed when the block is opened. */
export type FlashblockBase = {
  parent_beacon_block_root: Hash
  parent_hash: Hash
  fee_recipient: Address
  prev_randao: Hash
  block_number: Hex
  gas_limit: Hex
  timestamp: Hex
  extra_data: Hex
  base_fee_per_gas: Hex
}

export type FlashblockWithdrawal = { index: Hex; validatorIndex: Hex; address: Address; amount: Hex }

/** The block as built so far: roots and `gas_used` cover every flashblock up to this one. */
export type FlashblockDiff = {
  state_root: Hash
  receipts_root: Hash
  logs_bloom: Hex
  /** Cumulative over the block, not this flashblock's own gas. */
  gas_used: Hex
  block_hash: Hash
  /** EIP-2718 encoded transactions new in this flashblock, in block order. */
  transactions: Hex[]
  withdrawals: FlashblockWithdrawal[]
  withdrawals_root?: Hash
  /** Sent by Base since Azul (`0x0`: an OP-Stack block carries no blobs). */
  blob_gas_used?: Hex
}

export type FlashblockLog = { address: Address; topics: Hash[]; data: Hex }

/** A consensus receipt in node-reth's tagged form (what the devnet sends). */
export type FlashblockReceipt = {
  type: Hex
  status: Hex
  /** Cumulative over the block; a transaction's own gas is the difference to the previous receipt's. */
  cumulativeGasUsed: Hex
  logs: FlashblockLog[]
}

/** The older serde enum form (`{"Eip1559":{…}}`) that Base's feed sent before the tagged one. */
export type LegacyFlashblockReceipt = { [name in keyof typeof RECEIPT_TYPE_BY_NAME]?: Omit<FlashblockReceipt, 'type'> }

export type FlashblockMetadata = {
  /** A JSON number here, unlike `base.block_number`. */
  block_number: number
  /** Sent by Base since Azul, always `null` so far (reserved for a block-level access list). */
  access_list?: unknown
  /**
   * The flashblock this one follows, as `<block number>-<index>` (Base's builder, 2026): the last of the block
   * before for an index 0. `0-0` or absent when the builder names none (its first after a restart).
   */
  prev_flashblock_id?: string
  /** Receipts of this flashblock's transactions, keyed by transaction hash. Legacy feeds only. */
  receipts?: Record<Hash, FlashblockReceipt | LegacyFlashblockReceipt>
  /** Post-flashblock balances of the accounts its transactions changed. Legacy feeds only. */
  new_account_balances?: Record<Address, Hex>
}

export type FlashblockWireMessage = {
  /** 8 bytes, the same for every flashblock of one block. */
  payload_id: Hex
  index: number
  /** Only on index 0. */
  base?: FlashblockBase
  diff: FlashblockDiff
  metadata: FlashblockMetadata
}

// ---------------------------------------------------------------------------------------------------------
// The reader

/** A zod shape for the wire type `wire`: it names no field that `wire` lacks (those it leaves out pass through). */
type ShapeOf<wire> = { [field in keyof wire]?: z.ZodType }

/** `wire`, where `schema` reads every value of it: a type changed on one side only fails to compile. */
type ReadBy<schema extends z.ZodType, wire extends z.input<schema>> = wire

const consensusLog = z.object({ address, topics: z.array(hash), data: hexData } satisfies ShapeOf<FlashblockLog>)

const receiptFields = z
  .object({
    status: z.union([quantity, z.boolean()]).transform((value) => (typeof value === 'boolean' ? (value ? 1n : 0n) : value)),
    cumulativeGasUsed: quantity,
    logs: z.array(consensusLog).default([]),
  } satisfies ShapeOf<FlashblockReceipt>)
  .passthrough()

const taggedReceipt = receiptFields.extend({ type: quantity } satisfies ShapeOf<FlashblockReceipt>)

/** A receipt as the feed carries it: consensus fields only, type known. */
export type FeedReceipt = {
  type: number
  status: 0 | 1
  cumulativeGasUsed: bigint
  logs: FlashblockLog[]
  /** Anything else the feed sent (e.g. `depositNonce` on OP deposit receipts), kept as is. */
  extra: Record<string, unknown>
}

const feedReceipt = z.unknown().transform((value, context): FeedReceipt => {
  let candidate = value
  let type: number | undefined
  if (typeof value === 'object' && value !== null && !('type' in value)) {
    const entries = Object.entries(value)
    const [name, inner] = entries[0] ?? []
    if (entries.length === 1 && name !== undefined && Object.hasOwn(RECEIPT_TYPE_BY_NAME, name)) {
      candidate = inner
      type = RECEIPT_TYPE_BY_NAME[name as keyof typeof RECEIPT_TYPE_BY_NAME]
    }
  }
  const parsed = (type === undefined ? taggedReceipt : receiptFields).safeParse(candidate)
  if (!parsed.success) {
    context.addIssue({ code: 'custom', message: `bad receipt: ${parsed.error.issues[0]?.message}` })
    return z.NEVER
  }
  const { status, cumulativeGasUsed, logs, ...rest } = parsed.data as z.output<typeof taggedReceipt>
  const { type: taggedType, ...extra } = rest as typeof rest & { type?: bigint }
  return {
    type: type ?? Number(taggedType),
    status: status === 0n ? 0 : 1,
    cumulativeGasUsed,
    logs: logs as FeedReceipt['logs'],
    extra,
  }
})

const base = z
  .object({
    parent_hash: hash,
    fee_recipient: address,
    block_number: quantity,
    gas_limit: quantity,
    timestamp: quantity,
    base_fee_per_gas: quantity,
    extra_data: hexData.optional(),
    prev_randao: hash.optional(),
    parent_beacon_block_root: hash.optional(),
  } satisfies ShapeOf<FlashblockBase>)
  .passthrough()

/** `<block number>-<index>`, read as both numbers; `0-0` (Base's "none") as absent. */
const flashblockId = z
  .string()
  .regex(/^\d{1,15}-\d{1,15}$/)
  .transform((id) => {
    const [blockNumber, index] = id.split('-').map(Number) as [number, number]
    return blockNumber === 0 && index === 0 ? undefined : { blockNumber, index }
  })

const withdrawal = z.object({ index: quantity, validatorIndex: quantity, address, amount: quantity } satisfies ShapeOf<FlashblockWithdrawal>).passthrough()

export const flashblockMessage = z.object({
  payload_id: z.string().regex(/^0x[0-9a-fA-F]+$/),
  index: z.number().int().nonnegative(),
  base: base.nullish().transform((value) => value ?? undefined),
  diff: z
    .object({
      transactions: z.array(hexData).default([]),
      gas_used: quantity.optional(),
      block_hash: hash.optional(),
      state_root: hash.optional(),
      receipts_root: hash.optional(),
      logs_bloom: hexData.optional(),
      withdrawals: z.array(withdrawal).nullish(),
      withdrawals_root: hash.nullish(),
      blob_gas_used: quantity.nullish(),
    } satisfies ShapeOf<FlashblockDiff>)
    .passthrough(),
  metadata: z
    .object({
      block_number: z.number().int().nonnegative().optional(),
      // A link in another form is no link: the frame is still checked by its index.
      prev_flashblock_id: flashblockId.optional().catch(undefined),
      // One bad receipt leaves that transaction without one; it does not void the flashblock.
      receipts: z.record(hash, feedReceipt.nullable().catch(null)).nullish(),
      new_account_balances: z.record(address, quantity).nullish(),
    } satisfies ShapeOf<FlashblockMetadata>)
    .passthrough()
    .nullish(),
} satisfies ShapeOf<FlashblockWireMessage>)

/** A flashblock as read: quantities as bigints, receipts in one form. */
export type FlashblockMessage = z.output<typeof flashblockMessage>

// The reader takes every message the devnet writes, and receipts in both forms (tagged, and inside the enum).
type _ReadsTheWire = [
  ReadBy<typeof flashblockMessage, FlashblockWireMessage>,
  ReadBy<typeof taggedReceipt, FlashblockReceipt>,
  ReadBy<typeof receiptFields, Omit<FlashblockReceipt, 'type'>>,
]

/**
 * The most a frame may take, as received and once decompressed: a busy Base flashblock is well under 1 MiB.
 * A few KiB of Brotli can expand to hundreds of MB; past this the frame is refused instead.
 */
export const MAX_FRAME_BYTES = 32 * 1024 * 1024

const inflate = promisify(brotliDecompress)

/**
 * Decodes one WebSocket frame: text, raw-JSON binary, or Brotli-compressed binary JSON, inflated on libuv's
 * thread pool (a frame of a few bytes may inflate to MAX_FRAME_BYTES, which would hold the event loop for a
 * second); rejects what does not decode.
 */
export async function decodeFrame(data: Buffer | string): Promise<unknown> {
  if (typeof data === 'string') return JSON.parse(data)
  // An uncompressed JSON object starts with `{` (possibly after whitespace); Brotli output never parses.
  const first = data.find((byte) => byte !== 0x20 && byte !== 0x0a && byte !== 0x0d && byte !== 0x09)
  if (first === 0x7b) return JSON.parse(data.toString('utf8'))
  return JSON.parse((await inflate(data, { maxOutputLength: MAX_FRAME_BYTES })).toString('utf8'))
}
