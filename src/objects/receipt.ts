// Receipts as flashgate answers them, confirmed and pre-confirmed, in one place for the ingester (which
// renders confirmed ones once into `block_receipts`), the pending state and the resolvers.

import { type Address, getContractAddress, type Hash, type Hex, type RpcTransactionReceipt } from 'viem'
import { toQuantity } from '../codecs/index.js'
import { keccak256OfHex } from '../codecs/keccak.js'
import type { LogRow } from '../db/index.js'
import type { FeedReceipt } from '../pending/message.js'
import type { PendingTransaction } from '../pending/transactions.js'
import { formatLog, type PlacedLog } from './log.js'

/** Pending answers carry this block hash: the block is not sealed (Base's own node does the same). */
export const PENDING_BLOCK_HASH: Hash = `0x${'00'.repeat(32)}`

const BLOOM_BYTES = 256

/** The 2048-bit log bloom of a receipt (yellow paper §4.3.1). */
export function logsBloom(logs: { address: Address; topics: Hash[] }[]): Hex {
  const bloom = new Uint8Array(BLOOM_BYTES)
  const add = (value: Hex) => {
    const digest = keccak256OfHex(value)
    for (let pair = 0; pair < 6; pair += 2) {
      const bit = ((digest[pair]! << 8) | digest[pair + 1]!) & 2047
      bloom[BLOOM_BYTES - 1 - (bit >> 3)]! |= 1 << (bit & 7)
    }
  }
  for (const log of logs) {
    add(log.address)
    for (const topic of log.topics) add(topic)
  }
  return `0x${Buffer.from(bloom).toString('hex')}`
}

export type PendingBlockContext = { number: number; timestamp: bigint; baseFeePerGas: bigint }

/**
 * The blob base fee of a block whose excess blob gas is zero (EIP-4844's minimum): what every OP-Stack
 * block and every devnet block without blobs has. Pending receipts from a legacy feed carry it as
 * `blobGasPrice`, as sealed ones do.
 */
const MIN_BLOB_BASE_FEE = 1n

/** What the pending view answers for a transaction's receipt; logs in `eth_getLogs` form. */
export type PendingReceipt = Record<string, unknown> & {
  logs: PendingLog[]
  transactionHash: Hash
}

/** A pre-confirmed log; `removed` is `true` only when announced again because it was withdrawn (it differed from the sealed block). */
export type PendingLog = PlacedLog

/** The price a transaction pays per gas in a block with this base fee (EIP-1559; `gasPrice` before it). */
export function effectiveGasPrice(fields: Record<string, unknown>, baseFee: bigint): bigint {
  if (fields.maxFeePerGas !== undefined) {
    const maxFee = BigInt(fields.maxFeePerGas as Hex)
    const tip = BigInt(fields.maxPriorityFeePerGas as Hex)
    return maxFee < baseFee + tip ? maxFee : baseFee + tip
  }
  return BigInt((fields.gasPrice as Hex | undefined) ?? '0x0')
}

/**
 * Builds the RPC receipt of a pre-confirmed transaction from the feed's consensus receipt and the block
 * context: what a node derives when it seals the block (gas used from the cumulative figures, effective gas
 * price, created contract, log indexes, bloom), with the pending block hash.
 */
export function buildPendingReceipt(options: {
  transaction: PendingTransaction
  receipt: FeedReceipt
  firstLogIndex: number
  previousCumulativeGasUsed: bigint
  block: PendingBlockContext
}): PendingReceipt {
  const { transaction, receipt, firstLogIndex, previousCumulativeGasUsed, block } = options
  const transactionIndex = transaction.index
  const logs: PendingLog[] = receipt.logs.map((log, offset) => ({
    address: log.address,
    topics: log.topics,
    data: log.data,
    blockHash: PENDING_BLOCK_HASH,
    blockNumber: toQuantity(block.number),
    blockTimestamp: toQuantity(block.timestamp),
    transactionHash: transaction.hash,
    transactionIndex: toQuantity(transactionIndex),
    logIndex: toQuantity(firstLogIndex + offset),
    removed: false,
  }))
  // A deposit's envelope has no nonce: the one it created its contract at is the receipt's `depositNonce`.
  const { depositNonce } = receipt.extra
  const creatorNonce =
    transaction.type !== 0x7e ? BigInt(transaction.nonce) : typeof depositNonce === 'string' || typeof depositNonce === 'number' ? BigInt(depositNonce) : null
  const created = transaction.to === null && creatorNonce !== null
  return {
    type: toQuantity(receipt.type),
    status: toQuantity(receipt.status),
    cumulativeGasUsed: toQuantity(receipt.cumulativeGasUsed),
    logs,
    logsBloom: logsBloom(receipt.logs),
    transactionHash: transaction.hash,
    transactionIndex: toQuantity(transactionIndex),
    blockHash: PENDING_BLOCK_HASH,
    blockNumber: toQuantity(block.number),
    gasUsed: toQuantity(receipt.cumulativeGasUsed - previousCumulativeGasUsed),
    effectiveGasPrice: toQuantity(effectiveGasPrice(transaction.fields, block.baseFeePerGas)),
    from: transaction.from,
    to: transaction.to,
    contractAddress: created ? getContractAddress({ from: transaction.from, nonce: creatorNonce! }).toLowerCase() : null,
    blobGasPrice: toQuantity(MIN_BLOB_BASE_FEE),
    blockTimestamp: toQuantity(block.timestamp),
    ...receipt.extra,
  }
}

/** How a node writes a `blockTimestamp`: anvil a receipt's as a JSON number and a transaction's as hex; some not at all. */
export type TimestampForm = 'number' | 'hex' | 'absent'

/**
 * How the node writes the fields that nodes write differently, learnt from its sealed objects: the pre-confirmed
 * receipts and transactions flashgate builds follow it. A part that is `null` is not known yet (written as built).
 */
export type NodeForm = {
  receiptTimestamp: TimestampForm | null
  /** Whether a receipt of a transaction without blobs has `blobGasPrice`: anvil writes it, reth and op-reth do not. */
  receiptBlobGasPrice: boolean | null
  transactionTimestamp: TimestampForm | null
}

export function unknownNodeForm(): NodeForm {
  return { receiptTimestamp: null, receiptBlobGasPrice: null, transactionTimestamp: null }
}

function timestampForm(sealed: Record<string, unknown>): TimestampForm {
  if (!Object.hasOwn(sealed, 'blockTimestamp')) return 'absent'
  return typeof sealed.blockTimestamp === 'number' ? 'number' : 'hex'
}

const BLOB_TRANSACTION_TYPE = '0x3'

/** The parts of the node's form that sealed receipts and transactions (of one block, or any) tell. */
export function sealedForm(sealed: { receipts?: readonly Record<string, unknown>[]; transactions?: readonly unknown[] }): Partial<NodeForm> {
  const form: Partial<NodeForm> = {}
  const receipt = sealed.receipts?.[0]
  if (receipt !== undefined) form.receiptTimestamp = timestampForm(receipt)
  const withoutBlobs = sealed.receipts?.find((candidate) => candidate.type !== BLOB_TRANSACTION_TYPE)
  if (withoutBlobs !== undefined) form.receiptBlobGasPrice = Object.hasOwn(withoutBlobs, 'blobGasPrice')
  const transaction = sealed.transactions?.[0]
  if (typeof transaction === 'object' && transaction !== null) form.transactionTimestamp = timestampForm(transaction as Record<string, unknown>)
  return form
}

/** Sets the parts `learnt` tells; with `keep`, only those not known yet. */
export function learnForm(form: NodeForm, learnt: Partial<NodeForm>, keep = false): void {
  for (const key of Object.keys(learnt) as (keyof NodeForm)[]) {
    if (learnt[key] === undefined || (keep && form[key] !== null)) continue
    ;(form as Record<keyof NodeForm, unknown>)[key] = learnt[key]
  }
}

function withTimestamp<T extends Record<string, unknown>>(object: T, form: TimestampForm | null): T {
  if (form === null || !Object.hasOwn(object, 'blockTimestamp')) return object
  const { blockTimestamp, ...rest } = object
  if (form === 'absent') return rest as T
  if (form === 'number' && typeof blockTimestamp === 'string') return { ...rest, blockTimestamp: Number(blockTimestamp) } as unknown as T
  if (form === 'hex' && typeof blockTimestamp === 'number') return { ...rest, blockTimestamp: toQuantity(blockTimestamp) } as unknown as T
  return object
}

/** A receipt flashgate built, written as the node writes its own (the same object when it already is). */
export function receiptInNodeForm(receipt: PendingReceipt, form: NodeForm | null | undefined): PendingReceipt {
  if (form === null || form === undefined) return receipt
  const written = withTimestamp(receipt, form.receiptTimestamp)
  if (form.receiptBlobGasPrice !== false || written.type === BLOB_TRANSACTION_TYPE || !Object.hasOwn(written, 'blobGasPrice')) return written
  const { blobGasPrice: _, ...rest } = written
  return rest as PendingReceipt
}

/** A pre-confirmed transaction object, written as the node writes its own. */
export function transactionInNodeForm<T extends Record<string, unknown>>(transaction: T, form: NodeForm | null | undefined): T {
  return form === null || form === undefined ? transaction : withTimestamp(transaction, form.transactionTimestamp)
}

/**
 * A receipt from a flashblocks-aware upstream, as the pending view answers it: the node's own object with
 * the pending block hash (the upstream may already have sealed it). `null` when it is not the receipt of
 * this transaction in this block (the upstream sees another chain, or the block moved on).
 */
export function normaliseUpstreamReceipt(receipt: Record<string, unknown>, transaction: PendingTransaction, blockNumber: number): PendingReceipt | null {
  if (typeof receipt.transactionHash !== 'string' || receipt.transactionHash.toLowerCase() !== transaction.hash) return null
  if (typeof receipt.blockNumber !== 'string' || Number(receipt.blockNumber) !== blockNumber) return null
  if (!Array.isArray(receipt.logs)) return null
  const logs = (receipt.logs as Record<string, unknown>[]).map((log) => ({ ...log, blockHash: PENDING_BLOCK_HASH })) as unknown as PendingLog[]
  return { ...receipt, blockHash: PENDING_BLOCK_HASH, logs } as unknown as PendingReceipt
}

/**
 * Receipts as the index answers them: the upstream's receipt with its logs as `formatLog` (log.ts)
 * writes them, rendered once at ingest into `block_receipts` (ingest/block-data.ts).
 */

export type ReceiptRow = { transactionIndex: number; body: Record<string, unknown> }

/** Puts each log back into its receipt, at the `logs` key the upstream's receipt had. */
export function assemble(receipt: ReceiptRow, logs: LogRow[]): RpcTransactionReceipt {
  return { ...receipt.body, logs: logs.map(formatLog) } as unknown as RpcTransactionReceipt
}

/**
 * A block's receipts, each as the JSON text `eth_getBlockReceipts` answers, from its receipt rows (in index
 * order) and log rows, for `block_receipts` at ingest: the same texts `renderReceipts` builds from legacy rows.
 */
export function renderReceiptItems(receipts: ReceiptRow[], logs: LogRow[]): string[] {
  const logsByTransaction = new Map<number, LogRow[]>()
  for (const log of logs) {
    const transactionLogs = logsByTransaction.get(log.transactionIndex)
    if (transactionLogs === undefined) logsByTransaction.set(log.transactionIndex, [log])
    else transactionLogs.push(log)
  }
  return receipts.map((receipt) => JSON.stringify(assemble(receipt, logsByTransaction.get(receipt.transactionIndex) ?? [])))
}
