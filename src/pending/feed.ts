import type { Logger } from 'pino'
import WebSocket from 'ws'
import { decodeFrame, flashblockMessage, MAX_FRAME_BYTES } from './message.js'
import type { PendingState } from './state.js'

const RECONNECT_BASE_MS = 100
const RECONNECT_MAX_MS = 5_000
/**
 * A ping this often; a connection that answered neither it nor with a message by the next one is dead
 * (a peer gone without closing: a crashed host, a dropped NAT mapping) and is replaced.
 */
const HEARTBEAT_INTERVAL_MS = 3_000
/** A connection attempt that has not completed its WebSocket handshake by then is abandoned and retried. */
const HANDSHAKE_TIMEOUT_MS = 5_000

export type FlashblocksFeedConfig = { url: string; state: PendingState; logger: Logger }

/**
 * Follows a Flashblocks WebSocket: decodes each frame (text, raw JSON or Brotli, inflated off the main
 * thread), validates it, and hands it to the pending state in arrival order. Reconnects with exponential
 * backoff. A lost connection leaves the pending state as it is, as Base's node does: the next frame either
 * continues the sequence (the next index, linked to the last one applied) and the view goes on, or it does not
 * and the sequence rules drop the view; meanwhile the state's staleness rule hides the block being built.
 */
export function createFlashblocksFeed({ url, state, logger }: FlashblocksFeedConfig) {
  let socket: WebSocket | null = null
  let stopped = false
  let retryMs = RECONNECT_BASE_MS
  let timer: NodeJS.Timeout | null = null
  let connected = false
  let messages = 0
  let rejected = 0

  function scheduleReconnect() {
    if (stopped || timer !== null) return
    timer = setTimeout(() => {
      timer = null
      connect()
    }, retryMs)
    retryMs = Math.min(retryMs * 2, RECONNECT_MAX_MS)
  }

  function connect() {
    if (stopped) return
    const current = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: HANDSHAKE_TIMEOUT_MS, maxPayload: MAX_FRAME_BYTES })
    socket = current
    let heard = true
    let heartbeat: NodeJS.Timeout | null = null
    current.on('open', () => {
      connected = true
      retryMs = RECONNECT_BASE_MS
      logger.info({ url }, 'flashblocks feed connected')
      heartbeat = setInterval(() => {
        if (!heard) {
          logger.warn({ url }, 'flashblocks feed unresponsive; reconnecting')
          current.terminate()
          return
        }
        heard = false
        current.ping()
      }, HEARTBEAT_INTERVAL_MS)
    })
    current.on('pong', () => {
      heard = true
    })
    // Frames are inflated asynchronously (a small frame may inflate to many MB) but applied in arrival order.
    let decoding: Promise<void> = Promise.resolve()
    current.on('message', (data: Buffer, isBinary: boolean) => {
      heard = true
      const decoded = decodeFrame(isBinary ? data : data.toString('utf8'))
      // Taken in turn below; one that fails before its turn (an earlier frame still inflating) must not count
      // as unhandled meanwhile, which would end the process.
      decoded.catch(() => {})
      decoding = decoding.then(async () => {
        let frame: unknown
        try {
          frame = await decoded
        } catch (error) {
          rejected++
          logger.warn({ err: error }, 'undecodable flashblocks frame')
          return
        }
        const parsed = flashblockMessage.safeParse(frame)
        if (!parsed.success) {
          rejected++
          logger.warn({ issue: parsed.error.issues[0] }, 'invalid flashblocks message')
          return
        }
        messages++
        void state.apply(parsed.data)
      })
    })
    current.on('error', (error) => logger.warn({ err: error }, 'flashblocks feed error'))
    current.on('close', () => {
      if (heartbeat !== null) clearInterval(heartbeat)
      if (socket === current) socket = null
      // A close of our own (stop) is no disconnection to warn of: the process, and its state, are going.
      if (connected && !stopped) logger.warn({ url }, 'flashblocks feed disconnected; reconnecting')
      connected = false
      scheduleReconnect()
    })
  }

  return {
    start() {
      stopped = false
      connect()
    },
    status: () => ({ connected, messages, rejected, lastMessageAt: state.lastMessageAt }),
    async stop() {
      stopped = true
      if (timer !== null) clearTimeout(timer)
      timer = null
      const current = socket
      socket = null
      if (current === null || current.readyState === WebSocket.CLOSED) return
      await new Promise<void>((resolve) => {
        current.once('close', () => resolve())
        current.terminate()
      })
    },
  }
}

export type FlashblocksFeed = ReturnType<typeof createFlashblocksFeed>
