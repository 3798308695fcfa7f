import { type EIP1193Parameters, http, type PublicRpcSchema, webSocket } from 'viem'

/** Retries of one upstream call; viem backs off exponentially from `UPSTREAM_RETRY_DELAY_MS`. */
const UPSTREAM_RETRY_COUNT = 5
const UPSTREAM_RETRY_DELAY_MS = 200
const UPSTREAM_TIMEOUT_MS = 20_000

export type UpstreamConfig = { rpcUrl: string; wsUrl?: string | undefined }

/** The upstream node: raw JSON-RPC (results are stored exactly as the node sent them). */
export type Upstream = {
  rpcUrl: string
  /** The WebSocket URL for `newHeads`: the configured one, or the RPC URL itself when it is ws(s). */
  wsUrl: string | null
  request<result = unknown>(method: string, params?: unknown[]): Promise<result>
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
  const transport = http(rpcUrl, options)({})
  // For reads on a deadline (a flashblock's state): one retry, not five with backoff over six seconds.
  const batching = http(rpcUrl, { ...options, retryCount: 1, batch: { wait: 0 } })({})
  return {
    rpcUrl,
    wsUrl: wsUrl ?? null,
    request(method, params = []) {
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
