import { MerklePatriciaTrie } from '@ethereumjs/mpt'
import { type Hash, type Hex, hexToBytes, keccak256, toRlp } from 'viem'
import type { PendingBlock } from '../pending/state.js'
import { PENDING_BLOCK_HASH } from './receipt.js'
import { toQuantity } from '../codecs/index.js'

/** keccak256 of the RLP of an empty list: every post-merge block's `sha3Uncles`. */
const EMPTY_UNCLES_HASH: Hash = keccak256(toRlp([]))
/** sha256 of no requests (EIP-7685): an OP-Stack or devnet block's `requestsHash`. */
const EMPTY_REQUESTS_HASH: Hash = '0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
/** The root of an empty trie: a block without withdrawals. */
const EMPTY_TRIE_ROOT: Hash = '0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421'
const ZERO_BLOOM: Hex = `0x${'00'.repeat(256)}`
/** EIP-4844 blob gas target per block since Prague (EIP-7691); only matters for a chain that carries blobs. */
const BLOB_GAS_TARGET = 786_432n
/** An OP-Stack deposit transaction's type (the L1-info deposit opens every OP-Stack block). */
const DEPOSIT_TYPE = 0x7e

/** Header fields in RLP order (Yellow Paper §4.3, then each fork's additions, each optional from `withdrawalsRoot` on). */
const HEADER_FIELDS = [
  'parentHash',
  'sha3Uncles',
  'miner',
  'stateRoot',
  'transactionsRoot',
  'receiptsRoot',
  'logsBloom',
  'difficulty',
  'number',
  'gasLimit',
  'gasUsed',
  'timestamp',
  'extraData',
  'mixHash',
  'nonce',
  'baseFeePerGas',
  'withdrawalsRoot',
  'blobGasUsed',
  'excessBlobGas',
  'parentBeaconBlockRoot',
  'requestsHash',
] as const
const QUANTITY_FIELDS = new Set(['difficulty', 'number', 'gasLimit', 'gasUsed', 'timestamp', 'baseFeePerGas', 'blobGasUsed', 'excessBlobGas'])

/** A quantity as RLP wants it: minimal big-endian bytes, none for zero. */
function quantityHex(value: unknown): Hex {
  const number = BigInt(value as string | bigint)
  if (number === 0n) return '0x'
  const digits = number.toString(16)
  return `0x${digits.length % 2 === 0 ? digits : `0${digits}`}`
}

/** The RLP of a header given as an RPC block (the fields it has, in consensus order). */
function headerRlp(header: Record<string, unknown>): Hex {
  const items: Hex[] = []
  for (const field of HEADER_FIELDS) {
    const value = header[field]
    if (value === undefined || value === null) break
    items.push(QUANTITY_FIELDS.has(field) ? quantityHex(value) : (value as Hex))
  }
  return toRlp(items)
}

/** Bytes of the RLP header of an item of `length` bytes (a string, or a list's payload). */
function rlpHeaderBytes(length: number, single?: number): number {
  if (single !== undefined && length === 1 && single < 0x80) return 0
  return length < 56 ? 1 : 1 + Math.ceil(length.toString(16).length / 2)
}

/**
 * How a node counts a block's `size`: the RLP of header, transactions and uncles, and (geth, reth) the
 * withdrawals list, which anvil leaves out. Learnt from a sealed block (see `countsWithdrawals`).
 */
export type SizeConvention = { countsWithdrawals: boolean }

/** The block's RLP size from its header RLP, its raw transactions and its withdrawals. */
function blockSize(header: Hex, transactions: { raw: Hex; type: number }[], withdrawals: Record<string, unknown>[], convention: SizeConvention): number {
  let transactionBytes = 0
  for (const transaction of transactions) {
    const bytes = (transaction.raw.length - 2) / 2
    // A legacy transaction is an RLP list already; a typed one is a byte string (EIP-2718).
    transactionBytes += transaction.type === 0 ? bytes : rlpHeaderBytes(bytes, Number.parseInt(transaction.raw.slice(2, 4), 16)) + bytes
  }
  const withdrawalBytes = withdrawals.reduce((sum: number, withdrawal) => {
    const item = toRlp([quantityHex(withdrawal.index), quantityHex(withdrawal.validatorIndex), withdrawal.address as Hex, quantityHex(withdrawal.amount)])
    return sum + (item.length - 2) / 2
  }, 0)
  const lists = [transactionBytes, 0, ...(convention.countsWithdrawals ? [withdrawalBytes] : [])]
  const payload = (header.length - 2) / 2 + lists.reduce((sum, length) => sum + rlpHeaderBytes(length) + length, 0)
  return rlpHeaderBytes(payload) + payload
}

/**
 * Whether the node counts withdrawals in `size`, read off a sealed block whose transactions were all
 * pre-confirmed (their raw bytes are known); `null` when the block does not tell.
 */
export function countsWithdrawals(sealed: Record<string, unknown>, pending: PendingBlock): boolean | null {
  const hashes = sealed.transactions as (Hash | { hash: Hash })[] | undefined
  if (hashes === undefined || hashes.length !== pending.transactions.length || typeof sealed.size !== 'string') return null
  if (hashes.some((entry, index) => (typeof entry === 'string' ? entry : entry.hash) !== pending.transactions[index]!.hash)) return null
  const header = headerRlp(sealed)
  const withdrawals = (sealed.withdrawals as Record<string, unknown>[] | undefined) ?? []
  const size = Number(sealed.size)
  if (blockSize(header, pending.transactions, withdrawals, { countsWithdrawals: true }) === size) return true
  if (blockSize(header, pending.transactions, withdrawals, { countsWithdrawals: false }) === size) return false
  return null
}

/**
 * The ordered trie of a pending block's transactions, kept from one version to the next: a flashblock
 * adds transactions at the end (and receipts arriving change the version but no transaction), so the trie
 * takes only the new ones. Measured in `npm run bench -- --follow` (Base's shape, the pending block asked
 * for at every version): rebuilding the whole trie each time was ~7% of the gateway's CPU.
 */
type TransactionsTrie = {
  version: number
  /** The transactions it holds, by hash, in block order: a block whose list is no longer an extension of these is rebuilt. */
  hashes: Hash[]
  trie: MerklePatriciaTrie
  root: Promise<Hash>
}
const transactionsTries = new WeakMap<PendingBlock, TransactionsTrie>()

/** The ordered trie root of the block's transactions so far (Yellow Paper §4.3), computed once per version. */
export function transactionsRoot(block: PendingBlock): Promise<Hash> {
  const kept = transactionsTries.get(block)
  if (kept !== undefined && kept.version === block.version) return kept.root
  const { transactions } = block
  const extended =
    kept !== undefined && kept.hashes.length <= transactions.length && kept.hashes.every((hash, position) => transactions[position]!.hash === hash)
  const added = transactions.slice(extended ? kept.hashes.length : 0)
  const trie = extended ? kept.trie : new MerklePatriciaTrie()
  // Puts on one trie run one after the other: each version's after the version before it.
  const root = (extended ? kept.root : Promise.resolve()).then(async () => {
    for (const transaction of added) await trie.put(hexToBytes(toRlp(quantityHex(BigInt(transaction.index)))), hexToBytes(transaction.raw))
    return `0x${Buffer.from(trie.root()).toString('hex')}` as Hash
  })
  const next: TransactionsTrie = { version: block.version, hashes: transactions.map((transaction) => transaction.hash), trie, root }
  transactionsTries.set(block, next)
  // A failure is not kept: the next version asked for rebuilds the trie from the first transaction.
  root.catch(() => {
    if (transactionsTries.get(block) === next) transactionsTries.delete(block)
  })
  return root
}

/**
 * The pre-confirmed block as a node answers `eth_getBlockByNumber("pending")`: header fields from the
 * flashblocks (base at index 0, roots, bloom, gas and block hash from the latest diff), the ones every
 * post-merge block has (`sha3Uncles`, `difficulty`, `nonce`, `uncles`), the transactions root and size
 * computed, and the optional fields the parent block has (withdrawals, blobs, beacon root, requests).
 */
/**
 * The positions taken in each formatted pending block, undecodable transactions included: its `transactions`
 * list holds only those a decoder knows, and a node's count (`eth_getBlockTransactionCountByNumber`) holds all.
 */
const pendingTransactionCounts = new WeakMap<object, number>()

/** How many transactions a formatted block holds: its list's length, or a pending block's count of positions. */
export function transactionCountOf(block: { transactions: readonly unknown[] }): number {
  return pendingTransactionCounts.get(block) ?? block.transactions.length
}

export async function formatPendingBlock(
  block: PendingBlock,
  options: {
    includeTransactions: boolean
    parent: Record<string, unknown> | null
    convention: SizeConvention
    formatTransaction: (block: PendingBlock, position: number) => Record<string, unknown>
  },
): Promise<Record<string, unknown>> {
  const { header } = block
  const { parent } = options
  const has = (field: string) => parent === null || field in parent
  const parentBlobGas =
    parent === null ? 0n : BigInt((parent.excessBlobGas as Hex | undefined) ?? '0x0') + BigInt((parent.blobGasUsed as Hex | undefined) ?? '0x0')
  const answer: Record<string, unknown> = {
    // Zeros, as Base's node answers: the sealed block's hash is not known before it seals, and a feed's
    // `block_hash` is not it (Base's builder hashes each flashblock's header with a zero state root).
    hash: PENDING_BLOCK_HASH,
    parentHash: header.parentHash,
    sha3Uncles: EMPTY_UNCLES_HASH,
    miner: header.feeRecipient,
    stateRoot: header.stateRoot ?? PENDING_BLOCK_HASH,
    transactionsRoot: await transactionsRoot(block),
    receiptsRoot: header.receiptsRoot ?? PENDING_BLOCK_HASH,
    logsBloom: header.logsBloom ?? ZERO_BLOOM,
    difficulty: '0x0',
    number: toQuantity(block.number),
    gasLimit: toQuantity(header.gasLimit),
    gasUsed: toQuantity(header.gasUsed ?? block.cumulativeGasUsed),
    timestamp: toQuantity(header.timestamp),
    extraData: header.extraData,
    mixHash: header.prevRandao ?? PENDING_BLOCK_HASH,
    nonce: '0x0000000000000000',
    baseFeePerGas: toQuantity(header.baseFeePerGas),
  }
  if (has('withdrawalsRoot')) answer.withdrawalsRoot = header.withdrawalsRoot ?? EMPTY_TRIE_ROOT
  if (has('blobGasUsed')) answer.blobGasUsed = toQuantity(header.blobGasUsed ?? 0n)
  // An OP-Stack block (its first transaction the L1-info deposit) has none: zero, as its sealed blocks have, though
  // since Jovian its `blobGasUsed` counts data-availability use. Otherwise EIP-4844's rule.
  const opStack = block.transactions[0]?.type === DEPOSIT_TYPE
  if (has('excessBlobGas')) answer.excessBlobGas = toQuantity(!opStack && parentBlobGas > BLOB_GAS_TARGET ? parentBlobGas - BLOB_GAS_TARGET : 0n)
  if (has('parentBeaconBlockRoot')) answer.parentBeaconBlockRoot = header.parentBeaconBlockRoot ?? PENDING_BLOCK_HASH
  if (parent !== null && 'requestsHash' in parent) answer.requestsHash = EMPTY_REQUESTS_HASH
  if (parent !== null && 'totalDifficulty' in parent) answer.totalDifficulty = parent.totalDifficulty
  answer.size = toQuantity(blockSize(headerRlp(answer), block.transactions, header.withdrawals, options.convention))
  answer.uncles = []
  answer.transactions = options.includeTransactions
    ? block.transactions.map((_, position) => options.formatTransaction(block, position))
    : block.transactions.map((transaction) => transaction.hash)
  if (has('withdrawals')) answer.withdrawals = header.withdrawals
  pendingTransactionCounts.set(answer, block.transactionCount)
  return answer
}
