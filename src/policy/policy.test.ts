import type { IncomingMessage } from 'node:http'
import { describe, expect, test } from 'vitest'
import { serveConfigSchema } from '../config.js'
import { clientAddress, createPolicies, createRateLimiter, type RateLimiter } from './index.js'

describe('createPolicies', () => {
  test('defaults: the public endpoint gets a 2,000-block range, refuses eth_getBlockReceipts and is rate limited', () => {
    const policies = createPolicies(serveConfigSchema.parse({ upstreamRpc: 'http://127.0.0.1:1' }))
    expect(policies.public).toMatchObject({ rateLimit: 50, maxBatchSize: 100, maxBodyBytes: 1_048_576, logLimits: { maxBlockRange: 2_000, maxLogs: 10_000 } })
    expect([...policies.public.refusedMethods]).toEqual(['eth_getBlockReceipts'])
    expect(policies.dedicated).toMatchObject({ maxBatchSize: 1_000, maxBodyBytes: 5_242_880, logLimits: { maxBlockRange: 10_000, maxLogs: 10_000 } })
    expect(policies.dedicated.refusedMethods.size).toBe(0)
  })
})

describe('clientAddress', () => {
  const request = (forwarded?: string) =>
    ({ headers: forwarded === undefined ? {} : { 'x-forwarded-for': forwarded }, socket: { remoteAddress: '127.0.0.1' } }) as unknown as IncomingMessage

  test('without --trust-proxy a forged X-Forwarded-For is ignored', () => {
    expect(clientAddress(request('1.2.3.4'), false)).toBe('127.0.0.1')
  })

  test('behind a trusted proxy the client is the address the proxy added, the last: those before it are the client’s to forge', () => {
    expect(clientAddress(request('1.2.3.4'), true)).toBe('1.2.3.4')
    // nginx's $proxy_add_x_forwarded_for appends the peer to what the client sent.
    expect(clientAddress(request('10.0.0.7, 203.0.113.7'), true)).toBe('203.0.113.7')
    expect(clientAddress(request('10.0.0.8,203.0.113.7, '), true)).toBe('203.0.113.7')
    expect(clientAddress(request(''), true)).toBe('127.0.0.1')
    expect(clientAddress(request(), true)).toBe('127.0.0.1')
  })
})

describe('createRateLimiter', () => {
  const takeMany = (limiter: RateLimiter, count: number, client: string, options?: { rate?: number }) =>
    Promise.all(Array.from({ length: count }, () => limiter.take(client, options)))

  test('admits a burst of one second, then the rate; buckets are per client', async () => {
    let now = 0
    const limiter = createRateLimiter({ ratePerSecond: 10, now: () => now })
    expect((await takeMany(limiter, 15, 'a')).filter((wait) => wait === 0)).toHaveLength(10)
    expect(await limiter.take('b')).toBe(0)
    now += 500
    expect((await takeMany(limiter, 10, 'a')).filter((wait) => wait === 0)).toHaveLength(5)
  })

  test('a costly request goes through once, then its client waits until the debt is repaid', async () => {
    let now = 0
    const limiter = createRateLimiter({ ratePerSecond: 4, now: () => now })
    expect(await limiter.take('a', { cost: 10 })).toBe(0)
    expect(await limiter.take('a')).toBe(2)
    now += 1_750
    expect(await limiter.take('a')).toBe(0)
  })

  test('a per-client rate overrides the default; 0 means no limit', async () => {
    const limiter = createRateLimiter({ ratePerSecond: 0, now: () => 0 })
    expect((await takeMany(limiter, 100, 'free')).every((wait) => wait === 0)).toBe(true)
    expect(await takeMany(limiter, 3, 'key:1', { rate: 2 })).toEqual([0, 0, 1])
  })
})
