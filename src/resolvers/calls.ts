import type { Hash, Hex } from 'viem'
import type { CallParams, CallRequest } from '../codecs/index.js'
import { UpstreamError } from '../errors.js'
import type { PendingBlock } from '../pending/index.js'
import type { AccessListResult, CallKind } from '../pending/execute/call.js'
import type { PendingView } from './pending.js'
import type { Forward } from './send.js'

/** Runs a call on the state a pending block's executed transactions left; `null` when it cannot (src/pending/execute). */
export type PendingCalls = {
  call(block: PendingBlock, kind: CallKind, request: CallRequest): Promise<Hex | AccessListResult | null>
}

/**
 * `eth_call`, `eth_estimateGas` and `eth_createAccessList`: forwarded to the upstream as they were sent,
 * except at `pending` when this process executes the flashblocks (`--pending-source execute`, on the process
 * that holds the feed): then they run on the executed pending state, as a flashblocks-aware node runs them.
 */
export function createCallResolvers({
  pendingView,
  pendingCalls,
  forward,
}: {
  pendingView: PendingView
  pendingCalls: PendingCalls | null
  forward: Forward | null
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

  return { call, rawTransaction }
}
