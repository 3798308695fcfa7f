import { setTimeout as sleep } from 'node:timers/promises'
import { type EIP1193Parameters, http, type PublicRpcSchema, ResponseBodyTooLargeError, RpcError, webSocket } from 'viem'

/** Retries of one upstream call; viem backs off exponentially from `UPSTREAM_RETRY_DELAY_MS`. */
const UPSTREAM_RETRY_COUNT = 5
const UPSTREAM_RETRY_DELAY_MS = 200
const UPSTREAM_TIMEOUT_MS = 20_000

/**
 * The longest answer taken from the upstream over HTTP: V8's longest string in Node 20 (2^29 − 24 characters),
 * past which no answer could be parsed anyway. viem refuses answers over 10 MiB unless told otherwise, but a
 * block's receipts, transactions and traces are as large as the chain makes them: at 8 gas a byte of log data,
 * a block of 100M gas can hold ~25 MB of receipts JSON, for a few dollars on Base. Refused, such a block would
 * stop ingest for good (it is asked for again and again).
 */
export const UPSTREAM_MAX_RESPONSE_BYTES = 2 ** 29 - 24

/** An answer the upstream would have sent past the bytes a read allowed (`request`'s `maxResponseBytes`). */
export class UpstreamAnswerTooLargeError extends Error {
  override readonly name = 'UpstreamAnswerTooLargeError'
  constructor(
    readonly maxBytes: number,
    options?: { cause?: unknown },
  ) {
    super(`the upstream's answer is larger than ${maxBytes} bytes`, options)
  }
}

/** How one call is read: `maxResponseBytes` bounds what is taken of the answer (HTTP upstreams). */
export type UpstreamRequestOptions = { maxResponseBytes?: number }

export type UpstreamConfig = { rpcUrl: string; wsUrl?: string | undefined }

/** The upstream node: raw JSON-RPC (results are stored exactly as the node sent them). */
export type Upstream = {
  rpcUrl: string
  /** The WebSocket URL for `newHeads`: the configured one, or the RPC URL itself when it is ws(s). */
  wsUrl: string | null
  /**
   * With `maxResponseBytes`, an answer past that many bytes is not read further (nor asked for again) and the
   * call fails with `UpstreamAnswerTooLargeError`: for reads a client asks for, so that one cannot make the
   * gateway take in more than it may answer. Over WebSocket, messages are bounded by the socket's own limit.
   */
  request<result = unknown>(method: string, params?: unknown[], options?: UpstreamRequestOptions): Promise<result>
  /**
   * The same, but calls made in the same tick share one round trip (a JSON-RPC batch over HTTP; a WebSocket
   * already shares one connection), retried once: for many small reads at once on a deadline, such as a
   * flashblock's state.
   */
  batchedRequest<result = unknown>(method: string, params?: unknown[]): Promise<result>
}

export function createUpstream({ rpcUrl, wsUrl }: UpstreamConfig): Upstream {
  const isWs = rpcUrl.startsWith('ws://') || rpcUrl.startsWith('wss://')
  // viem's transports give us retries with backoff, timeouts and request ids; we only use `request`.
  const options = { retryCount: UPSTREAM_RETRY_COUNT, retryDelay: UPSTREAM_RETRY_DELAY_MS, timeout: UPSTREAM_TIMEOUT_MS }
  if (isWs) {
    const transport = webSocket(rpcUrl, { ...options, reconnect: false })({})
    const request = async (method: string, params: unknown[]) => {
      await dropClosedSocket(transport)
      return transport.request({ method, params } as EIP1193Parameters<PublicRpcSchema>) as never
    }
    return {
      rpcUrl,
      wsUrl: wsUrl ?? rpcUrl,
      request: (method, params = []) => request(method, params),
      batchedRequest: (method, params = []) => request(method, params),
    }
  }
  const httpOptions = { ...options, maxResponseBodySize: UPSTREAM_MAX_RESPONSE_BYTES }
  const transport = http(rpcUrl, httpOptions)({})
  // For reads on a deadline (a flashblock's state): one retry, not five with backoff over six seconds.
  const batching = http(rpcUrl, { ...httpOptions, retryCount: 1, batch: { wait: 0 } })({})
  // One transport per bound asked for (the endpoint policies' few bounds), retried here rather than by viem,
  // which would fetch an answer refused for its size again (ResponseBodyTooLargeError is retried as any error).
  const bounded = new Map<number, ReturnType<ReturnType<typeof http>>>()
  async function boundedRequest(method: string, params: unknown[], maxBytes: number): Promise<unknown> {
    let capped = bounded.get(maxBytes)
    if (capped === undefined) bounded.set(maxBytes, (capped = http(rpcUrl, { ...options, retryCount: 0, maxResponseBodySize: maxBytes })({})))
    for (let attempt = 0; ; attempt++) {
      try {
        return await capped.request({ method, params } as EIP1193Parameters<PublicRpcSchema>)
      } catch (error) {
        if (error instanceof ResponseBodyTooLargeError) throw new UpstreamAnswerTooLargeError(maxBytes, { cause: error })
        // The node's own answer (an error object) would be the same again.
        if (error instanceof RpcError || attempt >= UPSTREAM_RETRY_COUNT) throw error
        await sleep(UPSTREAM_RETRY_DELAY_MS * 2 ** attempt)
      }
    }
  }
  return {
    rpcUrl,
    wsUrl: wsUrl ?? null,
    request(method, params = [], { maxResponseBytes } = {}) {
      if (maxResponseBytes !== undefined && maxResponseBytes < UPSTREAM_MAX_RESPONSE_BYTES) return boundedRequest(method, params, maxResponseBytes) as never
      return transport.request({ method, params } as EIP1193Parameters<PublicRpcSchema>) as never
    },
    batchedRequest(method, params = []) {
      return batching.request({ method, params } as EIP1193Parameters<PublicRpcSchema>) as never
    },
  }
}

/**
 * Lets the next call on a WebSocket upstream connect again when its socket has closed (the node restarted, or
 * was away). viem's own reconnection runs only from its keep-alive pings, every 30 s, and gives up for good
 * after five failed attempts: two and a half minutes of outage stopped ingest until flashgate restarted.
 */
export async function dropClosedSocket(transport: ReturnType<ReturnType<typeof webSocket>>) {
  // The socket viem keeps for the URL; a call that finds none connects (and fails on its own, when down).
  const client = await transport.value?.getRpcClient().catch(() => null)
  if (!client || dropped.has(client)) return
  const state = client.socket.readyState
  if (state !== client.socket.CLOSING && state !== client.socket.CLOSED) return
  // Once: a second `close` from a call that found the same client would take its successor out of viem's cache.
  dropped.add(client)
  client.close()
}

const dropped = new WeakSet<object>()
