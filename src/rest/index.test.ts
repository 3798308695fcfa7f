import { createServer, request as httpRequest, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pino } from 'pino'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDb, type Db } from '../db/index.js'
import { createResolvers } from '../resolvers/index.js'
import { createRestHandler } from './index.js'

let db: Db
let server: Server
let port: number

/** One raw request: `fetch` would normalise the target, and these targets are the point. */
function get(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path, method: 'GET' }, (response) => {
      response.resume()
      resolve(response.statusCode ?? 0)
    })
      .on('error', reject)
      .end()
  })
}

beforeAll(async () => {
  db = await createDb({ databaseUrl: 'memory://' })
  const rest = createRestHandler({ resolvers: createResolvers({ db, upstream: null }), logger: pino({ level: 'silent' }) })
  // What the gateway's server does around the REST handler: 404 for what it does not take, 500 if it throws.
  server = createServer((request, response) => {
    rest(request, response).then(
      (handled) => handled || response.writeHead(404).end(),
      () => response.writeHead(500).end(),
    )
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as AddressInfo).port
})

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve))
  await db?.close()
})

// Found by the fuzz suite (test/fuzz.test.ts): `new URL` throws on these targets, and the gateway answered 500.
test.each(['//', '///', '//0x66757a7a2d77616c6c65742d302e2e2e2e2e2e2e', '//[::1', '/\\', '//@/'])(
  'GET %s is not a REST path (404), not a 500',
  async (path) => {
    expect(await get(path)).toBe(404)
  },
)

test('a REST path still reaches its route', async () => {
  expect(await get('/v1/agents/builder-codes/0x1234')).toBe(400)
})
