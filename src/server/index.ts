import { createServer as createHttpServer, type IncomingMessage, STATUS_CODES, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import { type WebSocket, WebSocketServer } from 'ws'
import {
  BadWebSocketHandshakeError,
  ExpectationFailedError,
  type FlashgateError,
  HttpMethodNotAllowedError,
  InternalError,
  isFlashgateError,
  JsonRpcNeedsPostError,
  loggableError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  TooManyWebSocketsError,
  toHttpError,
  toJsonRpcError,
  UnauthorizedError,
  UnsupportedContentEncodingError,
} from '../errors.js'
import { DEFAULT_REQUEST_TIMEOUT_S } from '../config.js'
import { createUnexpectedErrorLog } from '../logger.js'
import { COMPRESS_MIN_BYTES, negotiateEncoding, STORED_DEFLATE_OFFERS, sendCompressible, sendEncoded } from '../http/compress.js'
import { contentDecoders, continueWhenRead, DECODED_CODINGS, readBody, readBodyThen } from '../http/read-body.js'
import { type MaybePromise, whenReady } from '../http/maybe-promise.js'
import { createJsonRpcHandler, type JsonRpcHandler, type JsonRpcReply, type PassThrough } from '../jsonrpc/index.js'
import { type CallMemo, createCallMemo } from '../jsonrpc/memo.js'
import { type ChainEvents, createSubscriptions, MAX_SUBSCRIPTION_BYTES_PER_CLIENT, type SubscriptionShare } from '../jsonrpc/subscriptions.js'
import { hasDeflatedResult, serializeJsonRpc, serializeJsonRpcParts, storedJsonRpc } from '../jsonrpc/serialize.js'
import { clientAddress, createRateLimiter, type Policy, type PolicyName } from '../policy/index.js'
import type { ClusterLink } from '../cluster/link.js'
import type { SharedRedis } from '../redis/index.js'
import type { Resolvers } from '../resolvers/index.js'
import { createGraphqlServer, GRAPHQL_PATH } from '../schema/index.js'
import { createRestHandler, DASHBOARD_PATHS } from '../rest/index.js'
import { createCors } from './cors.js'
import { GRAPHIQL_ASSETS_PATH, renderGraphiqlPage, serveGraphiqlAsset } from './graphiql.js'
import { createGraphqlRoute } from './graphql.js'
import { createMetrics, type MetricsSources, pathOf } from './metrics.js'

/** Time a connection gets to drain on shutdown before it is cut. */
const SHUTDOWN_GRACE_MS = 10_000
/** Largest WebSocket message accepted, in bytes. */
const MAX_WS_MESSAGE_BYTES = 1024 * 1024
/** A WebSocket client that lets this much of our output pile up unread is cut off (slow consumer). */
const MAX_WS_BUFFERED_BYTES = 16 * 1024 * 1024
/**
 * The same over all of one client's WebSockets: 100 of them, each under the bound above, held 1.6 GB of
 * answers a client never read (a hunt made the server hold 1.1 GB from 13 MB of requests).
 */
const MAX_WS_BUFFERED_BYTES_PER_CLIENT = 32 * 1024 * 1024
/** Below this a socket's own backlog is not worth adding up the client's others (a client that reads never gets here). */
const WS_BACKLOG_WORTH_COUNTING = 1024 * 1024
/**
 * WebSockets one client (an address on the public endpoint, an API key on a dedicated one) may hold open on a
 * serving process, as its GraphQL streams (server/graphql.ts); the next upgrade is answered 429.
 */
export const MAX_WEBSOCKETS_PER_CLIENT = 100
/** Node's limit on a request's head (request line and headers); a longer one gets a 431 with a JSON body. */
const MAX_HEADER_BYTES = 16 * 1024

/** Memory of each endpoint policy's call memo (jsonrpc/memo.ts), as a share of the answer cache's (`--answer-cache-mb`). */
const MEMO_SHARE_OF_ANSWER_CACHE = 0.25
/** Of a refused JSON-RPC body, the bytes read to find its id (a 401 echoes it). */
const MAX_ID_PROBE_BYTES = 64 * 1024

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
  /** Builder-code registrations per second per client address (src/rest); 0 turns the limit off. */
  registrationRateLimit?: number
  /** Origins allowed to call the JSON-RPC endpoints from a browser: `*` or a comma-separated list. */
  corsOrigins?: string
  /** Rate-limit buckets shared with the deployment's other processes (`--redis-url`); else per process. */
  redis?: SharedRedis | null
  /**
   * A worker of `serve --workers N`: without Redis, rate-limit buckets are the primary's; `/metrics` is the
   * whole machine's, aggregated by the primary; answers carry `x-flashgate-worker`.
   */
  cluster?: ClusterLink | null
  /** `false` on an ingest-only process (`--role ingest`): health, readiness and metrics only. Default `true`. */
  servesApis?: boolean
  /** Seconds to receive a whole request (head and body) before a 408 closes the connection. */
  requestTimeoutSeconds?: number
}

/** What every process answers, an ingest-only one too. */
const OPERATIONS_PATHS = new Set(['/healthz', '/readyz', '/metrics'])

/** A JSON-RPC error answered before any call runs, in the error's own status and headers (its id unknown). */
function sendJsonRpcError(request: IncomingMessage, response: ServerResponse, error: FlashgateError, headers: Record<string, string>) {
  return sendJson(request, response, error.httpStatus, { jsonrpc: '2.0', id: null, error: toJsonRpcError(error) }, { ...headers, ...error.headers })
}

/** A REST-shaped error (`{"error":{"code","message"}}`) for a path outside the APIs' own handlers. */
function sendHttpError(request: IncomingMessage, response: ServerResponse, error: FlashgateError) {
  const answer = toHttpError(error)
  return sendJson(request, response, answer.status, answer.body, answer.headers)
}

function sendJson(request: IncomingMessage, response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  return sendSerialized(request, response, status, JSON.stringify(body), headers)
}

/**
 * Sends JSON that is already serialised, as text or as UTF-8 bytes (see src/jsonrpc/serialize.ts), compressed
 * when it is large and the client accepts it.
 */
function sendSerialized(request: IncomingMessage, response: ServerResponse, status: number, json: string | Buffer, headers: Record<string, string> = {}) {
  return sendCompressible(request, response, status, json, { 'content-type': 'application/json', ...headers })
}

/** The `id` of a single JSON-RPC request, to echo in an answer refused before the call is read; else `null`. */
function requestId(body: string): unknown {
  try {
    const parsed: unknown = JSON.parse(body)
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || !('id' in parsed)) return null
    const id = (parsed as { id: unknown }).id
    return typeof id === 'string' || typeof id === 'number' ? id : null
  } catch {
    return null
  }
}

/**
 * An answer written on the connection itself, where there is no response object (a request head Node refused,
 * a refused WebSocket upgrade); the connection is closed after it.
 */
function endWithJson(socket: Duplex, status: number, body: unknown, headers: Record<string, string>) {
  if (!socket.writable) return socket.destroy()
  const text = JSON.stringify(body)
  const fields = { connection: 'close', 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers }
  const head = Object.entries(fields).map(([name, value]) => `${name}: ${value}\r\n`)
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${head.join('')}\r\n${text}`)
}

/** `Sec-WebSocket-Key`: 16 bytes in base64 (RFC 6455 §4.1), as ws checks it. */
const WEBSOCKET_KEY = /^[+/0-9A-Za-z]{22}==$/
/** The WebSocket protocol versions served: 13 (RFC 6455) and 8 (its last draft), as ws serves them. */
const WEBSOCKET_VERSIONS = new Set(['13', '8'])

/** Why a WebSocket opening handshake cannot be accepted (RFC 6455 §4.2.1), or `null` when it can. */
function handshakeRefusal(request: IncomingMessage): BadWebSocketHandshakeError | null {
  if (request.method !== 'GET') return new BadWebSocketHandshakeError(`it must be a GET, not ${request.method}`, { status: 405, headers: { allow: 'GET' } })
  const key = request.headers['sec-websocket-key']
  if (key === undefined || !WEBSOCKET_KEY.test(key.trim())) return new BadWebSocketHandshakeError('Sec-WebSocket-Key must be 16 bytes in base64')
  const version = request.headers['sec-websocket-version']
  if (version === undefined || !WEBSOCKET_VERSIONS.has(version.trim()))
    return new BadWebSocketHandshakeError('Sec-WebSocket-Version must be 13', { headers: { 'sec-websocket-version': '13, 8' } })
  return null
}

/** A request head over Node's limit (`HPE_HEADER_OVERFLOW`): 431 with a body saying what to do instead. */
function refuseClientError(error: NodeJS.ErrnoException, socket: Duplex, headers: Record<string, string>) {
  const [status, code, message] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'request_header_fields_too_large', `the request line and headers exceed ${MAX_HEADER_BYTES} bytes; send a long query in a POST body`]
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request_timeout', 'the request did not arrive in time; send its head and body at once']
        : [400, 'bad_request', 'the request is not valid HTTP/1.1']
  endWithJson(socket, status, { error: { code, message } }, headers)
}

/**
 * Whether an upgrade asks for WebSocket, the one protocol this server switches to; any other (`h2c`, which
 * curl --http2 asks for on http://) is ignored and the request answered in HTTP/1.1 (RFC 9110 §7.8, RFC 7540 §3.2).
 */
function asksForWebSocket(request: IncomingMessage): boolean {
  return request.headers.upgrade?.toLowerCase() === 'websocket'
}

/** Headers that only ask for the ignored upgrade, and the `Connection` options that name them. */
const UPGRADE_ONLY_HEADERS = new Set(['upgrade', 'http2-settings'])

/**
 * The head of an upgrade request written again without its upgrade: what Node would have parsed had the client
 * not asked. Node hands an upgrade request over already parsed, and has read nothing of its body.
 */
function headWithoutUpgrade(request: IncomingMessage): Buffer {
  const lines = [`${request.method} ${request.url} HTTP/${request.httpVersion}`]
  const raw = request.rawHeaders
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index]!
    const lower = name.toLowerCase()
    if (UPGRADE_ONLY_HEADERS.has(lower)) continue
    let value = raw[index + 1]!
    if (lower === 'connection')
      value = value
        .split(',')
        .map((option) => option.trim())
        .filter((option) => option !== '' && !UPGRADE_ONLY_HEADERS.has(option.toLowerCase()))
        .join(', ')
    if (value !== '') lines.push(`${name}: ${value}`)
  }
  // Header values come from Node as latin1 text: written back as the same bytes.
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1')
}

const JSON_RPC_PATHS = new Set(['/', '/rpc'])
/** REST's paths (src/rest). */
const REST_PATH_PREFIX = '/v1/'

/** Paths besides JSON-RPC's that answer pages on other origins as `--cors-origins` says (JSON-RPC's own are routed apart). */
function answersAcrossOrigins(path: string): boolean {
  return path.startsWith(REST_PATH_PREFIX) || path === GRAPHQL_PATH || DASHBOARD_PATHS.has(path)
}
/** The headers of most JSON-RPC answers (no headers of their own, CORS open to any origin): made once. */
const JSON_FOR_ANY_ORIGIN: Readonly<Record<string, string>> = Object.freeze({ 'content-type': 'application/json', 'access-control-allow-origin': '*' })

const DEDICATED_PATH_PREFIX = '/rpc/'

function isJsonRpcPath(path: string): boolean {
  return JSON_RPC_PATHS.has(path) || path.startsWith(DEDICATED_PATH_PREFIX)
}

/** The body codings taken on a path: readBody's, except on GraphQL's, whose body yoga reads as it comes. */
function codingsTaken(path: string): readonly string[] {
  return path === GRAPHQL_PATH ? [] : DECODED_CODINGS
}

/** Whether a body in this `Content-Encoding` is decoded on this path. */
function decodes(path: string, coding: string): boolean {
  const decoders = contentDecoders(coding)
  return decoders !== null && (decoders.length === 0 || codingsTaken(path).length > 0)
}

/** Who is calling through which endpoint: the policy, the rate-limit bucket and that bucket's rate. */
type Endpoint = { policy: Policy; jsonRpc: JsonRpcHandler; client: string; rate: number }

/** The gateway's HTTP front: JSON-RPC on `/` and `/rpc`, health and readiness. One port for everything. */
export function createServer(config: ServerConfig) {
  const { logger, policies, resolvers } = config
  const trustProxy = config.trustProxy ?? false
  const servesApis = config.servesApis ?? true
  // A memo per policy: log limits differ, so a result one endpoint may give is not always the other's to give.
  const memos = Object.fromEntries(
    Object.values(policies).map((policy) => [
      policy.name,
      createCallMemo({
        cache: resolvers.answerCache,
        indexed: resolvers.chain.indexed,
        maxBytes: resolvers.answerCache.maxBytes * MEMO_SHARE_OF_ANSWER_CACHE,
      }),
    ]),
  ) as Record<PolicyName, CallMemo>
  const jsonRpcHandlers = Object.fromEntries(
    Object.values(policies).map((policy) => [
      policy.name,
      createJsonRpcHandler({
        resolvers,
        limits: policy.logLimits,
        logger,
        maxBatchSize: policy.maxBatchSize,
        maxBatchResponseBytes: policy.maxBatchResponseBytes,
        refusedMethods: policy.refusedMethods,
        passThrough: config.passThrough ?? null,
        memo: memos[policy.name],
      }),
    ]),
  ) as Record<PolicyName, JsonRpcHandler>
  // GraphQL is served under the public policy: its log limits and its rate per client address.
  const graphql = createGraphqlRoute(
    createGraphqlServer({
      resolvers,
      limits: policies.public.logLimits,
      maxBodyBytes: policies.public.maxBodyBytes,
      logger,
      chainEvents: config.chainEvents,
      renderGraphiQL: renderGraphiqlPage,
    }),
    logger,
    // Open subscription streams are counted per client address, as the rate limiter reads it.
    { trustProxy },
  )
  const cors = createCors(config.corsOrigins ?? '*')
  // A database outage fails every key lookup, and a failure of one kind every request: logged once a second.
  const logUnexpected = createUnexpectedErrorLog(logger)
  const redis = config.redis ?? null
  const cluster = config.cluster ?? null
  const rest = createRestHandler({ resolvers, logger, registrationRateLimit: config.registrationRateLimit, trustProxy, redis, cluster })
  // One bucket per client address on the public endpoint and per key on dedicated ones.
  const limiter = createRateLimiter({ ratePerSecond: 0, redis, name: 'rpc', cluster })
  const metrics = createMetrics({
    ...config.metrics,
    memo: () => ({ public: memos.public.figures(), dedicated: memos.dedicated.figures() }),
    answerCache: resolvers.answerCache.figures,
  })
  const workerHeader = cluster === null ? null : String(cluster.workerId)

  /** The public endpoint, as the client at this address uses it: its bucket is the address. */
  function publicEndpoint(request: IncomingMessage): Endpoint {
    const policy = policies.public
    return { policy, jsonRpc: jsonRpcHandlers.public, client: `ip:${clientAddress(request, trustProxy)}`, rate: policy.rateLimit }
  }

  /**
   * The endpoint a JSON-RPC path names, or `null` when the path is not a JSON-RPC one; at once unless the
   * API key has to be read from the database. An unknown or revoked key throws `UnauthorizedError`.
   */
  function endpointOf(request: IncomingMessage, path: string): MaybePromise<Endpoint | null> {
    if (JSON_RPC_PATHS.has(path)) return publicEndpoint(request)
    if (!path.startsWith(DEDICATED_PATH_PREFIX)) return null
    const key = path.slice(DEDICATED_PATH_PREFIX.length)
    if (key === '' || key.includes('/')) throw new UnauthorizedError()
    return whenReady(resolvers.lookupApiKey(key), (record) => {
      if (record === null) throw new UnauthorizedError()
      const policy = policies[record.policy]
      return { policy, jsonRpc: jsonRpcHandlers[record.policy], client: `key:${record.id}`, rate: record.rateLimit }
    })
  }

  function admitter(endpoint: Endpoint) {
    return (cost: number) =>
      whenReady(limiter.take(endpoint.client, { cost, rate: endpoint.rate }), (wait) => {
        if (wait > 0) metrics.rateLimited(endpoint.policy.name)
        return wait
      })
  }

  /**
   * A JSON-RPC error answered before any call runs (bad key, database down while looking it up), with the
   * request's id when a single request of modest size names one.
   */
  async function sendJsonRpcFailure(request: IncomingMessage, response: ServerResponse, error: unknown) {
    if (!isFlashgateError(error)) logUnexpected(error, 'could not resolve a JSON-RPC endpoint')
    const failure = isFlashgateError(error) ? error : new InternalError()
    const body = request.method === 'POST' ? await readBody(request, MAX_ID_PROBE_BYTES).catch(() => '') : ''
    return sendJson(request, response, failure.httpStatus, { jsonrpc: '2.0', id: requestId(body), error: toJsonRpcError(failure) }, cors.headers(request))
  }

  function handleJsonRpc(request: IncomingMessage, response: ServerResponse, endpoint: Endpoint): void {
    const corsHeaders = cors.headers(request)
    // An endpoint without a rate (a key made with `--rate 0`, or `--public-rate-limit 0`) has nothing to take.
    const options = endpoint.rate > 0 ? { admit: admitter(endpoint), client: endpoint.client } : { client: endpoint.client }
    readBodyThen(
      request,
      endpoint.policy.maxBodyBytes,
      (body) => {
        let sent: MaybePromise<void>
        try {
          sent = whenReady(endpoint.jsonRpc.handle(body, options), (reply) => sendJsonRpcReply(request, response, reply, corsHeaders))
        } catch (error) {
          return failUnexpectedly(response, request, error)
        }
        if (sent instanceof Promise) sent.catch((error: unknown) => failUnexpectedly(response, request, error))
      },
      (error) => {
        if (error instanceof PayloadTooLargeError) sendJsonRpcError(request, response, error, corsHeaders)
      },
    )
  }

  function sendJsonRpcReply(request: IncomingMessage, response: ServerResponse, reply: JsonRpcReply, corsHeaders: Record<string, string>): MaybePromise<void> {
    if (reply.body === null) {
      response.writeHead(204, corsHeaders).end()
      return
    }
    const headers =
      reply.headers === undefined && corsHeaders === cors.anyOrigin
        ? JSON_FOR_ANY_ORIGIN
        : { 'content-type': 'application/json', ...reply.headers, ...corsHeaders }
    // Answers stored deflated (a block's receipts) go as they are to a client accepting `deflate` or `gzip`.
    if (hasDeflatedResult(reply.body)) {
      const coding = negotiateEncoding(request.headers['accept-encoding'], STORED_DEFLATE_OFFERS)
      const stored = coding === 'deflate' || coding === 'gzip' ? storedJsonRpc(reply.body, coding) : null
      if (stored !== null && stored.plainLength >= COMPRESS_MIN_BYTES) return sendEncoded(request, response, reply.status, stored.stream, coding, headers)
    }
    return sendCompressible(request, response, reply.status, serializeJsonRpcParts(reply.body), headers)
  }

  /** Routes a request: a JSON-RPC call is answered without a turn of waiting where it can be (see MaybePromise). */
  function route(request: IncomingMessage, response: ServerResponse, path: string): MaybePromise<void> {
    if (!servesApis && !OPERATIONS_PATHS.has(path))
      return sendHttpError(request, response, new NotFoundError(`this process only ingests (--role ingest): ${path} is served by the serving processes`))
    // A preflight names no API key to check: answer it before the lookup (https://fetch.spec.whatwg.org/#cors-preflight-fetch).
    if (request.method === 'OPTIONS' && (JSON_RPC_PATHS.has(path) || path.startsWith(DEDICATED_PATH_PREFIX) || answersAcrossOrigins(path))) {
      response.writeHead(204, cors.preflight(request)).end()
      return
    }
    let endpoint: MaybePromise<Endpoint | null>
    try {
      endpoint = endpointOf(request, path)
    } catch (error) {
      return sendJsonRpcFailure(request, response, error)
    }
    if (endpoint instanceof Promise)
      return endpoint.then(
        (found) => routeTo(request, response, path, found),
        (error: unknown) => sendJsonRpcFailure(request, response, error),
      )
    return routeTo(request, response, path, endpoint)
  }

  function routeTo(request: IncomingMessage, response: ServerResponse, path: string, endpoint: Endpoint | null): MaybePromise<void> {
    if (endpoint === null) return routeOther(request, response, path)
    if (request.method === 'POST') return handleJsonRpc(request, response, endpoint)
    return sendJsonRpcError(request, response, new JsonRpcNeedsPostError(), cors.headers(request))
  }

  /** Everything but JSON-RPC: REST, GraphQL, GraphiQL's assets, health, readiness and metrics. */
  async function routeOther(request: IncomingMessage, response: ServerResponse, path: string) {
    // REST, GraphQL and the dashboard answer a page on another origin as JSON-RPC does (`--cors-origins`).
    if (answersAcrossOrigins(path)) for (const [name, value] of Object.entries(cors.headers(request))) response.setHeader(name, value)
    if (await rest(request, response)) return
    if (path === GRAPHQL_PATH) {
      const wait = await admitter(publicEndpoint(request))(1)
      if (wait > 0) {
        const limited = new RateLimitedError(wait)
        return sendJson(
          request,
          response,
          limited.httpStatus,
          { errors: [{ message: limited.message, extensions: { code: limited.graphqlCode } }] },
          limited.headers,
        )
      }
      // HEAD is GET without the body (RFC 9110 §9.3.2), which yoga refuses: Node's response already leaves the
      // body out for a HEAD request, whatever the method yoga is told.
      if (request.method === 'HEAD') request.method = 'GET'
      return graphql(request, response)
    }
    if (path.startsWith(GRAPHIQL_ASSETS_PATH) && (request.method === 'GET' || request.method === 'HEAD') && (await serveGraphiqlAsset(request, response, path)))
      return
    if (OPERATIONS_PATHS.has(path) && request.method !== 'GET' && request.method !== 'HEAD')
      return sendHttpError(request, response, new HttpMethodNotAllowedError(request.method ?? '', ['GET', 'HEAD']))
    if (path === '/healthz') return sendJson(request, response, 200, { status: 'ok' })
    if (path === '/metrics') {
      const { contentType, body } = cluster === null ? await metrics.scrape() : await cluster.request('metrics')
      return sendCompressible(request, response, 200, body, { 'content-type': contentType })
    }
    if (path === '/readyz') {
      const readiness = (await config.readiness?.()) ?? { ready: true, details: {} }
      return sendJson(request, response, readiness.ready ? 200 : 503, { ready: readiness.ready, ...readiness.details })
    }
    return sendHttpError(request, response, new NotFoundError(`no route for ${request.method} ${path}`))
  }

  function failUnexpectedly(response: ServerResponse, request: IncomingMessage, error: unknown) {
    logUnexpected(error, 'unhandled error in request')
    if (!response.headersSent) void sendJson(request, response, 500, { jsonrpc: '2.0', id: null, error: toJsonRpcError(new InternalError()) })
    else response.destroy()
  }

  /** Refused before routing: in the JSON-RPC shape on a JSON-RPC path, the REST shape elsewhere. */
  function refuseRequest(request: IncomingMessage, response: ServerResponse, error: FlashgateError) {
    if (workerHeader !== null) response.setHeader('x-flashgate-worker', workerHeader)
    if (isJsonRpcPath(pathOf(request.url))) return sendJsonRpcError(request, response, error, cors.headers(request))
    return sendHttpError(request, response, error)
  }

  /** Headers of an answer written on the connection itself (`endWithJson`). */
  const connectionHeaders: Record<string, string> = workerHeader === null ? {} : { 'x-flashgate-worker': workerHeader }

  // Node's own 300 s let a client holding connections open with a trickle of bytes keep each for five minutes.
  const requestTimeout = (config.requestTimeoutSeconds ?? DEFAULT_REQUEST_TIMEOUT_S) * 1_000
  const serverOptions = {
    maxHeaderSize: MAX_HEADER_BYTES,
    ServerResponse: metrics.Response,
    requestTimeout,
    headersTimeout: requestTimeout,
    // How often Node looks for requests past their time (its default, 30 s, would let one run up to twice it).
    connectionsCheckingInterval: Math.min(5_000, requestTimeout / 4),
  }
  const server: Server = createHttpServer(serverOptions, (request, response) => {
    const path = pathOf(request.url)
    if (workerHeader !== null) response.setHeader('x-flashgate-worker', workerHeader)
    const coding = request.headers['content-encoding']
    if (coding !== undefined && !decodes(path, coding))
      return refuseRequest(request, response, new UnsupportedContentEncodingError(coding, path, codingsTaken(path)))
    let routed: MaybePromise<void>
    try {
      routed = route(request, response, path)
    } catch (error) {
      return failUnexpectedly(response, request, error)
    }
    if (routed instanceof Promise) routed.catch((error: unknown) => failUnexpectedly(response, request, error))
  })
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => refuseClientError(error, socket, connectionHeaders))
  // Node answers any other expectation with an empty 417.
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) =>
    refuseRequest(request, response, new ExpectationFailedError(request.headers.expect ?? '')),
  )
  // Node would send the 100 at once, before the handler could refuse the body; it goes when the body is read.
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    continueWhenRead(request, response)
    server.emit('request', request, response)
  })
  server.keepAliveTimeout = 65_000

  // JSON-RPC over WebSocket on the same paths: every method, plus eth_subscribe / eth_unsubscribe.
  const sockets = new WebSocketServer({ noServer: true, maxPayload: MAX_WS_MESSAGE_BYTES })
  if (workerHeader !== null) sockets.on('headers', (headers) => headers.push(`x-flashgate-worker: ${workerHeader}`))
  server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    // Node took its own error listener off the socket when it handed it over; until ws adds one (and on the
    // refusals below, which have none), a client's reset would be an uncaught 'error' that ends the process.
    socket.on('error', () => socket.destroy())
    if (!asksForWebSocket(request)) {
      // Given back to the HTTP server as a new connection (a documented use of 'connection'), the head first.
      socket.unshift(Buffer.concat([headWithoutUpgrade(request), head]))
      server.emit('connection', socket)
      return
    }
    const path = pathOf(request.url)
    if (!servesApis) {
      const refusal = toHttpError(new NotFoundError(`this process only ingests (--role ingest): WebSockets are served by the serving processes`))
      return endWithJson(socket, refusal.status, refusal.body, connectionHeaders)
    }
    Promise.resolve(path)
      .then((path) => endpointOf(request, path))
      .then(
        (endpoint) => (endpoint === null ? refuseUpgrade(socket, path) : upgrade(request, socket, head, endpoint)),
        (error: unknown) => {
          if (!isFlashgateError(error)) logUnexpected(error, 'could not resolve a JSON-RPC endpoint')
          const failure = isFlashgateError(error) ? error : new InternalError()
          const body = { jsonrpc: '2.0', id: null, error: toJsonRpcError(failure) }
          endWithJson(socket, failure.httpStatus === 200 ? 500 : failure.httpStatus, body, { ...connectionHeaders, ...failure.headers })
        },
      )
      .catch((error: unknown) => {
        logger.error({ err: loggableError(error) }, 'could not open a WebSocket')
        socket.destroy()
      })
  })

  /** A WebSocket asked for on a path that has none: GraphQL's subscriptions are server-sent events. */
  function refuseUpgrade(socket: Duplex, path: string) {
    if (path === GRAPHQL_PATH) {
      const message = 'GraphQL is not served over WebSocket: subscribe with server-sent events (POST /graphql with Accept: text/event-stream)'
      return endWithJson(socket, 400, { errors: [{ message, extensions: { code: 'BAD_REQUEST' } }] }, connectionHeaders)
    }
    const refusal = toHttpError(new NotFoundError(`no WebSocket at ${path}: JSON-RPC over WebSocket is served on /, /rpc and /rpc/<apiKey>`))
    return endWithJson(socket, refusal.status, refusal.body, { ...connectionHeaders, ...refusal.headers })
  }

  /** What each client holds open over WebSockets: connections, and its subscriptions' arguments (a share of them all). */
  const webSocketClients = new Map<string, { connections: number; bytes: number; sockets: Set<WebSocket> }>()

  function openWebSocket(client: string, ws: WebSocket): SubscriptionShare | null {
    const holding = webSocketClients.get(client) ?? { connections: 0, bytes: 0, sockets: new Set<WebSocket>() }
    if (holding.connections >= MAX_WEBSOCKETS_PER_CLIENT) return null
    holding.connections++
    holding.sockets.add(ws)
    webSocketClients.set(client, holding)
    return {
      take(bytes) {
        if (holding.bytes + bytes > MAX_SUBSCRIPTION_BYTES_PER_CLIENT) return false
        holding.bytes += bytes
        return true
      },
      give(bytes) {
        holding.bytes -= bytes
      },
    }
  }

  function closeWebSocket(client: string, ws: WebSocket) {
    const holding = webSocketClients.get(client)
    holding?.sockets.delete(ws)
    if (holding !== undefined && --holding.connections === 0) webSocketClients.delete(client)
  }

  /** Whether a socket, or its client over all of its sockets, has let too much of our output pile up unread. */
  function backlogged(client: string, ws: WebSocket): boolean {
    if (ws.bufferedAmount > MAX_WS_BUFFERED_BYTES) return true
    if (ws.bufferedAmount < WS_BACKLOG_WORTH_COUNTING) return false
    let total = 0
    for (const socket of webSocketClients.get(client)?.sockets ?? []) total += socket.bufferedAmount
    return total > MAX_WS_BUFFERED_BYTES_PER_CLIENT
  }

  function upgrade(request: IncomingMessage, socket: Parameters<typeof sockets.handleUpgrade>[1], head: Buffer, endpoint: Endpoint) {
    // Refused here in the JSON-RPC shape, where ws would answer plain text.
    const refusal =
      handshakeRefusal(request) ??
      ((webSocketClients.get(endpoint.client)?.connections ?? 0) >= MAX_WEBSOCKETS_PER_CLIENT ? new TooManyWebSocketsError(MAX_WEBSOCKETS_PER_CLIENT) : null)
    if (refusal !== null)
      return endWithJson(socket, refusal.httpStatus, { jsonrpc: '2.0', id: null, error: toJsonRpcError(refusal) }, { ...connectionHeaders, ...refusal.headers })
    sockets.handleUpgrade(request, socket, head, (ws) => {
      // Upgrades racing past the check above: the one over the bound is closed at once ("try again later").
      const share = openWebSocket(endpoint.client, ws)
      if (share === null) {
        ws.close(1013, 'too many open WebSockets from this client')
        return
      }
      /** Sends JSON text (a text frame, also when it comes as UTF-8 bytes). */
      const send = (json: string | Buffer) => {
        if (ws.readyState !== ws.OPEN) return
        if (backlogged(endpoint.client, ws)) {
          logger.warn({ bufferedBytes: ws.bufferedAmount }, 'closing a WebSocket that does not read its messages')
          ws.terminate()
          return
        }
        ws.send(json, { binary: false })
      }
      const subscriptions = createSubscriptions({
        chainEvents: config.chainEvents ?? null,
        notify: (subscription, result) => send(JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription, result } })),
        share,
      })
      const local = {
        // Sent as a notification, it would open a subscription whose id the client never learns: geth opens none.
        eth_subscribe: async (params: unknown, { notification }: { notification: boolean }) => (notification ? null : subscriptions.subscribe(params)),
        eth_unsubscribe: async (params: unknown) => subscriptions.unsubscribe(params),
      }
      const admit = admitter(endpoint)
      ws.on('message', (data) => {
        Promise.resolve(data.toString())
          .then((text) => endpoint.jsonRpc.handle(text, { local, admit, client: endpoint.client }))
          // The same serialiser as HTTP: raw JSON results (whole-block receipts) go out as they are.
          .then((reply) => reply.body !== null && send(serializeJsonRpc(reply.body)))
          .catch((error: unknown) => {
            logUnexpected(error, 'unhandled error on a WebSocket')
            // Answered all the same: a client waits for every request it sent.
            send(JSON.stringify({ jsonrpc: '2.0', id: null, error: toJsonRpcError(new InternalError()) }))
          })
      })
      ws.on('close', () => {
        subscriptions.close()
        closeWebSocket(endpoint.client, ws)
      })
      ws.on('error', () => ws.terminate())
    })
  }

  return {
    server,
    metrics,
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
      graphql.endStreams()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeIdleConnections()
      const timer = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS)
      await closed
      clearTimeout(timer)
    },
  }
}
