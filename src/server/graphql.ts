import { createHash } from 'node:crypto'
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import { LimitExceededError } from '../errors.js'
import { createUnexpectedErrorLog } from '../logger.js'
import { sendCompressible } from '../http/compress.js'
import { etagMatches } from '../http/etag.js'
import { clientAddress } from '../policy/index.js'
import type { GraphqlServer } from '../schema/server.js'

/** Refusals yoga answers with an empty body, given one in the GraphQL-over-HTTP error shape. */
const EMPTY_REFUSALS: Record<number, { code: string; message: string }> = {
  405: { code: 'METHOD_NOT_ALLOWED', message: 'use GET or POST for GraphQL' },
  406: { code: 'NOT_ACCEPTABLE', message: 'subscriptions are served as server-sent events: send Accept: text/event-stream' },
  415: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'expected content-type application/json (or application/graphql-response+json)' },
}
/** Answers streamed as they come (subscriptions, incremental delivery): never buffered or compressed. */
const STREAMING_TYPES = ['text/event-stream', 'multipart/mixed']

function nodeHeaders(answer: Response): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {}
  // @whatwg-node's Headers keep the case they were set in.
  answer.headers.forEach((value, name) => {
    const key = name.toLowerCase()
    if (key !== 'set-cookie' && key !== 'content-length') headers[key] = value
  })
  const cookies = answer.headers.getSetCookie()
  if (cookies.length > 0) headers['set-cookie'] = cookies
  return headers
}

/** An event stream whose client has left this much unread is closed (as a WebSocket is, src/server/index.ts). */
const MAX_STREAM_BUFFERED_BYTES = 16 * 1024 * 1024

/** Subscription streams one client address may hold open at once (JSON-RPC over WebSocket: 100 per connection). */
export const MAX_GRAPHQL_STREAMS_PER_CLIENT = 100

/** The event that ends a GraphQL over SSE stream (graphql-sse's distinct connections mode, which yoga speaks). */
const COMPLETE_EVENT = 'event: complete\ndata:\n\n'

/**
 * Writes an event stream as it comes; a client that stops reading is cut off rather than buffered for.
 * `open` (the server's open streams) gets a function that ends this one cleanly, for a server that stops.
 */
export async function streamAnswer(
  response: ServerResponse,
  answer: Response,
  headers: OutgoingHttpHeaders,
  logger: Logger,
  open: Set<() => void> = new Set(),
) {
  response.writeHead(answer.status, headers)
  if (answer.body === null) return void response.end()
  // At once, before the first event: the client knows its subscription is taken (Node holds headers back
  // until a body is written, and the first event may be a block away).
  response.flushHeaders()
  const reader = answer.body.getReader()
  response.once('close', () => void reader.cancel().catch(() => {}))
  let stopping = false
  const stop = () => {
    stopping = true
    void reader.cancel().catch(() => {})
  }
  open.add(stop)
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done || response.destroyed) break
      response.write(value)
      if (response.writableLength > MAX_STREAM_BUFFERED_BYTES) {
        logger.warn({ bufferedBytes: response.writableLength }, 'closing an event stream that does not read its events')
        return void response.destroy()
      }
    }
  } finally {
    open.delete(stop)
  }
  // The server stops: the subscription is over, and its client told so (not left to find a reset connection).
  if (stopping && !response.destroyed) response.write(COMPLETE_EVENT)
  response.end()
}

/**
 * Serves yoga's answer on Node's response: whole answers (results, GraphiQL's page) compressed when the client
 * accepts it, refusals given a body, the GraphiQL page an `ETag`; event streams written as they come.
 */
export function createGraphqlRoute(
  graphql: GraphqlServer,
  logger: Logger,
  /**
   * Who a client is (its address, as the rate limiter reads it: `X-Forwarded-For` with `--trust-proxy`) and how
   * many streams it may hold open.
   */
  clients: { trustProxy: boolean; maxStreams?: number },
) {
  const logUnexpected = createUnexpectedErrorLog(logger)
  const open = new Set<() => void>()
  const streamsByClient = new Map<string, number>()
  const maxStreams = clients.maxStreams ?? MAX_GRAPHQL_STREAMS_PER_CLIENT
  return Object.assign(serveGraphql, {
    /** Ends every open subscription stream, each with its `complete` event (the server stops). */
    endStreams() {
      for (const stop of [...open]) stop()
    },
  })

  async function serveGraphql(request: IncomingMessage, response: ServerResponse): Promise<void> {
    let answer: Response
    try {
      answer = await graphql.handleNodeRequestAndResponse(request, response, { req: request, res: response })
    } catch (error) {
      logUnexpected(error, 'unexpected error while serving GraphQL')
      const body = JSON.stringify({ errors: [{ message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] })
      return sendCompressible(request, response, 500, body, { 'content-type': 'application/json' })
    }
    const headers = nodeHeaders(answer)
    const contentType = String(headers['content-type'] ?? '')
    if (STREAMING_TYPES.some((type) => contentType.startsWith(type))) return streamCounted(request, response, answer, headers)
    let body = Buffer.from(await answer.arrayBuffer())
    const refusal = EMPTY_REFUSALS[answer.status]
    if (body.length === 0 && refusal !== undefined) {
      body = Buffer.from(JSON.stringify({ errors: [{ message: refusal.message, extensions: { code: refusal.code } }] }))
      headers['content-type'] = 'application/json; charset=utf-8'
    }
    if (answer.status === 200 && contentType.startsWith('text/html')) {
      // GraphiQL's page: small (its assets are cached apart) but revalidated, so a new version shows at once.
      const etag = `W/"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`
      headers.etag = etag
      headers['cache-control'] = 'no-cache'
      if (etagMatches(request.headers['if-none-match'], etag)) {
        response.writeHead(304, { etag, 'cache-control': 'no-cache' })
        return void response.end()
      }
    }
    return sendCompressible(request, response, answer.status, body, headers)
  }

  /** A stream past its client's cap is refused (429, `LIMIT_EXCEEDED`) and its subscription ended before any event. */
  async function streamCounted(request: IncomingMessage, response: ServerResponse, answer: Response, headers: OutgoingHttpHeaders) {
    const client = clientAddress(request, clients.trustProxy)
    const streams = streamsByClient.get(client) ?? 0
    if (streams >= maxStreams) {
      await answer.body?.cancel().catch(() => {})
      const refused = new LimitExceededError(`too many open subscriptions from this client: at most ${maxStreams}; close one first`)
      const body = JSON.stringify({ errors: [{ message: refused.message, extensions: { code: refused.graphqlCode } }] })
      return sendCompressible(request, response, 429, body, { 'content-type': 'application/json; charset=utf-8' })
    }
    streamsByClient.set(client, streams + 1)
    try {
      await streamAnswer(response, answer, headers, logger, open)
    } finally {
      const left = (streamsByClient.get(client) ?? 1) - 1
      if (left > 0) streamsByClient.set(client, left)
      else streamsByClient.delete(client)
    }
  }
}
