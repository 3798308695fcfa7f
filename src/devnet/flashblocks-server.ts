import type { AddressInfo } from 'node:net'
import { WebSocket, WebSocketServer } from 'ws'
import type { DevnetLogger } from './anvil.js'
import type { FlashblockWireMessage } from '../pending/message.js'
import { encodeFlashblock } from './flashblock-message.js'

const LOOPBACK_HOST = '127.0.0.1'
/** Base's feed URL ends in `/ws`; any path is accepted, this is the one printed. */
const FEED_PATH = '/ws'
/** A client this far behind (unsent bytes) is dropped rather than buffered without bound. */
const MAX_CLIENT_BUFFER_BYTES = 16 * 1024 * 1024

export type FlashblocksServerOptions = {
  /** 0: a free port chosen by the OS. */
  port: number
  /** JSON text frames instead of Brotli-compressed binary frames. */
  plain: boolean
  logger?: DevnetLogger
}

export type FlashblocksServer = {
  url: string
  port: number
  /** Encodes the message once and sends it to every connected client. */
  broadcast: (message: FlashblockWireMessage) => void
  clientCount: () => number
  /** Disconnects every client and releases the port. Idempotent. */
  close: () => Promise<void>
}

/** The WebSocket side of the devnet: one frame per flashblock to every client, no replay on connect (as Base). */
export async function createFlashblocksServer({ port, plain, logger }: FlashblocksServerOptions): Promise<FlashblocksServer> {
  const server = new WebSocketServer({ host: LOOPBACK_HOST, port, perMessageDeflate: false })
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve)
    server.once('error', reject)
  })
  server.on('error', (error) => logger?.warn({ err: error }, 'flashblocks server error'))
  server.on('connection', (socket) => socket.on('error', () => socket.terminate()))
  const boundPort = (server.address() as AddressInfo).port

  function broadcast(message: FlashblockWireMessage): void {
    if (server.clients.size === 0) return
    const frame = encodeFlashblock(message, { compress: !plain })
    for (const client of server.clients) {
      if (client.readyState !== WebSocket.OPEN) continue
      if (client.bufferedAmount > MAX_CLIENT_BUFFER_BYTES) {
        logger?.warn({ bufferedAmount: client.bufferedAmount }, 'dropping a flashblocks client that does not read')
        client.terminate()
        continue
      }
      client.send(frame, { binary: typeof frame !== 'string' })
    }
  }

  let closed: Promise<void> | undefined
  function close(): Promise<void> {
    closed ??= new Promise<void>((resolve) => {
      for (const client of server.clients) client.terminate()
      server.close(() => resolve())
    })
    return closed
  }

  return {
    url: `ws://${LOOPBACK_HOST}:${boundPort}${FEED_PATH}`,
    port: boundPort,
    broadcast,
    clientCount: () => server.clients.size,
    close,
  }
}
