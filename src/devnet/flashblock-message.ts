/**
 * Base's Flashblocks feed message, as its sequencer sends one every ~200 ms: `index` 0 opens a block and
 * carries `base`; every message's `diff` lists only the transactions new since the previous one, with the
 * block's cumulative roots and gas so far; `metadata` carries their receipts and the balances they changed.
 * https://docs.base.org/base-chain/flashblocks/websocket-reference
 */
import { brotliCompressSync, constants as zlibConstants } from 'node:zlib'
import type { Address, Hash, Hex } from 'viem'

/** Brotli quality for frames: the default (11) took 25 ms for a 30-transaction frame (quality 5: 0.9 ms, 10% larger). */
const BROTLI_QUALITY = 5

/** Header fields fixed when the block is opened (hex quantities, as in the Engine API payload). */
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
  withdrawals: { index: Hex; validatorIndex: Hex; address: Address; amount: Hex }[]
  withdrawals_root?: Hash
}

export type FlashblockLog = { address: Address; topics: Hash[]; data: Hex }

/** A consensus receipt in node-reth's tagged form (what this devnet sends). */
export type FlashblockReceipt = {
  type: Hex
  status: Hex
  /** Cumulative over the block; a transaction's own gas is the difference to the previous receipt's. */
  cumulativeGasUsed: Hex
  logs: FlashblockLog[]
}

/** The older serde enum form (`{"Eip1559":{…}}`) that Base's feed sent before the tagged one. */
export type LegacyFlashblockReceipt = {
  [name in 'Legacy' | 'Eip2930' | 'Eip1559' | 'Eip4844' | 'Eip7702' | 'Deposit']?: Omit<FlashblockReceipt, 'type'>
}

export type FlashblockMetadata = {
  /** A JSON number here, unlike `base.block_number`. */
  block_number: number
  /** Receipts of this flashblock's transactions, keyed by transaction hash. Absent in some feed versions. */
  receipts?: Record<Hash, FlashblockReceipt | LegacyFlashblockReceipt>
  /** Post-flashblock balances of the accounts its transactions changed. Absent in some feed versions. */
  new_account_balances?: Record<Address, Hex>
}

export type FlashblockMessage = {
  /** 8 bytes, the same for every flashblock of one block. */
  payload_id: Hex
  index: number
  /** Only on index 0. */
  base?: FlashblockBase
  diff: FlashblockDiff
  metadata: FlashblockMetadata
}

export type EncodeFlashblockOptions = {
  /** Brotli-compressed binary, as Base sends it; otherwise JSON text. */
  compress: boolean
}

/** One WebSocket frame's payload: a Buffer to send as a binary frame, or a string for a text frame. */
export function encodeFlashblock(message: FlashblockMessage, { compress }: EncodeFlashblockOptions): Buffer | string {
  const json = JSON.stringify(message)
  if (!compress) return json
  return brotliCompressSync(Buffer.from(json, 'utf8'), {
    params: {
      [zlibConstants.BROTLI_PARAM_MODE]: zlibConstants.BROTLI_MODE_TEXT,
      [zlibConstants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
    },
  })
}
