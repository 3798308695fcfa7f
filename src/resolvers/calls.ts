import type { Hash, Hex } from 'viem'
import { type CallParams, type CallRequest, toQuantity } from '../codecs/index.js'
import { UpstreamError } from '../errors.js'
import type { PendingBlock } from '../pending/index.js'
import type { AccessListResult, CallKind } from '../pending/execute/call.js'
import type { Upstream } from '../upstream/index.js'
import type { ChainState } from './chain.js'
import type { PendingView } from './pending.js'
import type { Forward } from './send.js'

/** Runs a call on the state a pending block's executed transactions left; `null` when it cannot (src/pending/execute). */
export type PendingCalls = {
  call(block: PendingBlock, kind: CallKind, request: CallRequest): Promise<Hex | AccessListResult | null>
}

/**
 * How far the index may trail the node's head and still follow it: it takes a block a moment after the node,
 * and `eth_syncing` should not flicker at each one.
 */
export const SYNCING_LAG_BLOCKS = 2

/**
 * `eth_call`, `eth_estimateGas` and `eth_createAccessList`: forwarded to the upstream as they were sent,
 * except at `pending` when this process executes the flashblocks (`--pending-source execute`, on the process
 * that holds the feed): then they run on the executed pending state, as a flashblocks-aware node runs them.
 * With them, the node's answers that flashgate completes: a pre-confirmed transaction's raw bytes, and
 * `eth_syncing` while the index trails the node.
 */
export function createCallResolvers({
  pendingView,
  pendingCalls,
  forward,
  chain,
  upstream,
}: {
  pendingView: PendingView
  pendingCalls: PendingCalls | null
  forward: Forward | null
  chain: ChainState
  upstream: Upstream | null
}) {
  async function call(kind: CallKind, { params, local }: CallParams): Promise<unknown> {
    if (pendingCalls !== null && local !== null) {
      const resolved = await pendingView.resolve(local.block)
      const answer = resolved.kind === 'pending' ? await pendingCalls.call(resolved.block, kind, local.request) : null
      if (answer !== null) return answer
    }
    return forwarded(kind, params)
  }

  function forwarded(method: string, params: unknown[]): Promise<unknown> {
    const forwarding = forward?.(method, params) ?? null
    if (forwarding === null) throw new UpstreamError('no upstream to forward calls to')
    return forwarding
  }

  /**
   * `eth_getRawTransactionByHash`: a pre-confirmed transaction's signed bytes as its flashblock carried them (a
   * node that does not follow the flashblocks has yet to see it); any other, the node's own answer.
   */
  async function rawTransaction(hash: Hash): Promise<unknown> {
    const found = await pendingView.transaction(hash)
    if (found !== null) return found.block.transactions[found.position]!.raw
    return forwarded('eth_getRawTransactionByHash', [hash])
  }

  /**
   * `eth_syncing`: the node's own progress while it syncs; while the index trails the node's head by more than
   * `SYNCING_LAG_BLOCKS` (a backfill, or an ingester that stalled), the index's, as a syncing node reports its
   * own: `latest` here is then older than the chain, and a client that asks first must be told. `false` else.
   */
  async function syncing(): Promise<unknown> {
    if (upstream === null) throw new UpstreamError('no upstream to ask how far the chain is')
    const [node, nodeHead, view] = await Promise.all([forwarded('eth_syncing', []), headOf(upstream), chain.view()])
    if (node !== false) return node
    const highest = Number(nodeHead)
    const current = view.head?.number ?? null
    if (current !== null && highest - current <= SYNCING_LAG_BLOCKS) return false
    return { startingBlock: toQuantity(view.firstBlock ?? 0), currentBlock: toQuantity(current ?? 0), highestBlock: toQuantity(highest) }
  }

  async function headOf(node: Upstream): Promise<Hex> {
    try {
      return await node.request<Hex>('eth_blockNumber')
    } catch (error) {
      throw new UpstreamError('upstream unavailable', { cause: error })
    }
  }

  return { call, rawTransaction, syncing }
}
