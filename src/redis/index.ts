import { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { DEFAULT_REDIS_PREFIX } from '../config.js'
import { loggableError } from '../errors.js'

/** At start, the gateway waits this long for Redis, then serves without it (and keeps reconnecting). */
const REDIS_CONNECT_WAIT_MS = 2_000
/** A command not answered within this is given up: the request goes on with what this process knows alone. */
const REDIS_COMMAND_TIMEOUT_MS = 500
/** After a failed command, Redis is left alone this long, so that requests do not each wait on a sick server. */
const REDIS_RETRY_AFTER_MS = 1_000
/** Reconnection backoff: 100 ms more per attempt, at most this. */
const REDIS_RECONNECT_MAX_MS = 2_000

export type RedisStatus = {
  connected: boolean
  /** Operations answered by this process alone because Redis failed or was down, by operation. */
  fallbacks: Record<string, number>
}

/**
 * Redis shared by every serving process of a deployment (`--redis-url`): rate-limit buckets, key
 * revocations, forwarded nonces. An outage never fails a request: each operation names what this process
 * answers alone meanwhile (`attempt`), the first failure is logged once, every one is counted for
 * `/metrics`, and the client reconnects on its own.
 */
export type SharedRedis = {
  /** Commands: no offline queue, so a command while disconnected fails at once instead of waiting. */
  client: Redis
  /** The deployment's name for a key or channel. */
  key(name: string): string
  /** `command()`, or `fallback()` when Redis fails, times out or is known to be down. */
  attempt<result>(operation: string, command: () => Promise<result>, fallback: () => result): Promise<result>
  /** Publishes on the deployment's channel; best effort (a subscriber that misses it relies on its own expiry). */
  publish(channel: string, message: string): Promise<void>
  /** Calls `listener` for each message on the deployment's channel, resubscribing after reconnects. */
  subscribe(channel: string, listener: (message: string) => void): void
  status(): RedisStatus
  close(): Promise<void>
}

/** Connects to Redis, waiting up to REDIS_CONNECT_WAIT_MS; an unreachable Redis is logged, not fatal. */
export async function createRedis({ url, prefix = DEFAULT_REDIS_PREFIX, logger }: { url: string; prefix?: string; logger: Logger }): Promise<SharedRedis> {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: REDIS_CONNECT_WAIT_MS,
    retryStrategy: (attempts) => Math.min(attempts * 100, REDIS_RECONNECT_MAX_MS),
  })
  // The subscriber queues its SUBSCRIBE until connected and retries forever: nothing waits on it.
  let subscriber: Redis | null = null
  const listeners = new Map<string, (message: string) => void>()
  const fallbacks: Record<string, number> = {}
  let down = false
  let quietUntil = 0
  let closed = false

  /** Logged once per outage, however many requests fall back during it. */
  function markDown(error: unknown, operation: string) {
    if (operation !== 'subscribe') quietUntil = Date.now() + REDIS_RETRY_AFTER_MS
    if (down || closed) return
    down = true
    logger.warn(
      { err: loggableError(error), operation },
      'Redis unavailable: rate limits, key revocations and forwarded nonces are per process until it is back',
    )
  }

  function markUp() {
    quietUntil = 0
    if (!down) return
    down = false
    logger.info('Redis is back: limits, key revocations and forwarded nonces are shared again')
  }

  client.on('error', (error: unknown) => markDown(error, 'connection'))
  // A lost connection is an outage, even when the first reconnection succeeds (and no error is emitted).
  client.on('close', () => markDown(new Error('the connection to Redis closed'), 'connection'))
  client.on('ready', markUp)

  const ready = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), REDIS_CONNECT_WAIT_MS)
    client.once('ready', () => {
      clearTimeout(timer)
      resolve(true)
    })
  })
  if (!(await ready)) markDown(new Error(`no answer from Redis within ${REDIS_CONNECT_WAIT_MS} ms`), 'connect')

  const key = (name: string) => `${prefix}${name}`

  async function attempt<result>(operation: string, command: () => Promise<result>, fallback: () => result): Promise<result> {
    if (client.status === 'ready' && Date.now() >= quietUntil) {
      try {
        const result = await command()
        if (down) markUp()
        return result
      } catch (error) {
        markDown(error, operation)
      }
    }
    fallbacks[operation] = (fallbacks[operation] ?? 0) + 1
    return fallback()
  }

  return {
    client,
    key,
    attempt,
    async publish(channel, message) {
      await attempt(
        'publish',
        () => client.publish(key(channel), message),
        () => 0,
      )
    },
    subscribe(channel, listener) {
      if (subscriber === null) {
        subscriber = client.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined })
        subscriber.on('error', (error: unknown) => markDown(error, 'subscribe'))
        subscriber.on('message', (name: string, message: string) => listeners.get(name)?.(message))
      }
      listeners.set(key(channel), listener)
      subscriber.subscribe(key(channel)).catch((error: unknown) => markDown(error, 'subscribe'))
    },
    status: () => ({ connected: client.status === 'ready' && !down, fallbacks: { ...fallbacks } }),
    async close() {
      closed = true
      for (const connection of [client, subscriber]) {
        if (connection === null) continue
        if (connection.status === 'ready') await connection.quit().catch(() => {})
        connection.disconnect()
      }
    },
  }
}
