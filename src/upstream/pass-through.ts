import { z } from 'zod'
import { InvalidParamsError, UpstreamError, UpstreamRpcError } from '../errors.js'
import type { Upstream } from './index.js'

/** A forwarded call that takes longer than this is answered as an upstream failure. */
const PASS_THROUGH_TIMEOUT_MS = 15_000

/**
 * Methods the index does not answer and a wallet needs, forwarded to the upstream node as they are (the calls
 * and sends among them through their resolvers: resolvers/calls.ts runs `pending` calls itself when it
 * executes the flashblocks). Anything else the index does not answer is `-32601`: node administration
 * (`admin_*`, `debug_*`, `anvil_*`), methods that use keys held by the node (`eth_sign`, `eth_sendTransaction`;
 * `eth_accounts` answers `[]` itself) and stateful filters, which would not survive being spread over several
 * upstream connections.
 */
export const PASS_THROUGH_METHODS: ReadonlySet<string> = new Set([
  'eth_call',
  'eth_estimateGas',
  'eth_createAccessList',
  'eth_simulateV1',
  'eth_gasPrice',
  'eth_maxPriorityFeePerGas',
  'eth_feeHistory',
  'eth_blobBaseFee',
  'eth_getCode',
  'eth_getStorageAt',
  'eth_getProof',
  'eth_sendRawTransaction',
  'eth_syncing',
  'net_listening',
  'web3_sha3',
  // What real clients ask of a node besides (web3.js's getProtocolVersion, getCoinbase, isMining, getHashRate,
  // getPeerCount; reth's and geth's raw transaction and sender-and-nonce look-ups; a wallet's pool status).
  'eth_getRawTransactionByHash',
  'eth_getTransactionBySenderAndNonce',
  'eth_protocolVersion',
  'eth_coinbase',
  'eth_mining',
  'eth_hashrate',
  'net_peerCount',
  'txpool_status',
])

/** The largest number a node decodes into 64 bits (geth's `hexutil.Uint64`, `math.HexOrDecimal64`). */
const MAX_UINT64 = 2n ** 64n - 1n

/**
 * What a forwarded call's params must hold before the node sees them, where a node is known to fail on them
 * worse than geth refuses them: anvil panics, and stops, on an `eth_feeHistory` block count over 64 bits.
 * Refused as geth refuses it (`-32602`); `null` when the params may go.
 */
const PARAMS_REFUSALS: Record<string, (params: unknown[]) => string | null> = {
  eth_feeHistory: ([blockCount]) => {
    const text = typeof blockCount === 'string' ? blockCount : typeof blockCount === 'number' ? String(blockCount) : null
    if (text === null || !/^(0x[0-9a-fA-F]+|\d+)$/.test(text)) return null
    return BigInt(text) > MAX_UINT64 ? `invalid argument 0: ${text.startsWith('0x') ? 'hex' : 'decimal'} number > 64 bits` : null
  },
}

const upstreamFailure = z.object({ error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }) })
const upstreamSuccess = z.object({ result: z.unknown() })

/**
 * The error object the node answered, found under viem's wrappers (its `RpcRequestError` keeps the node's
 * `{code, message, data}` as its cause); `null` when the call failed without an answer (network, timeout).
 */
function nodeError(error: unknown): { code: number; message: string; data?: unknown } | null {
  let current: unknown = error
  for (let depth = 0; depth < 8 && current !== null && typeof current === 'object'; depth++) {
    if (!(current instanceof Error)) {
      const candidate = upstreamFailure.shape.error.safeParse(current)
      return candidate.success ? candidate.data : null
    }
    current = current.cause
  }
  return null
}

/**
 * Forwards allowlisted calls to the upstream node and answers with exactly what it said: its result, or its
 * error with the node's code, message and data (a revert's reason reaches the wallet). No retries: a raw
 * transaction must not be sent twice by us, and the wallet decides whether to try again.
 */
export function createPassThrough({ upstream }: { upstream: Upstream }) {
  let nextId = 0

  async function forwardHttp(method: string, paramsJson: string): Promise<unknown> {
    let body: unknown
    try {
      const response = await fetch(upstream.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"jsonrpc":"2.0","id":${++nextId},"method":${JSON.stringify(method)},"params":${paramsJson}}`,
        signal: AbortSignal.timeout(PASS_THROUGH_TIMEOUT_MS),
      })
      body = await response.json()
    } catch (error) {
      throw new UpstreamError('upstream unavailable', { cause: error })
    }
    const failure = upstreamFailure.safeParse(body)
    if (failure.success) throw new UpstreamRpcError(failure.data.error)
    const success = upstreamSuccess.safeParse(body)
    if (!success.success || !Object.hasOwn(body as object, 'result')) throw new UpstreamError('upstream sent an invalid answer')
    return success.data.result
  }

  async function forwardOverTransport(method: string, params: unknown[]): Promise<unknown> {
    try {
      return await upstream.request(method, params)
    } catch (error) {
      const answered = nodeError(error)
      if (answered !== null) throw new UpstreamRpcError(answered)
      throw new UpstreamError('upstream unavailable', { cause: error })
    }
  }

  const isHttp = /^https?:/.test(upstream.rpcUrl)

  /** The forwarded call, or `null` for a method that is not on the allowlist. */
  return function passThrough(method: string, params: unknown[]): Promise<unknown> | null {
    if (!PASS_THROUGH_METHODS.has(method)) return null
    const refusal = PARAMS_REFUSALS[method]?.(params) ?? null
    if (refusal !== null) return Promise.reject(new InvalidParamsError(refusal))
    // Params nested deeper than JSON.stringify can recurse are the caller's mistake, not an upstream failure.
    let paramsJson: string
    try {
      paramsJson = JSON.stringify(params)
    } catch {
      return Promise.reject(new InvalidParamsError('invalid params: nested too deeply to forward'))
    }
    return isHttp ? forwardHttp(method, paramsJson) : forwardOverTransport(method, params)
  }
}
