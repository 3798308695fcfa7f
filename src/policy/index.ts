import type { IncomingMessage } from 'node:http'
import type { LogLimits } from '../resolvers/index.js'

export { createRateLimiter, type RateLimiter } from './rate-limit.js'

/**
 * Methods the public endpoint refuses (HTTP 403, or a `-32004` entry in a batch) and dedicated endpoints
 * serve: whole-block receipts are the heaviest answer per call, as on Base's own public endpoint.
 */
export const PUBLIC_REFUSED_METHODS: readonly string[] = ['eth_getBlockReceipts']

export type PolicyName = 'public' | 'dedicated'

/** What one kind of endpoint allows: which methods, how often, how big (DESIGN.md §2). */
export type Policy = {
  name: PolicyName
  refusedMethods: ReadonlySet<string>
  /** Requests per second per client address (public) or per key (dedicated; the key's own rate wins). */
  rateLimit: number
  /** Calls in one batch; more is `-32600 batch too large`. */
  maxBatchSize: number
  /** Bytes of a batch's results; once past, the calls not yet started get `-32003 response too large`. */
  maxBatchResponseBytes: number
  /** Bytes of one request body; more is HTTP 413. */
  maxBodyBytes: number
  /** `eth_getLogs` (and GraphQL `logs`) block range, result cap and byte bound. */
  logLimits: LogLimits
}

export type PolicyConfig = {
  publicRateLimit: number
  publicMaxBatch: number
  publicMaxBatchResponse: number
  publicMaxBody: number
  publicMaxBlockRange: number
  publicMaxLogs: number
  publicMaxLogsBytes: number
  maxBatch: number
  maxBatchResponse: number
  maxBody: number
  maxBlockRange: number
  maxLogs: number
  maxLogsBytes: number
  maxQueryCost: number
}

/** The public endpoint's policy and the dedicated endpoints' one, from the configuration. */
export function createPolicies(config: PolicyConfig): Record<PolicyName, Policy> {
  return {
    public: {
      name: 'public',
      refusedMethods: new Set(PUBLIC_REFUSED_METHODS),
      rateLimit: config.publicRateLimit,
      maxBatchSize: config.publicMaxBatch,
      maxBatchResponseBytes: config.publicMaxBatchResponse,
      maxBodyBytes: config.publicMaxBody,
      logLimits: {
        maxBlockRange: config.publicMaxBlockRange,
        maxLogs: config.publicMaxLogs,
        maxBytes: config.publicMaxLogsBytes,
        maxQueryCost: config.maxQueryCost,
      },
    },
    dedicated: {
      name: 'dedicated',
      refusedMethods: new Set(),
      // Each key carries its own rate (`flashgate keys create --rate`).
      rateLimit: 0,
      maxBatchSize: config.maxBatch,
      maxBatchResponseBytes: config.maxBatchResponse,
      maxBodyBytes: config.maxBody,
      logLimits: { maxBlockRange: config.maxBlockRange, maxLogs: config.maxLogs, maxBytes: config.maxLogsBytes, maxQueryCost: config.maxQueryCost },
    },
  }
}

/**
 * The address a request comes from. Behind a reverse proxy (`--trust-proxy`) that is the last address of
 * `X-Forwarded-For`, the one the proxy added: a proxy that appends (nginx's `$proxy_add_x_forwarded_for`)
 * keeps whatever the client sent before it, so the first is the client's to forge, and a forged one per
 * request would escape every per-client limit. Otherwise the socket's peer.
 */
export function clientAddress(request: IncomingMessage, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = request.headers['x-forwarded-for']
    const entries = (Array.isArray(forwarded) ? forwarded.join(',') : (forwarded ?? '')).split(',')
    const last = entries.map((entry) => entry.trim()).findLast((entry) => entry !== '')
    if (last !== undefined) return last
  }
  return request.socket.remoteAddress ?? 'unknown'
}
