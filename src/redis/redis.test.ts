import type { ChildProcess } from 'node:child_process'
import { pino } from 'pino'
import { afterAll, expect, test } from 'vitest'
import { createRateLimiter } from '../policy/rate-limit.js'
import { createRedis, type SharedRedis } from './index.js'
import { freePort } from '../../test/fixtures/ports.js'
import { startRedisServer, stopRedisServer } from '../../test/fixtures/redis.js'

/** Longest a limiter may take to answer while Redis is down: it must not wait on it. */
const OUTAGE_ANSWER_MAX_MS = 50
/** Reconnection backs off to 2 s between attempts: Redis counts as back within a few of them. */
const RECONNECT_WITHIN_MS = 6_000

const servers: ChildProcess[] = []
const connections: SharedRedis[] = []
afterAll(async () => {
  for (const connection of connections) await connection.close()
  for (const server of servers) await stopRedisServer(server)
})

test('a Redis outage never fails a request: each process limits alone meanwhile, logs it once and counts it, then shares again', async () => {
  const port = await freePort()
  const messages: string[][] = [[], []]
  const connect = async (index: number) => {
    const logger = pino({ level: 'info' }, { write: (line: string) => messages[index]!.push(JSON.parse(line).msg) })
    const redis = await createRedis({ url: `redis://127.0.0.1:${port}`, prefix: 'outage-test:', logger })
    connections.push(redis)
    return redis
  }
  // Two processes start while Redis is not there yet: they serve after the connect wait, each on its own.
  const [here, there] = await Promise.all([connect(0), connect(1)])
  expect(here.status().connected).toBe(false)
  const limiters = [here, there].map((redis) => createRateLimiter({ ratePerSecond: 2, redis, name: 'rpc' }))
  const admittedFor = async (client: string) => {
    const waits = await Promise.all(limiters.flatMap((limiter) => [limiter.take(client), limiter.take(client), limiter.take(client)]))
    return waits.filter((wait) => wait === 0).length
  }
  // Per process: each admits its own burst of 2.
  expect(await admittedFor('down-at-start')).toBe(4)

  servers.push(await startRedisServer(port))
  await expect.poll(() => here.status().connected && there.status().connected, { timeout: RECONNECT_WITHIN_MS, interval: 100 }).toBe(true)
  // Shared: one burst of 2 for both processes.
  expect(await admittedFor('shared')).toBe(2)

  await stopRedisServer(servers.pop()!)
  const started = Date.now()
  expect(await admittedFor('down-later')).toBe(4)
  expect(Date.now() - started).toBeLessThan(OUTAGE_ANSWER_MAX_MS)
  expect(here.status()).toMatchObject({ connected: false, fallbacks: { 'rate-limit': expect.any(Number) } })
  expect(here.status().fallbacks['rate-limit']).toBeGreaterThanOrEqual(6)

  servers.push(await startRedisServer(port))
  await expect.poll(() => here.status().connected && there.status().connected, { timeout: RECONNECT_WITHIN_MS, interval: 100 }).toBe(true)
  expect(await admittedFor('shared-again')).toBe(2)
  // Each outage is one warning per process, however many requests fell back, and one notice of recovery.
  for (const logged of messages) {
    expect(logged.filter((message) => message.startsWith('Redis unavailable'))).toHaveLength(2)
    expect(logged.filter((message) => message.startsWith('Redis is back'))).toHaveLength(2)
  }
}, 30_000)
