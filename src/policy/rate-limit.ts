import { LRUCache } from 'lru-cache'

/** Clients tracked at once; the least recently seen are forgotten first (and start with a full bucket). */
const MAX_TRACKED_CLIENTS = 100_000
/** A client may spend this many seconds' worth of requests at once before the rate applies. */
const BURST_SECONDS = 5

export type RateLimiter = {
  /** Takes one request from `client`'s bucket: `0` when allowed, else the seconds to wait. */
  take(client: string): number
}

/**
 * A token bucket per client address: `ratePerSecond` requests a second, bursts of `BURST_SECONDS` of them.
 * A rate of 0 turns the limit off. Per process: behind a load balancer each process limits on its own.
 */
export function createRateLimiter({ ratePerSecond, now = Date.now }: { ratePerSecond: number; now?: () => number }): RateLimiter {
  if (ratePerSecond <= 0) return { take: () => 0 }
  const capacity = Math.max(1, ratePerSecond * BURST_SECONDS)
  const buckets = new LRUCache<string, { tokens: number; at: number }>({ max: MAX_TRACKED_CLIENTS })
  return {
    take(client) {
      const time = now()
      const bucket = buckets.get(client) ?? { tokens: capacity, at: time }
      bucket.tokens = Math.min(capacity, bucket.tokens + ((time - bucket.at) / 1000) * ratePerSecond)
      bucket.at = time
      buckets.set(client, bucket)
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1
        return 0
      }
      return Math.ceil((1 - bucket.tokens) / ratePerSecond)
    },
  }
}
