import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Logger } from 'pino'
import { WebSocketServer } from 'ws'
import { createJsonRpcHandler } from '../jsonrpc/index.js'
import { type ChainEvents, createSubscriptions } from '../jsonrpc/subscriptions.js'
import type { PendingState } from '../pending/index.js'
import type { Resolvers } from '../resolvers/index.js'
import { createGraphqlServer, GRAPHQL_PATH } from '../schema/index.js'
import { createRestHandler } from '../rest/index.js'

/** Largest request body accepted, in bytes: a batch of 1,000 filters fits comfortably. */
const DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024
/** Time a connection gets to drain on shutdown before it is cut. */
const SHUTDOWN_GRACE_MS = 10_000
/** Largest WebSocket message accepted, in bytes. */
const MAX_WS_MESSAGE_BYTES = 1024 * 1024

export type Readiness = () => Promise<{ ready: boolean; details: Record<string, unknown> }>

export type ServerConfig = {
  resolvers: Resolvers
  logger: Logger
  port: number
  host?: string
  maxBodyBytes?: number
  readiness?: Readiness
  /** Sources for `eth_subscribe` on the WebSocket endpoint. */
  chainEvents?: ChainEvents | null
  pending?: PendingState | null
  /** Builder-code registrations per second per client address (src/rest); 0 turns the limit off. */
  registrationRateLimit?: number
}

class BodyTooLargeError extends Error {
  override readonly name = 'BodyTooLargeError'
}

function readBody(request: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    request.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        reject(new BodyTooLargeError())
        request.destroy()
        return
      }
      chunks.push(chunk)
    })
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    request.on('error', reject)
  })
}

function sendJson(response: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body)
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  response.end(text)
}

/** The gateway's HTTP front: JSON-RPC on `/` and `/rpc`, health and readiness. One port for everything. */
export function createServer(config: ServerConfig) {
  const { logger } = config
  const maxBodyBytes = config.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  const jsonRpc = createJsonRpcHandler({ resolvers: config.resolvers, logger })
  const graphql = createGraphqlServer({ resolvers: config.resolvers, logger, chainEvents: config.chainEvents, pending: config.pending })
  const rest = createRestHandler({ resolvers: config.resolvers, logger, registrationRateLimit: config.registrationRateLimit })

  async function handleJsonRpc(request: IncomingMessage, response: ServerResponse) {
    let body: string
    try {
      body = await readBody(request, maxBodyBytes)
    } catch (error) {
      if (error instanceof BodyTooLargeError)
        sendJson(response, 413, { jsonrpc: '2.0', id: null, error: { code: -32600, message: `request body exceeds ${maxBodyBytes} bytes` } })
      return
    }
    const reply = await jsonRpc.handle(body)
    if (reply.body === null) {
      response.writeHead(204).end()
      return
    }
    sendJson(response, reply.status, reply.body)
  }

  async function route(request: IncomingMessage, response: ServerResponse) {
    const path = (request.url ?? '/').split('?')[0]
    if (path === '/' || path === '/rpc') {
      if (request.method === 'POST') return handleJsonRpc(request, response)
      response.setHeader('allow', 'POST')
      return sendJson(response, 405, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'use POST for JSON-RPC' } })
    }
    if (await rest(request, response)) return
    if (path === GRAPHQL_PATH) return graphql(request, response)
    if (path === '/healthz') return sendJson(response, 200, { status: 'ok' })
    if (path === '/readyz') {
      const readiness = (await config.readiness?.()) ?? { ready: true, details: {} }
      return sendJson(response, readiness.ready ? 200 : 503, { ready: readiness.ready, ...readiness.details })
    }
    sendJson(response, 404, { error: { code: 'not_found', message: `no route for ${request.method} ${path}` } })
  }

  const server: Server = createHttpServer((request, response) => {
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
    const path = (request.url ?? '/').split('?')[0]
    if (path !== '/' && path !== '/rpc') {
      socket.destroy()
      return
    }
    sockets.handleUpgrade(request, socket, head, (ws) => {
      const send = (message: unknown) => {
        if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message))
      }
      const subscriptions = createSubscriptions({
        resolvers: config.resolvers,
        chainEvents: config.chainEvents ?? null,
        pending: config.pending ?? null,
        logger,
        notify: (subscription, result) => send({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription, result } }),
      })
      const local = {
        eth_subscribe: async (params: unknown) => subscriptions.subscribe(params),
        eth_unsubscribe: async (params: unknown) => subscriptions.unsubscribe(Array.isArray(params) ? params[0] : undefined),
      }
      ws.on('message', (data) => {
        jsonRpc.handle(data.toString(), local).then(
          (reply) => reply.body !== null && send(reply.body),
          (error: unknown) => logger.error({ err: error }, 'unhandled error on a WebSocket'),
        )
      })
      ws.on('close', () => subscriptions.close())
      ws.on('error', () => ws.terminate())
    })
  })

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
