/**
 * Base's Flashblocks feed message, as its sequencer sends one every ~200 ms: `index` 0 opens a block and
 * carries `base`; every message's `diff` lists only the transactions new since the previous one, with the
 * block's cumulative roots and gas so far. Since Base's Azul upgrade `metadata` is only the block number
 * and `access_list: null`; older feeds (and other OP-Stack builders) add the new transactions' receipts and
 * the balances they changed (DESIGN.md §5).
 * https://docs.base.org/base-chain/flashblocks/websocket-reference
 */
import { brotliCompressSync, constants as zlibConstants } from 'node:zlib'
import type { Address, Hash, Hex, RpcBlock, RpcTransactionReceipt } from 'viem'

/** `current`: Base's frames since Azul, without receipts or balances; `legacy`: with them, as before. */
/** The devnet's Flashblocks format: Base's since Azul (no receipts, no balances), or the older one with them. */
export const FEED_FORMATS = ['current', 'legacy'] as const
export type FeedFormat = (typeof FEED_FORMATS)[number]

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
  /** Sent by Base since Azul (`0x0`: an OP-Stack block carries no blobs). */
  blob_gas_used?: Hex
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
  /** Sent by Base since Azul, always `null` so far (reserved for a block-level access list). */
  access_list?: unknown
  /** Receipts of this flashblock's transactions, keyed by transaction hash. Legacy feeds only. */
  receipts?: Record<Hash, FlashblockReceipt | LegacyFlashblockReceipt>
  /** Post-flashblock balances of the accounts its transactions changed. Legacy feeds only. */
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

/** What a flashblock is made of: the block as mined so far and what is new in it. */
export type FlashblockSource = {
  payloadId: Hex
  index: number
  block: RpcBlock<'latest', false>
  /** EIP-2718 form of the transactions new in this flashblock, in block order. */
  transactions: Hex[]
  /** Legacy feeds only: the new transactions' receipts, and the balances of the accounts they touched. */
  legacy?: { receipts: RpcTransactionReceipt[]; balances: Record<Address, Hex> }
}

/** The feed message for one flashblock: Base's current format, or the legacy one when `legacy` is given. */
export function buildFlashblockMessage({ payloadId, index, block, transactions, legacy }: FlashblockSource): FlashblockMessage {
  const zeroHash: Hash = `0x${'0'.repeat(64)}`
  const diff: FlashblockDiff = {
    state_root: block.stateRoot,
    receipts_root: block.receiptsRoot,
    logs_bloom: block.logsBloom,
    gas_used: block.gasUsed,
    block_hash: block.hash,
    transactions,
    withdrawals: [],
    ...(block.withdrawalsRoot && { withdrawals_root: block.withdrawalsRoot }),
    ...(legacy === undefined && { blob_gas_used: block.blobGasUsed ?? '0x0' }),
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
    metadata:
      legacy === undefined
        ? { block_number: Number(block.number), access_list: null }
        : {
            block_number: Number(block.number),
            receipts: Object.fromEntries(legacy.receipts.map((receipt) => [receipt.transactionHash, toFlashblockReceipt(receipt)])),
            new_account_balances: legacy.balances,
          },
  }
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
