import type { Logger } from 'pino'
import { type Hex, RpcError, RpcRequestError, webSocket } from 'viem'
import { SYNC_KEYS } from '../db/index.js'
import { dropClosedSocket, type Upstream } from '../upstream/index.js'
import type { IngesterStatus } from './status.js'
import type { Store } from './store.js'

/** Head polling when the upstream has no WebSocket; with one, a slower safety poll. */
const POLL_INTERVAL_MS = 250
const WS_SAFETY_POLL_MS = 2_000
const SAFE_HEAD_REFRESH_MS = 1_000
/** Waits before subscribing to `newHeads` again after its socket closed or a subscription failed: doubling from the first, up to the last. */
const RESUBSCRIBE_FIRST_MS = 1_000
const RESUBSCRIBE_MAX_MS = 30_000

/** The upstream's safe and finalized heads as read: a number, `null` for none, `undefined` for unknown. */
export type SafeHeads = { safe: number | null | undefined; finalized: number | null | undefined }

type SafeHeadKey = typeof SYNC_KEYS.safe | typeof SYNC_KEYS.finalized

/** The sync-state entries that store what was read (nothing for what is unknown). */
export function safeHeadsState({ safe, finalized }: SafeHeads): Partial<Record<SafeHeadKey, number | null>> {
  return { ...(safe !== undefined && { [SYNC_KEYS.safe]: safe }), ...(finalized !== undefined && { [SYNC_KEYS.finalized]: finalized }) }
}

export type HeadFollowerConfig = {
  upstream: Upstream
  logger: Logger
  /** `lastUpstreamContactAt` is kept up to date by each read of the head. */
  status: IngesterStatus
  pollIntervalMs?: number
}

/**
 * Follows the upstream's heads: the latest one, read when a `newHeads` notification arrives (where the upstream
 * has a WebSocket), at each poll, or at once on `pollNow`; and the safe and finalized ones.
 */
export function createHeadFollower({ upstream, logger, status, pollIntervalMs = POLL_INTERVAL_MS }: HeadFollowerConfig) {
  let stopping = false
  let wake: (() => void) | null = null
  /** Set while the loop waits for the next head poll: the only wait `pollNow` cuts short (never a back-off). */
  let polling = false
  /** `pollNow` came while the loop was busy: its next wait between polls is skipped, so the request is not lost. */
  let pollAsked = false
  let unsubscribe: (() => void) | null = null
  let safeHeadsCheckedAt = 0

  /** Waits `ms`, or until `stop` (or `pollNow`, between polls, or a new head) wakes it; no wait at all once stopping. */
  function sleep(ms: number): Promise<void> {
    // `stop` may have come between its check and this wait, when there was nothing to wake.
    if (stopping) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms)
      function done() {
        clearTimeout(timer)
        if (wake === done) wake = null
        resolve()
      }
      wake = done
    })
  }

  let resubscribeTimer: NodeJS.Timeout | null = null
  let resubscribeDelayMs = RESUBSCRIBE_FIRST_MS

  /**
   * `newHeads`, subscribed again after its socket closes or a subscription fails, for as long as the process
   * runs (backing off from 1 s to 30 s); meanwhile the safety poll (`WS_SAFETY_POLL_MS`) follows the head.
   * Ours rather than viem's reconnection: viem gives up after five attempts by default, and writes each failed
   * one to the console as a raw stack trace, outside the log.
   */
  function subscribeToHeads() {
    if (upstream.wsUrl === null || stopping) return
    let active = true
    let stopSubscription: (() => void) | null = null
    unsubscribe = () => {
      active = false
      stopSubscription?.()
    }
    const again = (error: unknown, message: string) => {
      if (!active || stopping) return
      active = false
      stopSubscription?.()
      logger.warn({ err: error, retryInMs: resubscribeDelayMs }, message)
      resubscribeTimer = setTimeout(() => {
        resubscribeTimer = null
        subscribeToHeads()
      }, resubscribeDelayMs)
      resubscribeDelayMs = Math.min(resubscribeDelayMs * 2, RESUBSCRIBE_MAX_MS)
    }
    try {
      const transport = webSocket(upstream.wsUrl, { reconnect: false })({})
      // viem keeps one socket per URL: a closed one would fail this subscription at once.
      void dropClosedSocket(transport)
        .then(() =>
          transport.value!.subscribe({
            params: ['newHeads'],
            onData: () => wake?.(),
            onError: (error) => again(error, 'newHeads subscription lost; polling until it is back'),
          }),
        )
        .then(({ unsubscribe: stop }) => {
          resubscribeDelayMs = RESUBSCRIBE_FIRST_MS
          stopSubscription = () => void stop().catch(() => {})
          if (!active) stopSubscription()
        })
        .catch((error: unknown) => again(error, 'newHeads subscription failed; polling until it is back'))
    } catch (error) {
      again(error, 'newHeads subscription failed; polling until it is back')
    }
  }

  /**
   * The upstream's safe and finalized block numbers: `null` where the node has no such block (a node without the
   * tag answers null, or an error), `undefined` where the call failed (the upstream is away), so that the stored
   * value stays and `safe` does not vanish for the length of an outage.
   */
  async function readSafeHeads(): Promise<SafeHeads> {
    const read = async (tag: 'safe' | 'finalized'): Promise<number | null | undefined> => {
      try {
        const block = await upstream.request<{ number: Hex } | null>('eth_getBlockByNumber', [tag, false])
        return block === null ? null : Number.parseInt(block.number, 16)
      } catch (error) {
        return error instanceof RpcError || error instanceof RpcRequestError ? null : undefined
      }
    }
    const [safe, finalized] = await Promise.all([read('safe'), read('finalized')])
    return { safe, finalized }
  }

  return {
    start() {
      stopping = false
      subscribeToHeads()
    },
    /** Wakes whatever waits, and ends the subscription. */
    stop() {
      stopping = true
      wake?.()
      if (resubscribeTimer !== null) clearTimeout(resubscribeTimer)
      resubscribeTimer = null
      unsubscribe?.()
    },
    sleep,
    /** The upstream's latest block number; this read is the one a `pollNow` before it asked for. */
    async readHead(): Promise<number> {
      pollAsked = false
      const number = Number.parseInt(await upstream.request<Hex>('eth_blockNumber'), 16)
      status.lastUpstreamContactAt = Date.now()
      return number
    },
    /** Waits until the next head poll is due, unless a `pollNow` came since the last read. */
    async waitForNextPoll() {
      if (pollAsked) return
      polling = true
      await sleep(upstream.wsUrl === null ? pollIntervalMs : WS_SAFETY_POLL_MS).finally(() => {
        polling = false
      })
    },
    /** Cuts short the wait between head polls, never an error's back-off; or, when busy, skips the next one. */
    pollNow() {
      if (polling && wake !== null) wake()
      else pollAsked = true
    },
    readSafeHeads,
    /**
     * Stores the upstream's safe and finalized block numbers, at most once per `SAFE_HEAD_REFRESH_MS`: while no
     * block comes (a new block's commit carries them itself).
     */
    async refreshSafeHeads(store: Store) {
      if (Date.now() - safeHeadsCheckedAt < SAFE_HEAD_REFRESH_MS) return
      safeHeadsCheckedAt = Date.now()
      for (const [key, value] of Object.entries(safeHeadsState(await readSafeHeads()))) await store.putSyncState(key as SafeHeadKey, value)
    },
  }
}

export type HeadFollower = ReturnType<typeof createHeadFollower>
