/**
 * Base's Flashblocks feed message, parsed leniently. Since Base's Azul upgrade `metadata` is only
 * `{block_number, access_list}`: no receipts, no balances. Older feeds and other OP-Stack builders still
 * send receipts (as `{"type":"0x2",…}` or the older `{"Eip1559":{…}}`) and `new_account_balances`; they
 * are used where present. `base` comes at index 0 only (older streams sent `null` later); fields a builder
 * adds are kept; a receipt that does not parse counts as absent rather than voiding the flashblock.
 * https://github.com/ethereum-optimism/specs/blob/main/specs/protocol/flashblocks.md
 */
import { brotliDecompressSync } from 'node:zlib'
import type { Address, Hash, Hex } from 'viem'
import { z } from 'zod'
import { address, hash, hexData, quantity } from '../codecs/index.js'

/** Consensus receipt types by their name in the older enum form. */
const RECEIPT_TYPE_BY_NAME: Record<string, number> = { Legacy: 0, Eip2930: 1, Eip1559: 2, Eip4844: 3, Eip7702: 4, Deposit: 0x7e }

const consensusLog = z.object({ address, topics: z.array(hash), data: hexData })

const receiptFields = z
  .object({
    status: z.union([quantity, z.boolean()]).transform((value) => (typeof value === 'boolean' ? (value ? 1n : 0n) : value)),
    cumulativeGasUsed: quantity,
    logs: z.array(consensusLog).default([]),
  })
  .passthrough()

const taggedReceipt = receiptFields.extend({ type: quantity })

/** A receipt as the feed carries it: consensus fields only, type known. */
export type FeedReceipt = {
  type: number
  status: 0 | 1
  cumulativeGasUsed: bigint
  logs: { address: Address; topics: Hash[]; data: Hex }[]
  /** Anything else the feed sent (e.g. `depositNonce` on OP deposit receipts), kept as is. */
  extra: Record<string, unknown>
}

const feedReceipt = z.unknown().transform((value, context): FeedReceipt => {
  let candidate = value
  let type: number | undefined
  if (typeof value === 'object' && value !== null && !('type' in value)) {
    const entries = Object.entries(value)
    const [name, inner] = entries[0] ?? []
    if (entries.length === 1 && name !== undefined && name in RECEIPT_TYPE_BY_NAME) {
      candidate = inner
      type = RECEIPT_TYPE_BY_NAME[name]
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
  })
  .passthrough()

const withdrawal = z.object({ index: quantity, validatorIndex: quantity, address, amount: quantity }).passthrough()

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
    })
    .passthrough(),
  metadata: z
    .object({
      block_number: z.number().int().nonnegative().optional(),
      // One bad receipt leaves that transaction without one; it does not void the flashblock.
      receipts: z.record(hash, feedReceipt.nullable().catch(null)).nullish(),
      new_account_balances: z.record(address, quantity).nullish(),
    })
    .passthrough()
    .nullish(),
})

export type FlashblockMessage = z.output<typeof flashblockMessage>

/** Decodes one WebSocket frame: text, raw-JSON binary, or Brotli-compressed binary JSON. */
export function decodeFrame(data: Buffer | string): unknown {
  if (typeof data === 'string') return JSON.parse(data)
  // An uncompressed JSON object starts with `{` (possibly after whitespace); Brotli output never parses.
  const first = data.find((byte) => byte !== 0x20 && byte !== 0x0a && byte !== 0x0d && byte !== 0x09)
  if (first === 0x7b) return JSON.parse(data.toString('utf8'))
  return JSON.parse(brotliDecompressSync(data).toString('utf8'))
}
