import { randomBytes, timingSafeEqual } from 'node:crypto'
import { closeSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs'
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { z } from 'zod'
import { isApiError, loggableError } from '../errors.js'
import { readBody } from '../http/read-body.js'
import { API_KEY_POLICIES } from '../config.js'
import type { ApiKeyRecord, Resolvers } from '../resolvers/index.js'
import { ADMIN_FILE, type AdminEndpoint, type AdminKeyRecord } from './admin-endpoint.js'

const ADMIN_HOST = '127.0.0.1'
const ADMIN_TOKEN_BYTES = 32
const ADMIN_MAX_BODY_BYTES = 16 * 1024

const createParams = z.object({ name: z.string(), policy: z.enum(API_KEY_POLICIES), rateLimit: z.number().int().min(0).max(2_147_483_647) })
const revokeParams = z.object({ nameOrId: z.string() })

const toWire = (record: ApiKeyRecord): AdminKeyRecord => ({
  ...record,
  createdAt: record.createdAt.toISOString(),
  revokedAt: record.revokedAt?.toISOString() ?? null,
})

/** Writes the file readable by its owner only, whole or not at all (a reader never sees half a token). */
function writePrivateFile(path: string, text: string) {
  const temporary = `${path}.${process.pid}.tmp`
  const fd = openSync(temporary, 'w', 0o600)
  try {
    writeSync(fd, text)
  } finally {
    closeSync(fd)
  }
  renameSync(temporary, path)
}

function send(response: ServerResponse, status: number, body: unknown) {
  const json = JSON.stringify(body)
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) })
  response.end(json)
}

/**
 * `flashgate keys` for a running gateway on PGlite: `GET /keys`, `POST /keys` (`{ name, policy, rateLimit }`)
 * and `POST /keys/revoke` (`{ nameOrId }`), on loopback, each with `Authorization: Bearer <token>`.
 */
export async function startAdminServer({ resolvers, directory, logger }: { resolvers: Resolvers; directory: string; logger: Logger }) {
  const token = randomBytes(ADMIN_TOKEN_BYTES).toString('base64url')
  const expected = Buffer.from(`Bearer ${token}`)
  const authorized = (request: IncomingMessage) => {
    const given = Buffer.from(request.headers.authorization ?? '')
    return given.length === expected.length && timingSafeEqual(given, expected)
  }

  async function handle(request: IncomingMessage, response: ServerResponse) {
    if (!authorized(request)) return send(response, 401, { error: 'unauthorized' })
    const path = new URL(request.url ?? '/', 'http://admin').pathname
    if (path === '/keys' && request.method === 'GET') return send(response, 200, { keys: (await resolvers.listApiKeys()).map(toWire) })
    if (request.method !== 'POST' || (path !== '/keys' && path !== '/keys/revoke')) return send(response, 404, { error: 'not found' })
    let body: unknown
    try {
      body = JSON.parse(await readBody(request, ADMIN_MAX_BODY_BYTES))
    } catch {
      return send(response, 400, { error: 'the body is not JSON' })
    }
    if (path === '/keys') {
      const params = createParams.safeParse(body)
      if (!params.success) return send(response, 400, { error: 'expected { name, policy, rateLimit }' })
      const { key, record } = await resolvers.createApiKey(params.data)
      return send(response, 200, { key, record: toWire(record) })
    }
    const params = revokeParams.safeParse(body)
    if (!params.success) return send(response, 400, { error: 'expected { nameOrId }' })
    const record = await resolvers.revokeApiKey(params.data.nameOrId)
    return send(response, 200, { record: record === null ? null : toWire(record) })
  }

  const server = createHttpServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (isApiError(error)) return send(response, 400, { error: error.message })
      logger.error({ err: loggableError(error) }, 'admin request failed')
      if (!response.headersSent) send(response, 500, { error: 'internal error (see the gateway log)' })
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, ADMIN_HOST, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const url = `http://${ADMIN_HOST}:${(server.address() as AddressInfo).port}`
  const path = join(directory, ADMIN_FILE)
  writePrivateFile(path, `${JSON.stringify({ pid: process.pid, url, token } satisfies AdminEndpoint)}\n`)
  let closed = false
  return {
    url,
    async close() {
      if (closed) return
      closed = true
      try {
        unlinkSync(path)
      } catch {}
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
