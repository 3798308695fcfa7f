import { type IncomingMessage, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Address } from 'viem'
import { type Anvil, type DevnetLogger, startAnvil } from './anvil.js'
import type { FeedFormat } from './flashblock-message.js'
import { type FlashblocksServer, createFlashblocksServer } from './flashblocks-server.js'
import type { JsonRpcRequest, JsonRpcResponse } from './anvil-client.js'
import type { BaseContracts } from './base-mix.js'
import { isBlockPrestateDiffTrace, traceBlockPrestateDiff } from './block-trace.js'
import type { LoadProfileName } from '../config.js'
import { type LoadProfile, type LoadProfileStats, createBaseProfile } from './profile.js'
import { type Sequencer, type SequencerOptions, SEQUENCER_ANVIL_ARGS, createSequencer, ticksPerSlot } from './sequencer.js'

export const DEFAULT_DEVNET_RPC_PORT = 8546
export const DEFAULT_FLASHBLOCKS_PORT = 8547
/** Base's block time and flashblock cadence. */
export const DEFAULT_BLOCK_TIME_MS = 2_000
export const DEFAULT_FLASHBLOCK_INTERVAL_MS = 200
const LOOPBACK_HOST = '127.0.0.1'
/** Larger request bodies are refused; a batch of a few thousand signed transactions still fits. */
const MAX_BODY_BYTES = 8 * 1024 * 1024

export type StartDevnetOptions = {
  /** JSON-RPC port; 0 for a free one. */
  port?: number
  /** Flashblocks WebSocket port; 0 for a free one. */
  flashblocksPort?: number
  blockTimeMs?: number
  flashblockIntervalMs?: number
  /** JSON text frames instead of Brotli-compressed binary frames. */
  plain?: boolean
  /** `current` (default): Base's frames since Azul, no receipts or balances; `legacy`: with them. */
  feedFormat?: FeedFormat
  chainId?: number
  logger?: DevnetLogger
  /** Each tick's index, transaction count and duration (for benchmarks). */
  onTick?: SequencerOptions['onTick']
  /** `base`: Base-shaped traffic from the start (profile.ts); `none` (default): only what clients send. */
  profile?: LoadProfileName
  /** Seeds the profile's senders, recipients and mix (the same seed, the same transactions). */
  profileSeed?: number
  /** Transactions a block under the profile (default BASE_TRANSACTIONS_PER_BLOCK); smaller for quick tests. */
  profileTransactionsPerBlock?: number
}

export type Devnet = {
  /**
   * A flashblocks-aware Base node's JSON-RPC: sends are sequenced into flashblocks; `latest` is the sealed
   * head, `pending` the pre-confirmed block (node-view.ts); the rest is anvil's answer.
   */
  rpcUrl: string
  /** Base-format flashblocks, one message per tick. */
  flashblocksUrl: string
  /** Connections to the Flashblocks feed now (a gateway should hold one, however many workers it runs). */
  feedClients: () => number
  /**
   * anvil itself, for tests that need it. Between ticks its `latest` is the pre-confirmed block, not the
   * sealed head; a block mined or state changed through it is undone by the next tick (do that through
   * `rpcUrl`, which takes the pre-confirmed block down first and opens a new block when the head moved).
   */
  anvilRpcUrl: string
  /** The running load profile's contracts, senders and figures; `null` without one. */
  profile: { name: LoadProfileName; contracts: BaseContracts; senders: Address[]; stats: () => LoadProfileStats } | null
  /** Stops the load profile and the sequencer, closes both ports and stops anvil. Idempotent. */
  stop: () => Promise<void>
}

/** A local chain that behaves like Base: anvil executes, the sequencer streams flashblocks (DESIGN.md §6). */
export async function startDevnet(options: StartDevnetOptions = {}): Promise<Devnet> {
  const {
    port = DEFAULT_DEVNET_RPC_PORT,
    flashblocksPort = DEFAULT_FLASHBLOCKS_PORT,
    blockTimeMs = DEFAULT_BLOCK_TIME_MS,
    flashblockIntervalMs = DEFAULT_FLASHBLOCK_INTERVAL_MS,
    plain = false,
    feedFormat = 'current',
    profile: profileName = 'none',
    logger,
  } = options
  const ticks = ticksPerSlot(blockTimeMs, flashblockIntervalMs) // refuse bad timing before anything starts
  let anvil: Anvil | undefined
  let feed: FlashblocksServer | undefined
  let sequencer: Sequencer | undefined
  let rpc: RpcServer | undefined
  let profile: LoadProfile | undefined
  const stop = memoize(async () => {
    await profile?.stop()
    await sequencer?.stop()
    await Promise.all([rpc?.close(), feed?.close()])
    await anvil?.stop()
  })
  try {
    anvil = await startAnvil({ noMining: true, chainId: options.chainId, extraArgs: [...SEQUENCER_ANVIL_ARGS], logger })
    feed = await createFlashblocksServer({ port: flashblocksPort, plain, logger })
    sequencer = createSequencer({
      anvilRpcUrl: anvil.rpcUrl,
      blockTimeMs,
      flashblockIntervalMs,
      feedFormat,
      onFlashblock: feed.broadcast,
      onTick: (tick) => {
        options.onTick?.(tick)
        profile?.onTick()
      },
      logger,
    })
    const { forward } = sequencer
    const anvilRpcUrl = anvil.rpcUrl
    // Block tracing in one pass (block-trace.ts): anvil's own takes seconds for a Base-sized block.
    rpc = await startRpcServer(
      port,
      async (request) => (isBlockPrestateDiffTrace(request) ? await traceBlockPrestateDiff(request, anvilRpcUrl) : undefined) ?? forward(request),
    )
    if (profileName === 'base') {
      const { profileSeed: seed, profileTransactionsPerBlock: transactionsPerBlock } = options
      profile = createBaseProfile({ forward, ticksPerBlock: ticks, transactionsPerBlock, seed, logger })
    }
    sequencer.start()
    await profile?.start()
  } catch (error) {
    await stop()
    throw error
  }
  logger?.info({ rpcUrl: rpc.url, flashblocksUrl: feed.url, blockTimeMs, flashblockIntervalMs, feedFormat, profile: profileName }, 'devnet ready')
  const running = profile
  return {
    rpcUrl: rpc.url,
    flashblocksUrl: feed.url,
    feedClients: () => feed.clientCount(),
    anvilRpcUrl: anvil.rpcUrl,
    profile: running === undefined ? null : { name: profileName, contracts: running.contracts(), senders: running.senders, stats: running.stats },
    stop,
  }
}

// --- JSON-RPC over HTTP ---------------------------------------------------------------------------------

type RpcServer = { url: string; close: () => Promise<void> }
type Forward = (request: JsonRpcRequest) => Promise<JsonRpcResponse>

async function startRpcServer(port: number, forward: Forward): Promise<RpcServer> {
  const server = createServer((req, res) => {
    handleHttp(req, res, forward).catch(() => {
      if (!res.headersSent) res.writeHead(500)
      res.end()
    })
  })
  // Clients keep idle connections for reuse (undici for 4 s by default): a server that closes them first
  // (Node's default is 5 s) races a request sent on one as it goes, which then fails with ECONNRESET when
  // the client's event loop lags. The gateway's server does the same (server/index.ts).
  server.keepAliveTimeout = 65_000
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, LOOPBACK_HOST, () => resolve())
  })
  const boundPort = (server.address() as AddressInfo).port
  return {
    url: `http://${LOOPBACK_HOST}:${boundPort}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

// Browsers (a wallet or dapp pointed at the devnet) need CORS; the port is loopback-only.
const CORS_HEADERS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'POST, OPTIONS',
  'access-control-allow-headers': 'content-type',
}

async function handleHttp(req: IncomingMessage, res: ServerResponse, forward: Forward): Promise<void> {
  if (req.method === 'OPTIONS') return void res.writeHead(204, CORS_HEADERS).end()
  if (req.method !== 'POST') return void res.writeHead(405, { ...CORS_HEADERS, allow: 'POST, OPTIONS' }).end()
  const body = await readBody(req)
  if (body === undefined) return void res.writeHead(413, { ...CORS_HEADERS, connection: 'close' }).end()
  let payload: unknown
  try {
    payload = JSON.parse(body)
  } catch {
    return reply(res, errorResponse(null, -32700, 'parse error'))
  }
  if (!Array.isArray(payload)) return reply(res, await call(payload, forward))
  if (payload.length === 0) return reply(res, errorResponse(null, -32600, 'empty batch'))
  // Calls are handed to the sequencer in batch order, so the sends of one batch keep their order.
  reply(res, await Promise.all(payload.map((entry) => call(entry, forward))))
}

async function call(entry: unknown, forward: Forward): Promise<JsonRpcResponse> {
  const request = entry as Partial<JsonRpcRequest> | null
  if (typeof request !== 'object' || request === null || request.jsonrpc !== '2.0' || typeof request.method !== 'string') {
    return errorResponse(request?.id ?? null, -32600, 'invalid request')
  }
  try {
    return await forward(request as JsonRpcRequest)
  } catch {
    return errorResponse(request.id ?? null, -32603, 'internal error: anvil did not answer')
  }
}

function errorResponse(id: JsonRpcResponse['id'], code: number, message: string): JsonRpcResponse {
  return { jsonrpc: '2.0', id, error: { code, message } }
}

function reply(res: ServerResponse, body: JsonRpcResponse | JsonRpcResponse[]): void {
  res.writeHead(200, { ...CORS_HEADERS, 'content-type': 'application/json' }).end(JSON.stringify(body))
}

/** The body as text, or undefined when it exceeds MAX_BODY_BYTES. */
async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > MAX_BODY_BYTES) return undefined
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}

function memoize<T>(fn: () => Promise<T>): () => Promise<T> {
  let result: Promise<T> | undefined
  return () => (result ??= fn())
}
