import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Logger } from 'pino'
import { WebSocketServer } from 'ws'
import { InternalError, isFlashgateError, PayloadTooLargeError, toJsonRpcError, UnauthorizedError } from '../errors.js'
import { readBody } from '../http/read-body.js'
import { createJsonRpcHandler, type JsonRpcHandler, type PassThrough } from '../jsonrpc/index.js'
import { type ChainEvents, createSubscriptions } from '../jsonrpc/subscriptions.js'
import { serializeJsonRpc } from '../jsonrpc/serialize.js'
import type { PendingState } from '../pending/index.js'
import { clientAddress, createRateLimiter, type Policy, type PolicyName } from '../policy/index.js'
import type { Resolvers } from '../resolvers/index.js'
import { createGraphqlServer, GRAPHQL_PATH } from '../schema/index.js'
import { createRestHandler } from '../rest/index.js'
import { createMetrics, type MetricsSources } from './metrics.js'

/** Time a connection gets to drain on shutdown before it is cut. */
const SHUTDOWN_GRACE_MS = 10_000
/** Largest WebSocket message accepted, in bytes. */
const MAX_WS_MESSAGE_BYTES = 1024 * 1024
/** A WebSocket client that lets this much of our output pile up unread is cut off (slow consumer). */
const MAX_WS_BUFFERED_BYTES = 16 * 1024 * 1024

export type Readiness = () => Promise<{ ready: boolean; details: Record<string, unknown> }>

export type ServerConfig = {
  resolvers: Resolvers
  logger: Logger
  port: number
  host?: string
  /** What the public endpoint and the dedicated ones (`/rpc/:apiKey`) allow (src/policy). */
  policies: Record<PolicyName, Policy>
  /** Take the client's address from `X-Forwarded-For` (behind a reverse proxy). */
  trustProxy?: boolean
  /** Methods forwarded to the upstream node (src/upstream/pass-through.ts). */
  passThrough?: PassThrough | null
  readiness?: Readiness
  /** What `GET /metrics` reads at scrape time, besides the request counters. */
  metrics?: MetricsSources
  /** Sources for `eth_subscribe` on the WebSocket endpoint. */
  chainEvents?: ChainEvents | null
  pending?: PendingState | null
  /** Builder-code registrations per second per client address (src/rest); 0 turns the limit off. */
  registrationRateLimit?: number
}

function sendJson(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  sendSerialized(response, status, JSON.stringify(body), headers)
}

/** Sends JSON that is already serialised, as text or as UTF-8 bytes (see src/jsonrpc/serialize.ts). */
function sendSerialized(response: ServerResponse, status: number, json: string | Buffer, headers: Record<string, string> = {}) {
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json), ...headers })
  response.end(json)
}

const JSON_RPC_PATHS = new Set(['/', '/rpc'])
const DEDICATED_PATH_PREFIX = '/rpc/'

/** Who is calling through which endpoint: the policy, the rate-limit bucket and that bucket's rate. */
type Endpoint = { policy: Policy; jsonRpc: JsonRpcHandler; client: string; rate: number }

/** The gateway's HTTP front: JSON-RPC on `/` and `/rpc`, health and readiness. One port for everything. */
export function createServer(config: ServerConfig) {
  const { logger, policies, resolvers } = config
  const trustProxy = config.trustProxy ?? false
  const jsonRpcHandlers = Object.fromEntries(
    Object.values(policies).map((policy) => [
      policy.name,
      createJsonRpcHandler({
        resolvers: resolvers.withLimits(policy.logLimits),
        logger,
        maxBatchSize: policy.maxBatchSize,
        refusedMethods: policy.refusedMethods,
        passThrough: config.passThrough ?? null,
      }),
    ]),
  ) as Record<PolicyName, JsonRpcHandler>
  // GraphQL is served under the public policy: its log limits and its rate per client address.
  const graphqlResolvers = resolvers.withLimits(policies.public.logLimits)
  const graphql = createGraphqlServer({ resolvers: graphqlResolvers, logger, chainEvents: config.chainEvents, pending: config.pending })
  const rest = createRestHandler({ resolvers, logger, registrationRateLimit: config.registrationRateLimit, trustProxy })
  // One bucket per client address on the public endpoint and per key on dedicated ones.
  const limiter = createRateLimiter({ ratePerSecond: 0 })
  const metrics = createMetrics(config.metrics)

  /** The public endpoint, as the client at this address uses it: its bucket is the address. */
  function publicEndpoint(request: IncomingMessage): Endpoint {
    const policy = policies.public
    return { policy, jsonRpc: jsonRpcHandlers.public, client: `ip:${clientAddress(request, trustProxy)}`, rate: policy.rateLimit }
  }

  /** The endpoint a JSON-RPC path names, or `null` when the path is not a JSON-RPC one. */
  async function endpointOf(request: IncomingMessage, path: string): Promise<Endpoint | null> {
    if (JSON_RPC_PATHS.has(path)) return publicEndpoint(request)
    if (!path.startsWith(DEDICATED_PATH_PREFIX)) return null
    const key = path.slice(DEDICATED_PATH_PREFIX.length)
    const record = key === '' || key.includes('/') ? null : await resolvers.lookupApiKey(key)
    if (record === null) throw new UnauthorizedError()
    const policy = policies[record.policy]
    return { policy, jsonRpc: jsonRpcHandlers[record.policy], client: `key:${record.id}`, rate: record.rateLimit }
  }

  function admitter(endpoint: Endpoint) {
    return (cost: number) => {
      const wait = limiter.take(endpoint.client, { cost, rate: endpoint.rate })
      if (wait > 0) metrics.rateLimited(endpoint.policy.name)
      return wait
    }
  }

  /** A JSON-RPC error answered before any call runs (bad key, database down while looking it up). */
  function sendJsonRpcFailure(response: ServerResponse, error: unknown) {
    if (!isFlashgateError(error)) logger.error({ err: error }, 'could not resolve a JSON-RPC endpoint')
    const failure = isFlashgateError(error) ? error : new InternalError()
    sendJson(response, failure.httpStatus, { jsonrpc: '2.0', id: null, error: toJsonRpcError(failure) })
  }

  async function handleJsonRpc(request: IncomingMessage, response: ServerResponse, endpoint: Endpoint) {
    const { maxBodyBytes } = endpoint.policy
    let body: string
    try {
      body = await readBody(request, maxBodyBytes)
    } catch (error) {
      if (error instanceof PayloadTooLargeError)
        sendJson(response, 413, { jsonrpc: '2.0', id: null, error: { code: -32600, message: `request body exceeds ${maxBodyBytes} bytes` } }, { connection: 'close' })
      return
    }
    const reply = await endpoint.jsonRpc.handle(body, { admit: admitter(endpoint) })
    if (reply.body === null) {
      response.writeHead(204).end()
      return
    }
    sendSerialized(response, reply.status, serializeJsonRpc(reply.body), reply.headers)
  }

  async function route(request: IncomingMessage, response: ServerResponse) {
    const path = (request.url ?? '/').split('?')[0]!
    let endpoint: Endpoint | null
    try {
      endpoint = await endpointOf(request, path)
    } catch (error) {
      return sendJsonRpcFailure(response, error)
    }
    if (endpoint !== null) {
      if (request.method === 'POST') return handleJsonRpc(request, response, endpoint)
      response.setHeader('allow', 'POST')
      return sendJson(response, 405, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'use POST for JSON-RPC' } })
    }
    if (await rest(request, response)) return
    if (path === GRAPHQL_PATH) {
      const wait = admitter(publicEndpoint(request))(1)
      if (wait > 0)
        return sendJson(response, 429, { errors: [{ message: `rate limit exceeded; retry in ${wait} s`, extensions: { code: 'RATE_LIMITED' } }] }, { 'retry-after': String(wait) })
      return graphql(request, response)
    }
    if (path === '/healthz') return sendJson(response, 200, { status: 'ok' })
    if (path === '/metrics') {
      const { contentType, body } = await metrics.scrape()
      response.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) })
      return response.end(body)
    }
    if (path === '/readyz') {
      const readiness = (await config.readiness?.()) ?? { ready: true, details: {} }
      return sendJson(response, readiness.ready ? 200 : 503, { ready: readiness.ready, ...readiness.details })
    }
    sendJson(response, 404, { error: { code: 'not_found', message: `no route for ${request.method} ${path}` } })
  }

  const server: Server = createHttpServer((request, response) => {
    metrics.observe(request, response)
    route(request, response).catch((error: unknown) => {
      logger.error({ err: error }, 'unhandled error in request')
      if (!response.headersSent) sendJson(response, 500, { jsonrpc: '2.0', id: null, error: { code: -32603, message: 'internal error' } })
      else response.destroy()
    })
  })
  server.keepAliveTimeout = 65_000

  // JSON-RPC over WebSocket on the same paths: every method, plus eth_subscribe / eth_unsubscribe.
  const sockets = new WebSocketServer({ noServer: true, maxPayload: MAX_WS_MESSAGE_BYTES })
  server.on('upgrade', (request, socket, head) => {
    const path = (request.url ?? '/').split('?')[0]!
    endpointOf(request, path).then(
      (endpoint) => (endpoint === null ? socket.destroy() : upgrade(request, socket, head, endpoint)),
      (error: unknown) => {
        const status = isFlashgateError(error) ? error.httpStatus : 500
        socket.end(`HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : 'Internal Server Error'}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`)
      },
    )
  })

  function upgrade(request: IncomingMessage, socket: Parameters<typeof sockets.handleUpgrade>[1], head: Buffer, endpoint: Endpoint) {
    sockets.handleUpgrade(request, socket, head, (ws) => {
      /** Sends JSON text (a text frame, also when it comes as UTF-8 bytes). */
      const send = (json: string | Buffer) => {
        if (ws.readyState !== ws.OPEN) return
        if (ws.bufferedAmount > MAX_WS_BUFFERED_BYTES) {
          logger.warn({ bufferedBytes: ws.bufferedAmount }, 'closing a WebSocket that does not read its messages')
          ws.terminate()
          return
        }
        ws.send(json, { binary: false })
      }
      const subscriptions = createSubscriptions({
        resolvers: config.resolvers,
        chainEvents: config.chainEvents ?? null,
        pending: config.pending ?? null,
        logger,
        notify: (subscription, result) => send(JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription, result } })),
      })
      const local = {
        eth_subscribe: async (params: unknown) => subscriptions.subscribe(params),
        eth_unsubscribe: async (params: unknown) => subscriptions.unsubscribe(Array.isArray(params) ? params[0] : undefined),
      }
      const admit = admitter(endpoint)
      ws.on('message', (data) => {
        endpoint.jsonRpc.handle(data.toString(), { local, admit }).then(
          // The same serialiser as HTTP: raw JSON results (whole-block receipts) go out as they are.
          (reply) => reply.body !== null && send(serializeJsonRpc(reply.body)),
          (error: unknown) => logger.error({ err: error }, 'unhandled error on a WebSocket'),
        )
      })
      ws.on('close', () => subscriptions.close())
      ws.on('error', () => ws.terminate())
    })
  }

  return {
    server,
    async listen(): Promise<{ port: number; url: string }> {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(config.port, config.host ?? '127.0.0.1', () => {
          server.off('error', reject)
          resolve()
        })
      })
      const { port } = server.address() as AddressInfo
      return { port, url: `http://${config.host ?? '127.0.0.1'}:${port}` }
    },
    /** Stops accepting connections and waits for in-flight requests to finish. */
    async close(): Promise<void> {
      for (const client of sockets.clients) client.close(1001, 'server shutting down')
      sockets.close()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeIdleConnections()
      const timer = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS)
      await closed
      clearTimeout(timer)
    },
  }
}
