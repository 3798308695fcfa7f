import { beforeAll, describe, expect, test } from 'vitest'
import { useRedisPair } from '../../test/fixtures/redis.js'
import type { SharedRedis } from '../redis/index.js'
import { createRateLimiter, type RateLimiter } from './rate-limit.js'

const takeMany = (limiter: RateLimiter, count: number, client: string, options?: { cost?: number; rate?: number }) =>
  Promise.all(Array.from({ length: count }, () => limiter.take(client, options)))

describe('createRateLimiter with Redis', () => {
  // Two connections, as two serving processes have.
  const connections = useRedisPair()
  let redis: SharedRedis
  let other: SharedRedis
  beforeAll(() => {
    ;({ redis, other } = connections())
  })

  test('two limiters on one Redis take from one bucket per client: the burst is shared, not doubled', async () => {
    const here = createRateLimiter({ ratePerSecond: 10, redis, name: 'rpc' })
    const there = createRateLimiter({ ratePerSecond: 10, redis: other, name: 'rpc' })
    const waits = (await Promise.all([takeMany(here, 15, 'ip:a'), takeMany(there, 15, 'ip:a')])).flat()
    // One second's burst of 10, plus at most what refilled while the 30 calls were answered.
    const admitted = waits.filter((wait) => wait === 0).length
    expect(admitted).toBeGreaterThanOrEqual(10)
    expect(admitted).toBeLessThanOrEqual(11)
    expect(waits.filter((wait) => wait > 0).every((wait) => wait === 1)).toBe(true)
    // Another client, and another limiter's buckets, are their own.
    expect(await there.take('ip:b')).toBe(0)
    expect(await createRateLimiter({ ratePerSecond: 10, redis, name: 'registration' }).take('ip:a')).toBe(0)
  })

  test('a costly request goes through once, then its client waits on every process until the debt is repaid', async () => {
    const here = createRateLimiter({ ratePerSecond: 4, redis, name: 'rpc' })
    const there = createRateLimiter({ ratePerSecond: 4, redis: other, name: 'rpc' })
    expect(await here.take('key:1', { cost: 10 })).toBe(0)
    // Debt of 6 against a rate of 4: ceil((1 + 6) / 4) = 2 s.
    expect(await there.take('key:1')).toBe(2)
    // The bucket expires once it would be full again (debt repaid, then a full burst, plus a second of slack).
    const ttl = await redis.client.pttl(redis.key('rate:rpc:key:1'))
    expect(ttl).toBeGreaterThan(2_000)
    expect(ttl).toBeLessThanOrEqual(3_500)
  })

  test('a rate of 0 never asks Redis; a per-client rate overrides the default', async () => {
    const limiter = createRateLimiter({ ratePerSecond: 0, redis, name: 'rpc' })
    expect((await takeMany(limiter, 50, 'free')).every((wait) => wait === 0)).toBe(true)
    expect(await redis.client.exists(redis.key('rate:rpc:free'))).toBe(0)
    expect(await takeMany(limiter, 3, 'key:2', { rate: 2 })).toEqual([0, 0, 1])
  })
})
