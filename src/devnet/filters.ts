import type { Hash, Hex } from 'viem'
import { newQuantityId } from '../codecs/quantity-id.js'
import type { JsonRpcRequest, JsonRpcResponse } from './anvil-client.js'

// The devnet's stateful filters, as a node keeps them: over the sealed chain and the transactions it
// accepted. anvil's own filters would see every speculative block the sequencer mines and reverts each tick
// (a block filter heard ten hashes a block, a pending-transaction filter the same transaction again at each
// tick: 332 hashes for 62 transactions), so the devnet answers these methods itself.

export const FILTER_METHODS = new Set([
  'eth_newFilter',
  'eth_newBlockFilter',
  'eth_newPendingTransactionFilter',
  'eth_getFilterChanges',
  'eth_getFilterLogs',
  'eth_uninstallFilter',
])

/** A filter not polled for this long is gone, as in geth. */
const FILTER_TIMEOUT_MS = 5 * 60_000
/** Transactions a pending-transaction filter keeps between polls; older ones are dropped first. */
const MAX_PENDING_HASHES = 10_000
/** Filters the devnet keeps at once; installing one more drops the least recently polled. */
const MAX_FILTERS = 1_000

type Filter =
  | { kind: 'blocks'; after: bigint; polledAt: number }
  | { kind: 'logs'; criteria: Record<string, unknown>; after: bigint; polledAt: number }
  | { kind: 'transactions'; hashes: Hash[]; polledAt: number }

type Read = <value>(method: string, params: unknown[]) => Promise<value>

const FILTER_NOT_FOUND = { code: -32000, message: 'filter not found' }
const INVALID_PARAMS = -32602

/** `read` answers as the devnet's node view does (sealed head as `latest`, the zero hash for pre-confirmed items). */
export function createNodeFilters({ read, now = Date.now }: { read: Read; now?: () => number }) {
  const filters = new Map<string, Filter>()

  const sealedHead = async () => BigInt(await read<Hex>('eth_blockNumber', []))

  function install(filter: Filter): Hex {
    for (const [id, old] of filters) if (now() - old.polledAt > FILTER_TIMEOUT_MS) filters.delete(id)
    if (filters.size >= MAX_FILTERS) filters.delete(filters.keys().next().value!)
    const id = newQuantityId()
    filters.set(id, filter)
    return id
  }

  function found(id: unknown): Filter | undefined {
    const filter = typeof id === 'string' ? filters.get(id.toLowerCase()) : undefined
    if (filter === undefined) return undefined
    if (now() - filter.polledAt > FILTER_TIMEOUT_MS) {
      filters.delete((id as string).toLowerCase())
      return undefined
    }
    // Polled last: the least recently polled is dropped first.
    filters.delete((id as string).toLowerCase())
    filters.set((id as string).toLowerCase(), filter)
    filter.polledAt = now()
    return filter
  }

  /** The sealed blocks after the filter's last poll up to the head (a head that went back starts it over there). */
  async function newBlocks(filter: { after: bigint }): Promise<{ from: bigint; to: bigint } | null> {
    const head = await sealedHead()
    if (head < filter.after) filter.after = head
    if (head === filter.after) return null
    const range = { from: filter.after + 1n, to: head }
    filter.after = head
    return range
  }

  async function changes(filter: Filter): Promise<unknown[]> {
    if (filter.kind === 'transactions') return filter.hashes.splice(0)
    const range = await newBlocks(filter)
    if (range === null) return []
    if (filter.kind === 'blocks') {
      const blocks = []
      for (let number = range.from; number <= range.to; number++)
        blocks.push(read<{ hash: Hash } | null>('eth_getBlockByNumber', [`0x${number.toString(16)}`, false]))
      return (await Promise.all(blocks)).flatMap((block) => (block === null ? [] : [block.hash]))
    }
    const { fromBlock, toBlock, blockHash } = filter.criteria
    if (typeof blockHash === 'string') return []
    const bounded = (value: unknown, bound: bigint, pick: (a: bigint, b: bigint) => bigint) =>
      typeof value === 'string' && /^0x[0-9a-fA-F]+$/.test(value) ? pick(BigInt(value), bound) : bound
    const from = bounded(fromBlock, range.from, (a, b) => (a > b ? a : b))
    const to = bounded(toBlock, range.to, (a, b) => (a < b ? a : b))
    if (from > to) return []
    return read('eth_getLogs', [{ ...filter.criteria, fromBlock: `0x${from.toString(16)}`, toBlock: `0x${to.toString(16)}` }])
  }

  async function answer(request: JsonRpcRequest): Promise<unknown> {
    const params = Array.isArray(request.params) ? (request.params as unknown[]) : []
    switch (request.method) {
      case 'eth_newBlockFilter':
        return install({ kind: 'blocks', after: await sealedHead(), polledAt: now() })
      case 'eth_newPendingTransactionFilter':
        return install({ kind: 'transactions', hashes: [], polledAt: now() })
      case 'eth_newFilter': {
        const [criteria] = params
        if (typeof criteria !== 'object' || criteria === null || Array.isArray(criteria))
          throw { code: INVALID_PARAMS, message: 'missing value for required argument 0' }
        // The criteria are checked as eth_getLogs checks them, on the head block.
        await read('eth_getLogs', [{ ...criteria, fromBlock: 'latest', toBlock: 'latest', blockHash: undefined }])
        return install({ kind: 'logs', criteria: criteria as Record<string, unknown>, after: await sealedHead(), polledAt: now() })
      }
      case 'eth_getFilterChanges': {
        const filter = found(params[0])
        if (filter === undefined) throw FILTER_NOT_FOUND
        return changes(filter)
      }
      case 'eth_getFilterLogs': {
        const filter = found(params[0])
        if (filter === undefined || filter.kind !== 'logs') throw FILTER_NOT_FOUND
        return read('eth_getLogs', [filter.criteria])
      }
      case 'eth_uninstallFilter':
        return typeof params[0] === 'string' && filters.delete(params[0].toLowerCase())
    }
    throw { code: -32601, message: `the method ${request.method} does not exist/is not available` }
  }

  return {
    /** One of FILTER_METHODS, answered as a node answers it. */
    async handle(request: JsonRpcRequest): Promise<JsonRpcResponse> {
      const id = request.id ?? null
      try {
        return { jsonrpc: '2.0', id, result: await answer(request) }
      } catch (error) {
        if (typeof error === 'object' && error !== null && 'code' in error && 'message' in error)
          return { jsonrpc: '2.0', id, error: error as { code: number; message: string } }
        throw error
      }
    },
    /** A transaction the devnet accepted: every pending-transaction filter reports it once. */
    accepted(hash: Hash): void {
      for (const filter of filters.values()) {
        if (filter.kind !== 'transactions') continue
        filter.hashes.push(hash)
        if (filter.hashes.length > MAX_PENDING_HASHES) filter.hashes.shift()
      }
    },
  }
}
