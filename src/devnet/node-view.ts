// The devnet's JSON-RPC as a flashblocks-aware Base node (base-reth-node) answers it, over an anvil whose
// `latest` is, between ticks, the pre-confirmed block N+1 on top of the sealed head N (sequencer.ts):
// `latest`, `safe`, `finalized` and an omitted block argument read N, `pending` reads N+1, a number above N
// is a block not built yet, and the pre-confirmed block's hash is nobody's: its transactions, receipts and
// logs carry the zero block hash, as base-reth-node's do.
// https://github.com/base/base/blob/main/crates/flashblocks-rpc/spec.md
import { type Hash, numberToHex } from 'viem'
import type { JsonRpcRequest, JsonRpcResponse } from './anvil-client.js'

/** anvil answers `safe` and `finalized` one and two epochs (of 32 slots) below its head. */
const ANVIL_SAFE_DEPTH = 32n
const ANVIL_FINALIZED_DEPTH = 64n
/** A block number no devnet reaches: anvil's answer for it is its answer for a block not built yet. */
const FUTURE_BLOCK_NUMBER = 2n ** 53n - 1n
/** A hash no block has: anvil's answer for it is its answer for an unknown block. */
const UNKNOWN_BLOCK_HASH: Hash = `0x${'ff'.repeat(32)}`
/** What Base's node puts in `blockHash` for a pre-confirmed receipt or log (a pre-confirmed transaction has `null`). */
export const PRECONFIRMED_BLOCK_HASH: Hash = `0x${'00'.repeat(32)}`
/** anvil's wording for a block above its head; the heights in it are anvil's, so they are rewritten. */
const BLOCK_OUT_OF_RANGE = /block height is (\d+) but requested was (\d+)/

/** The block anvil holds on top of the sealed head between ticks: what `pending` reads. */
export type PendingBlock = { number: bigint; hash: Hash }

/**
 * Every method with a block argument that a wallet, an indexer or flashgate's ingester sends: its
 * position; whether leaving it out means `latest` (then it is filled in, so anvil's own default, which is
 * its head, never applies); whether it ends a range (eth_feeHistory's newest block).
 */
const BLOCK_ARGUMENTS: Record<string, { index: number; optional?: true; rangeEnd?: true }> = {
  eth_getBalance: { index: 1, optional: true },
  eth_getTransactionCount: { index: 1, optional: true },
  eth_getCode: { index: 1, optional: true },
  eth_getStorageAt: { index: 2, optional: true },
  eth_getAccount: { index: 1, optional: true },
  eth_getAccountInfo: { index: 1, optional: true },
  eth_getProof: { index: 2, optional: true },
  eth_call: { index: 1, optional: true },
  eth_estimateGas: { index: 1, optional: true },
  eth_createAccessList: { index: 1, optional: true },
  eth_simulateV1: { index: 1, optional: true },
  debug_traceCall: { index: 1, optional: true },
  trace_call: { index: 2, optional: true },
  trace_callMany: { index: 1, optional: true },
  eth_feeHistory: { index: 1, rangeEnd: true },
  eth_getBlockByNumber: { index: 0 },
  eth_getBlockByHash: { index: 0 },
  eth_getBlockReceipts: { index: 0 },
  eth_getBlockTransactionCountByNumber: { index: 0 },
  eth_getBlockTransactionCountByHash: { index: 0 },
  eth_getTransactionByBlockNumberAndIndex: { index: 0 },
  eth_getTransactionByBlockHashAndIndex: { index: 0 },
  eth_getUncleCountByBlockNumber: { index: 0 },
  eth_getUncleCountByBlockHash: { index: 0 },
  eth_getUncleByBlockNumberAndIndex: { index: 0 },
  eth_getUncleByBlockHashAndIndex: { index: 0 },
  debug_traceBlockByNumber: { index: 0 },
  debug_traceBlockByHash: { index: 0 },
  trace_block: { index: 0 },
  trace_replayBlockTransactions: { index: 0 },
}
/** Methods whose first argument is a filter: a block range (`fromBlock`, `toBlock`) or a `blockHash`. */
const BLOCK_RANGE_METHODS = new Set(['eth_getLogs', 'trace_filter'])

type Translation = {
  pending: PendingBlock | undefined
  /** The first block number above the sealed head that was asked for, sent to anvil as FUTURE_BLOCK_NUMBER. */
  futureAsked?: bigint
}

/** One read through anvil, asked and answered as the node would. */
export async function readAsNode(
  request: JsonRpcRequest,
  pending: PendingBlock | undefined,
  send: (request: JsonRpcRequest) => Promise<JsonRpcResponse>,
): Promise<JsonRpcResponse> {
  if (request.method === 'eth_blockNumber' && pending !== undefined) {
    return { jsonrpc: '2.0', id: request.id ?? null, result: numberToHex(pending.number - 1n) }
  }
  const translation: Translation = { pending }
  const response = await send(toAnvilRequest(request, translation))
  return toNodeResponse(response, translation)
}

function toAnvilRequest(request: JsonRpcRequest, translation: Translation): JsonRpcRequest {
  if (!Array.isArray(request.params)) return request
  const params = [...(request.params as unknown[])]
  if (BLOCK_RANGE_METHODS.has(request.method)) {
    if (typeof params[0] !== 'object' || params[0] === null) return request
    params[0] = toAnvilFilter(params[0] as Record<string, unknown>, translation)
    return { ...request, params }
  }
  const argument = BLOCK_ARGUMENTS[request.method]
  if (argument === undefined) return request
  const { index, optional, rangeEnd } = argument
  const omitted = params[index] === undefined || params[index] === null
  // Arguments before the block one are missing: anvil answers that in its own words.
  if (params.length < index || (omitted && !optional)) return request
  params[index] = toAnvilBlock(omitted ? 'latest' : params[index], translation, rangeEnd ? 'rangeEnd' : 'point')
  return { ...request, params }
}

function toAnvilFilter(filter: Record<string, unknown>, translation: Translation): Record<string, unknown> {
  if (typeof filter.blockHash === 'string') return { ...filter, blockHash: toAnvilBlock(filter.blockHash, translation, 'point') }
  return {
    ...filter,
    fromBlock: toAnvilBlock(filter.fromBlock ?? 'latest', translation, 'point'),
    toBlock: toAnvilBlock(filter.toBlock ?? 'latest', translation, 'rangeEnd'),
  }
}

/**
 * A block argument (tag, number, hash or EIP-1898 object) as anvil must see it. A range's end above the
 * sealed head is the sealed head, as anvil ends a log range at its head; any other number above it is a
 * block not built yet. https://eips.ethereum.org/EIPS/eip-1898
 */
function toAnvilBlock(value: unknown, translation: Translation, role: 'point' | 'rangeEnd'): unknown {
  const { pending } = translation
  if (typeof value === 'object' && value !== null) {
    const { blockNumber, blockHash } = value as { blockNumber?: unknown; blockHash?: unknown }
    if (blockHash !== undefined) return { ...value, blockHash: toAnvilBlock(blockHash, translation, role) }
    if (blockNumber !== undefined) return { ...value, blockNumber: toAnvilBlock(blockNumber, translation, role) }
    return value
  }
  if (typeof value !== 'string') return value
  // anvil's own `pending` would execute its whole pool; a Base node's is what the flashblocks pre-confirmed.
  if (value === 'pending') return 'latest'
  if (pending === undefined) return value
  const sealed = pending.number - 1n
  if (value === 'latest') return numberToHex(sealed)
  if (value === 'safe') return numberToHex(atLeastZero(sealed - ANVIL_SAFE_DEPTH))
  if (value === 'finalized') return numberToHex(atLeastZero(sealed - ANVIL_FINALIZED_DEPTH))
  if (/^0x[0-9a-fA-F]{64}$/.test(value)) return value.toLowerCase() === pending.hash.toLowerCase() ? UNKNOWN_BLOCK_HASH : value
  if (!/^0x[0-9a-fA-F]{1,16}$/.test(value) || BigInt(value) <= sealed) return value
  if (role === 'rangeEnd') return numberToHex(sealed)
  translation.futureAsked ??= BigInt(value)
  return numberToHex(FUTURE_BLOCK_NUMBER)
}

function toNodeResponse(response: JsonRpcResponse, { pending, futureAsked }: Translation): JsonRpcResponse {
  if (pending === undefined) return response
  if (response.error) {
    const match = BLOCK_OUT_OF_RANGE.exec(response.error.message)
    if (match === null) return response
    const requested = BigInt(match[2]!) === FUTURE_BLOCK_NUMBER && futureAsked !== undefined ? futureAsked : match[2]
    const message = response.error.message.replace(BLOCK_OUT_OF_RANGE, `block height is ${pending.number - 1n} but requested was ${requested}`)
    return { ...response, error: { ...response.error, message } }
  }
  hidePendingBlockHash(response.result, pending.hash)
  return response
}

/**
 * Rewrites, in place, every `blockHash` that names the pending block, as Base's node writes it for what is in
 * no sealed block yet: `null` in a pre-confirmed transaction (an object with `input`), the zero hash in a
 * receipt or a log. The pending block's own `hash` stays.
 */
export function hidePendingBlockHash<T>(value: T, pendingHash: Hash): T {
  if (Array.isArray(value)) {
    for (const item of value) hidePendingBlockHash(item, pendingHash)
  } else if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>
    for (const [key, field] of Object.entries(record)) {
      if (key === 'blockHash' && field === pendingHash) record[key] = 'input' in record ? null : PRECONFIRMED_BLOCK_HASH
      else if (typeof field === 'object') hidePendingBlockHash(field, pendingHash)
    }
  }
  return value
}

const atLeastZero = (value: bigint): bigint => (value < 0n ? 0n : value)
