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
 * An unsigned integer written in any form the Rust nodes read one (ruint, in reth and anvil): `0x`, `0o` or `0b`
 * in either case, or decimal, with `_` between digits; or a JSON integer. `null` for a string that is none of
 * those, `undefined` for a value that is no string or integer (the node refuses it as it does).
 */
function unsignedInteger(value: unknown): bigint | null | undefined {
  if (typeof value === 'number') return Number.isInteger(value) && value >= 0 ? BigInt(value) : undefined
  if (typeof value !== 'string') return undefined
  if (!/^(0[xX][0-9a-fA-F_]*[0-9a-fA-F][0-9a-fA-F_]*|0[oO][0-7_]*[0-7][0-7_]*|0[bB][01_]*[01][01_]*|[0-9][0-9_]*)$/.test(value)) return null
  return BigInt(value.replaceAll('_', ''))
}

/**
 * What a forwarded call's params must hold before the node sees them, where a node is known to fail on them
 * worse than geth refuses them: anvil panics, and stops, on an `eth_feeHistory` block count over 64 bits,
 * in whatever form its parser reads it. Refused as geth refuses it (`-32602`), or sent on in a form every
 * node reads the same; `null` when the params may go as they are.
 */
const PARAMS_CHECKS: Record<string, (params: unknown[]) => { refusal: string } | { params: unknown[] } | null> = {
  eth_feeHistory: (params) => {
    const [blockCount, ...rest] = params
    const count = unsignedInteger(blockCount)
    if (count === undefined) return null
    if (count === null) return { refusal: `invalid argument 0: invalid hex or decimal integer ${JSON.stringify(blockCount).slice(0, 80)}` }
    if (count > MAX_UINT64) return { refusal: `invalid argument 0: ${/^0x/i.test(String(blockCount)) ? 'hex' : 'decimal'} number > 64 bits` }
    return { params: [`0x${count.toString(16)}`, ...rest] }
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
    const checked = PARAMS_CHECKS[method]?.(params) ?? null
    if (checked !== null && 'refusal' in checked) return Promise.reject(new InvalidParamsError(checked.refusal))
    if (checked !== null) params = checked.params
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
