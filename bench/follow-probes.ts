import { brotliDecompressSync } from 'node:zlib'
import { type Hash, type Hex, keccak256 } from 'viem'
import { WebSocket } from 'ws'
import { DEFAULT_BLOCK_TIME_MS, DEFAULT_FLASHBLOCK_INTERVAL_MS } from '../src/devnet/devnet.js'
import type { FlashblockWireMessage } from '../src/pending/message.js'
import { SWAP_TOPIC } from '../src/devnet/pool.js'
import { createRpcClient } from './rpc.js'
import { nearestRank } from './quantile.js'

// What a follow run measures beside the read load, all as a client sees it: a Flashblocks feed client
// and a WebSocket subscriber of the gateway in this process, on the same loopback as the gateway's own
// feed client. Ingest lag: the devnet's sealed head against the gateway's, sampled, and per block the time
// from the frame that seals it to the gateway's newHeads. Pending: per flashblock, the time from its frame
// to the gateway announcing all its transactions (newFlashblockTransactions: the frame applied, sender
// recovery done) and its first swap log (pendingLogs: receipts hydrated from the devnet, today's format).

const TICKS_PER_BLOCK = DEFAULT_BLOCK_TIME_MS / DEFAULT_FLASHBLOCK_INTERVAL_MS
const LAG_SAMPLE_MS = 250
/** Every this many sealed blocks, the bench times the devnet's answers to the calls that ingest a block. */
const UPSTREAM_SAMPLE_EVERY_BLOCKS = 10
const PRESTATE_DIFF = { tracer: 'prestateTracer', tracerConfig: { diffMode: true } } as const

export type Summary = { samples: number; p50: number; p90: number; p99: number; max: number; mean: number }

export type ProbeFigures = {
  ingestLagBlocks: Summary
  ingestLagMs: Summary
  frameToTransactionsVisibleMs: Summary
  frameToLogsVisibleMs: Summary
  /** Flashblocks with transactions seen in the window, and those the gateway never announced in full. */
  framesWithTransactions: number
  framesNotAnnounced: number
  /** Notifications that came before this process had the frame (its own event loop was late): counted as 0 ms. */
  notificationsBeforeFrame: number
  blocksSealed: number
  /** Transactions a block in the feed, over the window. */
  transactionsPerBlock: Summary
  /**
   * The devnet's part of ingest lag: eth_getBlockByNumber (full), then eth_getBlockReceipts and the block's
   * prestate diff trace side by side, as the ingester asks them, timed from the bench on a sample of blocks.
   */
  upstreamBlockFetchMs: Summary
}

export function summarise(values: number[]): Summary {
  const sorted = Float64Array.from(values).sort()
  const at = (fraction: number) => nearestRank(sorted, fraction)
  const mean = sorted.length === 0 ? Number.NaN : sorted.reduce((sum, value) => sum + value, 0) / sorted.length
  return { samples: sorted.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!, mean }
}

type Frame = { at: number; remaining: Set<Hash>; transactionsVisibleAt?: number; logsVisibleAt?: number }

export async function startFollowProbes(options: {
  devnetRpcUrl: string
  flashblocksUrl: string
  gatewayRpcUrl: string
  gatewayWsUrl: string
  hotPool: string
}) {
  const devnet = createRpcClient(options.devnetRpcUrl)
  const gateway = createRpcClient(options.gatewayRpcUrl)
  const frames = new Map<string, Frame>()
  /** Each transaction's frame (`block:index`), for the notifications that name it. */
  const frameOf = new Map<Hash, string>()
  /** Hashes the gateway announced before this process decoded their frame. */
  const announcedEarly = new Map<Hash, number>()
  const sealedAt = new Map<number, number>()
  const headAt = new Map<number, number>()
  const transactionsInBlock = new Map<number, number>()
  const lagBlocks: number[] = []
  const upstreamFetches: number[] = []
  let measuring = false
  let notificationsBeforeFrame = 0

  async function timeBlockFetch(number: number): Promise<number> {
    const started = performance.now()
    const block = await devnet.call<{ hash: Hash }>('eth_getBlockByNumber', [`0x${number.toString(16)}`, true])
    await Promise.all([devnet.call('eth_getBlockReceipts', [{ blockHash: block.hash }]), devnet.call('debug_traceBlockByHash', [block.hash, PRESTATE_DIFF])])
    return performance.now() - started
  }

  const feed = new WebSocket(options.flashblocksUrl)
  feed.on('message', (data: Buffer, isBinary) => {
    const at = performance.now()
    const message = JSON.parse(isBinary ? brotliDecompressSync(data).toString('utf8') : data.toString('utf8')) as FlashblockWireMessage
    const block = message.metadata.block_number
    if (message.index === TICKS_PER_BLOCK - 1 && measuring) {
      sealedAt.set(block, at)
      if (sealedAt.size % UPSTREAM_SAMPLE_EVERY_BLOCKS === 1)
        void timeBlockFetch(block).then(
          (ms) => upstreamFetches.push(ms),
          () => {},
        )
    }
    if (!measuring) return
    transactionsInBlock.set(block, (transactionsInBlock.get(block) ?? 0) + message.diff.transactions.length)
    if (message.diff.transactions.length === 0) return
    const key = `${block}:${message.index}`
    const frame: Frame = { at, remaining: new Set() }
    for (const raw of message.diff.transactions as Hex[]) {
      const hash = keccak256(raw)
      frameOf.set(hash, key)
      if (announcedEarly.delete(hash)) notificationsBeforeFrame++
      else frame.remaining.add(hash)
    }
    if (frame.remaining.size === 0) frame.transactionsVisibleAt = at
    frames.set(key, frame)
  })

  const subscriber = new WebSocket(options.gatewayWsUrl)
  const subscriptions = new Map<string, 'heads' | 'transactions' | 'logs'>()
  const requests = new Map<number, 'heads' | 'transactions' | 'logs'>()
  subscriber.on('message', (data: Buffer) => {
    const at = performance.now()
    const message = JSON.parse(data.toString('utf8')) as { id?: number; result?: unknown; method?: string; params?: { subscription: string; result: unknown } }
    if (message.id !== undefined) {
      const kind = requests.get(message.id)
      if (kind !== undefined && typeof message.result === 'string') subscriptions.set(message.result, kind)
      return
    }
    if (message.method !== 'eth_subscription' || message.params === undefined || !measuring) return
    const kind = subscriptions.get(message.params.subscription)
    if (kind === 'heads') {
      const number = Number((message.params.result as { number: Hex }).number)
      if (!headAt.has(number)) headAt.set(number, at)
    } else if (kind === 'transactions') {
      const hash = message.params.result as Hash
      const key = frameOf.get(hash)
      const frame = key === undefined ? undefined : frames.get(key)
      if (frame === undefined) return void announcedEarly.set(hash, at)
      if (frame.remaining.delete(hash) && frame.remaining.size === 0) frame.transactionsVisibleAt = at
    } else if (kind === 'logs') {
      const { transactionHash } = message.params.result as { transactionHash: Hash }
      const key = frameOf.get(transactionHash)
      const frame = key === undefined ? undefined : frames.get(key)
      if (frame !== undefined && frame.logsVisibleAt === undefined) frame.logsVisibleAt = at
    }
  })
  await Promise.all([
    new Promise((resolve, reject) => feed.once('open', resolve).once('error', reject)),
    new Promise((resolve, reject) => subscriber.once('open', resolve).once('error', reject)),
  ])
  const subscribe = (id: number, kind: 'heads' | 'transactions' | 'logs', params: unknown[]) => {
    requests.set(id, kind)
    subscriber.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_subscribe', params }))
  }
  subscribe(1, 'heads', ['newHeads'])
  subscribe(2, 'transactions', ['newFlashblockTransactions'])
  subscribe(3, 'logs', ['pendingLogs', { address: options.hotPool, topics: [SWAP_TOPIC] }])

  const lagTimer = setInterval(() => {
    if (!measuring) return
    void Promise.all([devnet.call<Hex>('eth_blockNumber'), gateway.call<Hex>('eth_blockNumber')]).then(
      ([upstream, indexed]) => lagBlocks.push(Math.max(0, Number(upstream) - Number(indexed))),
      () => {},
    )
  }, LAG_SAMPLE_MS)

  return {
    /** Starts counting (frames, heads, lag samples); everything before is warm-up. */
    measure() {
      measuring = true
    },
    async stop(): Promise<ProbeFigures> {
      measuring = false
      clearInterval(lagTimer)
      feed.close()
      subscriber.close()
      const withTransactions = [...frames.values()]
      const ingestLagMs = [...sealedAt].filter(([number]) => headAt.has(number)).map(([number, at]) => Math.max(0, headAt.get(number)! - at))
      // Blocks the window saw whole: the first and last may be partial.
      const wholeBlocks = [...transactionsInBlock.entries()].slice(1, -1).map(([, count]) => count)
      return {
        ingestLagBlocks: summarise(lagBlocks),
        ingestLagMs: summarise(ingestLagMs),
        frameToTransactionsVisibleMs: summarise(
          withTransactions.filter((frame) => frame.transactionsVisibleAt !== undefined).map((frame) => Math.max(0, frame.transactionsVisibleAt! - frame.at)),
        ),
        frameToLogsVisibleMs: summarise(
          withTransactions.filter((frame) => frame.logsVisibleAt !== undefined).map((frame) => Math.max(0, frame.logsVisibleAt! - frame.at)),
        ),
        framesWithTransactions: withTransactions.length,
        framesNotAnnounced: withTransactions.filter((frame) => frame.transactionsVisibleAt === undefined).length,
        notificationsBeforeFrame,
        blocksSealed: sealedAt.size,
        transactionsPerBlock: summarise(wholeBlocks),
        upstreamBlockFetchMs: summarise(upstreamFetches),
      }
    },
  }
}
