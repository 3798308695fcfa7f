import { LRUCache } from 'lru-cache'
import type { ClusterLink } from '../cluster/link.js'
import type { SharedRedis } from '../redis/index.js'

/** Clients tracked at once; the least recently seen are forgotten first (and start with a full bucket). */
const MAX_TRACKED_CLIENTS = 100_000
/** A shared bucket outlives the time it takes to fill up again by this much, then Redis forgets it (full). */
const SHARED_BUCKET_SLACK_MS = 1_000

/**
 * The token bucket of `createRateLimiter`, run inside Redis so that every serving process takes from one
 * bucket per client; the clock is Redis's own (`TIME`), so that processes on different hosts agree.
 * KEYS[1]: the bucket. ARGV: rate per second, capacity, cost, slack (ms). Returns the whole seconds to wait.
 */
const TAKE_SCRIPT = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local rate, capacity, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(bucket[1]), tonumber(bucket[2])
if tokens == nil or at == nil then tokens, at = capacity, now end
tokens = math.min(capacity, tokens + math.max(0, now - at) / 1000 * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - cost else wait = math.max(1, math.ceil((1 - tokens) / rate)) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate * 1000) + tonumber(ARGV[4]))
return wait
`

export type RateLimiter = {
  /**
   * Takes `cost` requests from `client`'s bucket (a batch costs one per call): `0` when allowed, else the
   * whole seconds to wait. `rate` overrides the limiter's own rate for this client (an API key's rate).
   */
  take(client: string, options?: { cost?: number; rate?: number }): number | Promise<number>
}

export type RateLimiterParameters = {
  ratePerSecond: number
  burstSeconds?: number
  now?: () => number
  /** Shares the buckets with every process on this Redis (`--redis-url`); without it each process limits alone. */
  redis?: SharedRedis | null
  /** The limiter's name among the deployment's shared buckets (`rpc`, `registration`). */
  name?: string
  /**
   * A worker of `serve --workers N` without Redis: the buckets are the primary's, one IPC round trip per
   * limited request; while the primary does not answer, the worker limits alone.
   */
  cluster?: ClusterLink | null
}

/**
 * A token bucket per client: `ratePerSecond` requests a second, bursts of `burstSeconds` of them. A request
 * is admitted while the bucket holds at least one token and then takes its whole cost, so a batch larger
 * than the bucket goes through once and its client then waits until the debt is repaid: the average rate
 * holds without refusing every large batch. A rate of 0 turns the limit off (and costs no Redis call).
 * With `redis`, one bucket per client for all processes, at one Redis round trip per request; while Redis
 * fails, each process limits alone with its own buckets, as without it.
 */
export function createRateLimiter({
  ratePerSecond,
  burstSeconds = 1,
  now = Date.now,
  redis = null,
  name = 'requests',
  cluster = null,
}: RateLimiterParameters): RateLimiter {
  const buckets = new LRUCache<string, { tokens: number; at: number }>({ max: MAX_TRACKED_CLIENTS })
  const capacityAt = (rate: number) => Math.max(1, rate * burstSeconds)

  function takeHere(client: string, cost: number, rate: number): number {
    const capacity = capacityAt(rate)
    const time = now()
    const bucket = buckets.get(client) ?? { tokens: capacity, at: time }
    bucket.tokens = Math.min(capacity, bucket.tokens + ((time - bucket.at) / 1000) * rate)
    bucket.at = time
    buckets.set(client, bucket)
    if (bucket.tokens >= 1) {
      bucket.tokens -= cost
      return 0
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / rate))
  }

  if (redis === null && cluster !== null) {
    const limiter = { name, ratePerSecond, burstSeconds }
    return {
      async take(client, { cost = 1, rate = ratePerSecond } = {}) {
        if (rate <= 0) return 0
        return cluster.request('take', limiter, client, cost, rate).catch(() => takeHere(client, cost, rate))
      },
    }
  }
  if (redis === null)
    return {
      // At once: a bucket of this process waits for nothing.
      take(client, { cost = 1, rate = ratePerSecond } = {}) {
        return rate <= 0 ? 0 : takeHere(client, cost, rate)
      },
    }

  const command = `flashgateTake`
  if (!(command in redis.client)) redis.client.defineCommand(command, { numberOfKeys: 1, lua: TAKE_SCRIPT })
  const takeShared = (redis.client as unknown as Record<typeof command, (...args: (string | number)[]) => Promise<number>>)[command]
  return {
    async take(client, { cost = 1, rate = ratePerSecond } = {}) {
      if (rate <= 0) return 0
      return redis.attempt(
        'rate-limit',
        () => takeShared.call(redis.client, redis.key(`rate:${name}:${client}`), rate, capacityAt(rate), cost, SHARED_BUCKET_SLACK_MS),
        () => takeHere(client, cost, rate),
      )
    },
  }
}
