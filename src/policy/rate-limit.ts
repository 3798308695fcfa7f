import { LRUCache } from 'lru-cache'

/** Clients tracked at once; the least recently seen are forgotten first (and start with a full bucket). */
const MAX_TRACKED_CLIENTS = 100_000

export type RateLimiter = {
  /**
   * Takes `cost` requests from `client`'s bucket (a batch costs one per call): `0` when allowed, else the
   * whole seconds to wait. `rate` overrides the limiter's own rate for this client (an API key's rate).
   */
  take(client: string, options?: { cost?: number; rate?: number }): number
}

/**
 * A token bucket per client: `ratePerSecond` requests a second, bursts of `burstSeconds` of them. A request
 * is admitted while the bucket holds at least one token and then takes its whole cost, so a batch larger
 * than the bucket goes through once and its client then waits until the debt is repaid: the average rate
 * holds without refusing every large batch. A rate of 0 turns the limit off. Per process: behind a load
 * balancer each process limits on its own.
 */
export function createRateLimiter({
  ratePerSecond,
  burstSeconds = 1,
  now = Date.now,
}: { ratePerSecond: number; burstSeconds?: number; now?: () => number }): RateLimiter {
  const buckets = new LRUCache<string, { tokens: number; at: number }>({ max: MAX_TRACKED_CLIENTS })
  return {
    take(client, { cost = 1, rate = ratePerSecond } = {}) {
      if (rate <= 0) return 0
      const capacity = Math.max(1, rate * burstSeconds)
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
    },
  }
}
