import { LRUCache } from 'lru-cache'
import type { Hash, RpcBlock, RpcTransaction, RpcTransactionReceipt } from 'viem'
import { toQuantity } from '../codecs/index.js'
import type { HistoryMode } from '../config.js'
import { HistoryUnavailableError, UpstreamError } from '../errors.js'
import { type Upstream, UpstreamAnswerTooLargeError, type UpstreamRequestOptions } from '../upstream/index.js'
import { type AnswerCache, blockBytes } from './cache.js'
import type { ChainState } from './chain.js'

// Reads below the index's first block: answered from the upstream (one complete chain), or refused clearly.

/**
 * A hash the upstream did not place below the index is not asked about again for this long: a client
 * polling for a transaction that does not exist (yet) costs the upstream one round trip, not one per poll.
 * Safe to remember: the index, which is read before history, finds anything mined after the answer.
 */
const UNKNOWN_HASH_MS = 30_000
const MAX_UNKNOWN_HASHES = 10_000

/** What reaches below the index, by method, for `/metrics`. */
export type HistoryReads = Record<string, number>

/**
 * Blocks, transactions and receipts older than the index's first block (it starts at `--start-block`):
 * answered from the upstream node, so that a client sees one complete chain (`--history upstream`, the
 * default), or refused with an error naming the first indexed block (`--history refuse`) — never a
 * silent `null`. Only what lies below the index is taken from the upstream: an answer from a block the
 * index holds, or above it, is not (the index is the authority there).
 */
export function createHistory({ upstream, mode, chain, cache }: { upstream: Upstream | null; mode: HistoryMode; chain: ChainState; cache: AnswerCache }) {
  const reads: HistoryReads = {}
  const unknownHashes = new LRUCache<string, true>({ max: MAX_UNKNOWN_HASHES, ttl: UNKNOWN_HASH_MS })

  /** The upstream's object for a hash, if it lies below the index; a miss is remembered (UNKNOWN_HASH_MS). */
  async function byHash<value extends { blockNumber?: unknown } | { number?: unknown }>(
    method: string,
    params: unknown[],
    first: number,
  ): Promise<value | null> {
    const key = `${method}:${String(params[0]).toLowerCase()}:${first}`
    if (unknownHashes.has(key)) return null
    const found = belowIndex(await ask<value | null>(method, params), first)
    if (found === null) unknownHashes.set(key, true)
    return found
  }

  async function firstBlock(): Promise<number> {
    return (await chain.view()).firstBlock ?? 0
  }

  function refusal(first: number): HistoryUnavailableError {
    return new HistoryUnavailableError(
      `history before block ${toQuantity(first)} is not indexed here (--history refuse); ask for blocks from ${toQuantity(first)}`,
    )
  }

  async function ask<value>(method: string, params: unknown[], options?: UpstreamRequestOptions): Promise<value> {
    if (upstream === null) throw new UpstreamError('history before the index needs an upstream')
    reads[method] = (reads[method] ?? 0) + 1
    try {
      return await upstream.request<value>(method, params, options)
    } catch (error) {
      if (error instanceof UpstreamAnswerTooLargeError) throw error
      throw new UpstreamError(`upstream ${method} failed`, { cause: error })
    }
  }

  /** An object the upstream placed in a block, if that block is below the index; otherwise `null`. */
  function belowIndex<value extends { blockNumber?: unknown } | { number?: unknown }>(answer: value | null, first: number): value | null {
    if (answer === null) return null
    const number = 'blockNumber' in answer ? answer.blockNumber : 'number' in answer ? answer.number : null
    return typeof number === 'string' && Number(number) < first ? answer : null
  }

  /** A block below the index, by number. */
  async function block(number: number, includeTransactions: boolean): Promise<RpcBlock | null> {
    const first = await firstBlock()
    if (mode === 'refuse') throw refusal(first)
    return cache.remember(
      `history-block:${number}:${includeTransactions}`,
      () => ask<RpcBlock | null>('eth_getBlockByNumber', [toQuantity(number), includeTransactions]),
      blockBytes,
    )
  }

  /** A block the index does not know by this hash: the upstream's, if it lies below the index. */
  async function blockByHash(hash: Hash, includeTransactions: boolean): Promise<RpcBlock | null> {
    const first = await firstBlock()
    if (first === 0) return null
    if (mode === 'refuse') return null
    return byHash<RpcBlock>('eth_getBlockByHash', [hash, includeTransactions], first)
  }

  return {
    mode,
    reads,
    block,
    blockByHash,
    /**
     * The number of a block below the index by its hash, if it is the canonical block at that height (a state
     * read by number is then the same read); `null` otherwise, and with `--history refuse`.
     */
    async canonicalNumberOf(hash: Hash): Promise<number | null> {
      const found = await blockByHash(hash, false)
      if (found === null) return null
      const number = Number(found.number)
      return (await block(number, false))?.hash === found.hash ? number : null
    },
    /** The receipts of a block below the index. */
    async blockReceipts(number: number): Promise<RpcTransactionReceipt[] | null> {
      const first = await firstBlock()
      if (mode === 'refuse') throw refusal(first)
      return ask<RpcTransactionReceipt[] | null>('eth_getBlockReceipts', [toQuantity(number)])
    },
    /**
     * A transaction the index and the pending view do not have: the upstream's, if mined below the index or
     * still in its pool (sent through another endpoint, queued behind a nonce gap, or forwarded here long ago),
     * as a node's `eth_getTransactionByHash` finds it there. A hash it does not know is remembered, as by
     * `byHash`; a pool lookup the upstream cannot answer is `null`, the index's answer.
     */
    async transaction(hash: Hash): Promise<RpcTransaction | null> {
      if (upstream === null) return null
      const first = await firstBlock()
      const history = first > 0 && mode !== 'refuse'
      const key = `eth_getTransactionByHash:${hash.toLowerCase()}:${first}`
      if (unknownHashes.has(key)) return null
      let found: RpcTransaction | null
      try {
        found = await ask<RpcTransaction | null>('eth_getTransactionByHash', [hash])
      } catch (error) {
        if (history) throw error
        return null
      }
      if (found === null) unknownHashes.set(key, true)
      if (found === null || found.blockNumber === null) return found
      // Mined: from the upstream only below the index (the index is the authority from its first block on).
      return history ? belowIndex(found, first) : null
    },
    async receipt(hash: Hash): Promise<RpcTransactionReceipt | null> {
      const first = await firstBlock()
      if (first === 0 || mode === 'refuse') return null
      return byHash<RpcTransactionReceipt>('eth_getTransactionReceipt', [hash], first)
    },
    /**
     * Logs of a range that ends below the index. With `maxBytes` (the caller's byte bound), an answer that
     * passes it is not read further: `UpstreamAnswerTooLargeError`.
     */
    async logs(filter: Record<string, unknown>, fromNumber: number, toNumber: number, maxBytes?: number): Promise<unknown[]> {
      const first = await firstBlock()
      if (mode === 'refuse') throw refusal(first)
      const params = [{ ...filter, fromBlock: toQuantity(fromNumber), toBlock: toQuantity(toNumber) }]
      return ask<unknown[]>('eth_getLogs', params, { maxResponseBytes: maxBytes })
    },
    /** Logs of one block below the index, asked by its hash. */
    async logsOfBlock(filter: Record<string, unknown>, blockHash: Hash, maxBytes?: number): Promise<unknown[]> {
      const first = await firstBlock()
      if (mode === 'refuse') throw refusal(first)
      return ask<unknown[]>('eth_getLogs', [{ ...filter, blockHash }], { maxResponseBytes: maxBytes })
    },
    /**
     * The header of a block's uncle, which the index does not keep: the upstream's, asked by the hash of the
     * block that names it (so it is the same answer whatever the upstream's head). Cached: it never changes.
     */
    async uncle(blockHash: Hash, index: bigint): Promise<RpcBlock | null> {
      return cache.remember(
        `uncle:${blockHash.toLowerCase()}:${index}`,
        () => ask<RpcBlock | null>('eth_getUncleByBlockHashAndIndex', [blockHash, toQuantity(index)]),
        blockBytes,
      )
    },
    refusal,
  }
}

export type History = ReturnType<typeof createHistory>
