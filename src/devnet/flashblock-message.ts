/**
 * The devnet's side of the Flashblocks feed: one message per flashblock, built from anvil's block as mined so
 * far, in the wire form that `src/pending/message.ts` defines and reads; and its frame, as Base sends it.
 */
import { brotliCompressSync, constants as zlibConstants } from 'node:zlib'
import { type Address, concat, type Hash, type Hex, keccak256, numberToHex, type RpcBlock, type RpcTransactionReceipt } from 'viem'
import type { FlashblockDiff, FlashblockReceipt, FlashblockWireMessage } from '../pending/message.js'

export { FEED_FORMATS, type FeedFormat } from './feed-format.js'

/** Base's builder skips the state root per flashblock and sends zeros in its place. */
const SKIPPED_STATE_ROOT: Hash = `0x${'0'.repeat(64)}`
/** What `prev_flashblock_id` says when the builder names no flashblock before (its first after a restart). */
const NO_PREVIOUS_FLASHBLOCK = '0-0'

/** Brotli quality for frames: the default (11) took 25 ms for a 30-transaction frame (quality 5: 0.9 ms, 10% larger). */
const BROTLI_QUALITY = 5

/** A flashblock as `prev_flashblock_id` names it: its block's number and its index. */
export type FlashblockId = { blockNumber: number; index: number }

/** What a flashblock is made of: the block as mined so far and what is new in it. */
export type FlashblockSource = {
  payloadId: Hex
  index: number
  block: RpcBlock<'latest', false>
  /** EIP-2718 form of the transactions new in this flashblock, in block order. */
  transactions: Hex[]
  /** Legacy feeds only: the new transactions' receipts, and the balances of the accounts they touched. */
  legacy?: { receipts: RpcTransactionReceipt[]; balances: Record<Address, Hex> }
  /** Current format only: the flashblock announced before this one; none (absent or `null`) for the first. */
  previous?: FlashblockId | null
}

/**
 * The feed message for one flashblock: Base's current format, or the legacy one when `legacy` is given.
 *
 * The current format is what Base's builder sends today: a zero state root (it skips computing one per
 * flashblock), a `block_hash` that is the hash of that zero-rooted header (so a different one for every
 * flashblock, and never the sealed block's), and `metadata.prev_flashblock_id` naming the flashblock it
 * follows. A consumer must not take any frame's `block_hash` for the block's. The legacy format keeps the
 * real roots and hash, and names no flashblock before.
 */
export function buildFlashblockMessage({ payloadId, index, block, transactions, legacy, previous }: FlashblockSource): FlashblockWireMessage {
  const zeroHash: Hash = `0x${'0'.repeat(64)}`
  const current = legacy === undefined
  const diff: FlashblockDiff = {
    state_root: current ? SKIPPED_STATE_ROOT : block.stateRoot,
    receipts_root: block.receiptsRoot,
    logs_bloom: block.logsBloom,
    gas_used: block.gasUsed,
    block_hash: current ? flashblockHash(payloadId, index, block.hash) : block.hash,
    transactions,
    withdrawals: [],
    ...(block.withdrawalsRoot && { withdrawals_root: block.withdrawalsRoot }),
    ...(current && { blob_gas_used: block.blobGasUsed ?? '0x0' }),
  }
  return {
    payload_id: payloadId,
    index,
    ...(index === 0 && {
      base: {
        parent_beacon_block_root: block.parentBeaconBlockRoot ?? zeroHash,
        parent_hash: block.parentHash,
        fee_recipient: block.miner,
        prev_randao: block.mixHash,
        block_number: block.number,
        gas_limit: block.gasLimit,
        timestamp: block.timestamp,
        extra_data: block.extraData,
        base_fee_per_gas: block.baseFeePerGas ?? '0x0',
      },
    }),
    diff,
    metadata: current
      ? { block_number: Number(block.number), access_list: null, prev_flashblock_id: flashblockId(previous ?? null) }
      : {
          block_number: Number(block.number),
          receipts: Object.fromEntries(legacy.receipts.map((receipt) => [receipt.transactionHash, toFlashblockReceipt(receipt)])),
          new_account_balances: legacy.balances,
        },
  }
}

/**
 * A stand-in for the hash Base's builder gives a flashblock (its header with a zero state root, which the devnet
 * does not build): a different one for every flashblock, the same again for the same flashblock, and never the
 * sealed block's hash, which is one of its inputs.
 */
function flashblockHash(payloadId: Hex, index: number, blockHash: Hash): Hash {
  return keccak256(concat([payloadId, numberToHex(index, { size: 8 }), blockHash]))
}

/** `<block number>-<index>`, as Base's builder writes `prev_flashblock_id`. */
function flashblockId(previous: FlashblockId | null): string {
  return previous === null ? NO_PREVIOUS_FLASHBLOCK : `${previous.blockNumber}-${previous.index}`
}

/** The consensus receipt, in node-reth's tagged form: what a node cannot derive from the transaction itself. */
function toFlashblockReceipt(receipt: RpcTransactionReceipt): FlashblockReceipt {
  return {
    type: receipt.type as Hex,
    status: receipt.status as Hex,
    cumulativeGasUsed: receipt.cumulativeGasUsed,
    logs: receipt.logs.map(({ address, topics, data }) => ({ address, topics: [...topics], data })),
  }
}

export type EncodeFlashblockOptions = {
  /** Brotli-compressed binary, as Base sends it; otherwise JSON text. */
  compress: boolean
}

/** One WebSocket frame's payload: a Buffer to send as a binary frame, or a string for a text frame. */
export function encodeFlashblock(message: FlashblockWireMessage, { compress }: EncodeFlashblockOptions): Buffer | string {
  const json = JSON.stringify(message)
  if (!compress) return json
  return brotliCompressSync(Buffer.from(json, 'utf8'), {
    params: {
      [zlibConstants.BROTLI_PARAM_MODE]: zlibConstants.BROTLI_MODE_TEXT,
      [zlibConstants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
    },
  })
}
