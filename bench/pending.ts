import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { PerformanceObserver } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { type Hex, parseGwei } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { pino } from 'pino'
import { startGateway } from '../src/app.js'
import { serveConfigSchema } from '../src/config.js'
import { startDevnet } from '../src/devnet/devnet.js'
import { createDecodePool, createFlashblocksFeed, createPendingState, defaultDecodeThreads } from '../src/pending/index.js'
import { encodeFrame, flashblock, signedTransfer, startScriptedFeed } from '../test/fixtures/flashblocks.js'
import { nearestRank } from './quantile.js'
import { createRpcClient } from './rpc.js'

/** Flashblocks sent through the feed path; transactions in each (Base carries tens per flashblock). */
const FEED_MESSAGES = 300
/**
 * Flashblocks sent first and timed apart: the first frames a process decodes run its decoding code before V8
 * has optimised it (5–40 ms each for the first ~30, against ~2 ms after). A gateway does that once, when it
 * starts; the target is the steady state, and the cold figures are reported beside it.
 */
const FEED_WARM_UP_MESSAGES = 50
const TRANSACTIONS_PER_FLASHBLOCK = 10
/** Transactions in a busy Base flashblock: the frames a pool of decoding threads splits (src/pending/decode-pool.ts). */
const LARGE_FLASHBLOCK_TRANSACTIONS = 50
/** Transactions sent to the devnet, one at a time, timed until flashgate shows them as pending: enough that the p99 is not the largest. */
const SEND_SAMPLES = 200
/** Sends before the samples, while the feed connects and the index catches up with the devnet. */
const WARM_UP_SENDS = 10
const VISIBILITY_POLL_MS = 1
/**
 * Frames leave one per 20 ms: ten times Base's rate (a flashblock per 200 ms), not back to back. Back to back,
 * the pending state grows a block every few milliseconds, and the collections that growth brings (each
 * scavenge promotes what the state keeps) fall inside the timed windows far more often than a real feed
 * ever makes them.
 */
const FEED_INTERVAL_MS = 20
/** A frame not visible by then fails the measurement rather than hang the bench. */
const FRAME_TIMEOUT_MS = 10_000
const MNEMONIC = 'test test test test test test test test test test test junk'
const IDLE_HEAP_PATH = fileURLToPath(new URL('../bin/idle-heap.js', import.meta.url))

export type LatencySummary = { samples: number; p50Ms: number; p90Ms: number; p99Ms: number; maxMs: number }

function summarise(samples: number[]): LatencySummary {
  const sorted = samples.slice().sort((a, b) => a - b)
  const at = (quantile: number) => nearestRank(sorted, quantile)
  return { samples: sorted.length, p50Ms: at(0.5), p90Ms: at(0.9), p99Ms: at(0.99), maxMs: sorted.at(-1)! }
}

/**
 * From a flashblock frame leaving a loopback WebSocket server to its transactions being in the pending
 * view with their receipts (decode, validation, sender recovery, receipts from a legacy frame): target p99
 * under 10 ms.
 */
export async function measureFeedToVisible(
  transactionsPerFlashblock = TRANSACTIONS_PER_FLASHBLOCK,
): Promise<LatencySummary & { cold: LatencySummary; gcPauses: GcPauses; samplesWithGc: number; heapUsedMb: number }> {
  // Every frame signed and compressed before the clock starts: the bench's own signing (viem, in JS) would
  // otherwise fill the heap it shares with the feed, and its collections would be timed as flashgate's.
  const frames: (string | Buffer)[] = []
  let nonce = 0
  for (let message = 0; message < FEED_WARM_UP_MESSAGES + FEED_MESSAGES; message++) {
    const index = message % 10
    const blockNumber = 1_000 + Math.floor(message / 10)
    const transactions = await Promise.all(Array.from({ length: transactionsPerFlashblock }, () => signedTransfer({ from: nonce % 5, nonce: nonce++ })))
    // Compressed beforehand, as the sequencer does: the clock starts when the frame leaves.
    frames.push(
      encodeFrame(flashblock({ index, blockNumber, transactions, cumulativeGasBefore: BigInt(index * transactionsPerFlashblock * 21_000) }), 'brotli'),
    )
  }
  // Then the feed: a client that waited seconds for its first frame would take the feed for stale.
  const feed = await startScriptedFeed()
  // Decoded as the gateway decodes (threads for frames large enough to split), the threads started beforehand.
  const decoding = createDecodePool({ threads: defaultDecodeThreads(), logger: pino({ level: 'silent' }) })
  await decoding.warm()
  const state = createPendingState({ logger: pino({ level: 'silent' }), decode: decoding.decode })
  const client = createFlashblocksFeed({ url: feed.url, state, logger: pino({ level: 'silent' }) })
  client.start()
  await feed.connected()
  // And the garbage of that signing collected now, before the clock: a benchmark's own set-up is not timed.
  collectGarbage()
  const coldSamples: number[] = []
  const samples: number[] = []
  // The heap the collections below have to go through (the bench's gateway, with its answer cache, shares it).
  const heapUsedMb = process.memoryUsage().heapUsed / 2 ** 20
  // The process's garbage collections meanwhile: a slow sample with a pause inside it is the heap's, not the feed's.
  const pauses: { start: number; end: number }[] = []
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pauses.push({ start: entry.startTime, end: entry.startTime + entry.duration })
  })
  gcObserver.observe({ entryTypes: ['gc'] })
  const windows: { start: number; end: number }[] = []
  try {
    for (const encoded of frames) {
      // Visible once its receipts are (legacy frames carry them; they are published after the transactions).
      let timer: NodeJS.Timeout | undefined
      const visible = new Promise<void>((resolve, reject) => {
        state.events.once('receipts', () => resolve())
        timer = setTimeout(() => reject(new Error(`a flashblock was not visible within ${FRAME_TIMEOUT_MS} ms`)), FRAME_TIMEOUT_MS)
      })
      const sentAt = performance.now()
      feed.sendRaw(encoded)
      await visible.finally(() => clearTimeout(timer))
      const visibleAt = performance.now()
      if (coldSamples.length < FEED_WARM_UP_MESSAGES) coldSamples.push(visibleAt - sentAt)
      else {
        samples.push(visibleAt - sentAt)
        windows.push({ start: sentAt, end: visibleAt })
      }
      await sleep(Math.max(0, sentAt + FEED_INTERVAL_MS - performance.now()))
    }
  } finally {
    gcObserver.disconnect()
    await client.stop()
    await feed.stop()
    await decoding.close()
  }
  const overlaps = (window: { start: number; end: number }) => pauses.some((pause) => pause.start < window.end && pause.end > window.start)
  const timedPauses = pauses.filter((pause) => pause.end > (windows[0]?.start ?? Number.POSITIVE_INFINITY))
  return {
    ...summarise(samples),
    cold: summarise(coldSamples),
    gcPauses: summarisePauses(timedPauses),
    samplesWithGc: windows.filter(overlaps).length,
    heapUsedMb,
  }
}

/** A full garbage collection now (`gc()`, which the bench exposes to itself: it runs without `--expose-gc`). */
function collectGarbage() {
  setFlagsFromString('--expose-gc')
  ;(runInNewContext('gc') as () => void)()
}

export type GcPauses = { count: number; totalMs: number; maxMs: number }

function summarisePauses(pauses: { start: number; end: number }[]): GcPauses {
  const durations = pauses.map((pause) => pause.end - pause.start)
  return { count: durations.length, totalMs: durations.reduce((sum, duration) => sum + duration, 0), maxMs: Math.max(0, ...durations) }
}

/** A devnet and a gateway (its index in memory) following it and its Flashblocks feed. */
async function startDevnetGateway() {
  const devnet = await startDevnet({ port: 0, flashblocksPort: 0 })
  const config = serveConfigSchema.parse({
    port: 0,
    databaseUrl: 'memory://',
    upstreamRpc: devnet.rpcUrl,
    flashblocksWs: devnet.flashblocksUrl,
    startBlock: '0',
    // A client polls every few milliseconds: the public endpoint's per-address rate must not slow it.
    publicRateLimit: 0,
    logLevel: 'silent',
  })
  const gateway = await startGateway({ config, logger: pino({ level: 'silent' }) })
  return { devnet, gateway }
}

/** One JSON-RPC call (bench/rpc.ts); an error answer throws. */
function call<value>(url: string, method: string, params: unknown[]): Promise<value> {
  return createRpcClient(url).call<value>(method, params)
}

/** From `eth_sendRawTransaction` on the devnet to the transaction in flashgate's pending view: target p99 under 250 ms. */
export async function measureSendToVisible(): Promise<LatencySummary> {
  const { devnet, gateway } = await startDevnetGateway()
  const account = mnemonicToAccount(MNEMONIC, { addressIndex: 7 })
  const samples: number[] = []
  try {
    // Live: flashgate shows a pending block above its head.
    for (;;) {
      const [latest, pending] = await Promise.all([
        call<{ number: Hex } | null>(gateway.url, 'eth_getBlockByNumber', ['latest', false]),
        call<{ number: Hex } | null>(gateway.url, 'eth_getBlockByNumber', ['pending', false]),
      ])
      if (latest !== null && pending !== null && Number(pending.number) > Number(latest.number)) break
      await sleep(50)
    }
    let nonce = Number(await call<Hex>(devnet.rpcUrl, 'eth_getTransactionCount', [account.address, 'pending']))
    for (let sample = -WARM_UP_SENDS; sample < SEND_SAMPLES; sample++) {
      const raw = await account.signTransaction({
        type: 'eip1559',
        chainId: 31337,
        nonce,
        to: `0x${'42'.repeat(20)}`,
        value: 1n,
        gas: 21_000n,
        maxFeePerGas: parseGwei('20'),
        maxPriorityFeePerGas: parseGwei('1'),
      })
      const sentAt = performance.now()
      const hash = await call<Hex>(devnet.rpcUrl, 'eth_sendRawTransaction', [raw])
      while ((await call<unknown>(gateway.url, 'eth_getTransactionByHash', [hash])) === null) await sleep(VISIBILITY_POLL_MS)
      if (sample >= 0) samples.push(performance.now() - sentAt)
      nonce++
      // Spread the sends over the flashblock interval, as independent clients would.
      await sleep(Math.random() * 200)
    }
  } finally {
    await gateway.stop()
    await devnet.stop()
  }
  return summarise(samples)
}

/** Flashblocks whose hydration is timed on the devnet (today's format: no receipts in the frames). */
const HYDRATION_SAMPLES = 200
/** Senders of the background load while hydration is timed (funded dev accounts 1–4): a few transactions per flashblock. */
const LOAD_SENDERS = 4

/**
 * Today's Base: frames carry no receipts, flashgate hydrates them from the (flashblocks-aware) devnet.
 * Timed per flashblock from its transactions being applied to its receipts being visible, beside one
 * upstream round trip of the same batch measured in the same run, and the alternative single call
 * `eth_getBlockReceipts("pending")`.
 */
export async function measureHydration(): Promise<{
  visible: LatencySummary
  upstream: LatencySummary
  overhead: LatencySummary
  batchRoundTrip: LatencySummary
  blockReceiptsRoundTrip: LatencySummary
}> {
  const { devnet, gateway } = await startDevnetGateway()
  const state = gateway.pending!
  const visible: number[] = []
  const upstream: number[] = []
  const overhead: number[] = []
  const batchRoundTrip: number[] = []
  const blockReceiptsRoundTrip: number[] = []
  state.events.on('hydrated', ({ upstreamMs, visibleMs }) => {
    if (visible.length >= HYDRATION_SAMPLES) return
    visible.push(visibleMs)
    upstream.push(upstreamMs)
    overhead.push(visibleMs - upstreamMs)
  })
  // The two ways of asking, timed side by side on the same flashblocks: a batch of the new transactions'
  // receipts, and the pending block's receipts in one call.
  state.events.on('receipts', (_block, receipts) => {
    void (async () => {
      if (batchRoundTrip.length >= HYDRATION_SAMPLES) return
      const body = JSON.stringify(
        receipts.map((receipt, id) => ({ jsonrpc: '2.0', id, method: 'eth_getTransactionReceipt', params: [receipt.transactionHash] })),
      )
      let started = performance.now()
      await fetch(devnet.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
      batchRoundTrip.push(performance.now() - started)
      started = performance.now()
      await fetch(devnet.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":1,"method":"eth_getBlockReceipts","params":["pending"]}',
      })
      blockReceiptsRoundTrip.push(performance.now() - started)
    })()
  })
  let stopping = false
  const accounts = Array.from({ length: LOAD_SENDERS }, (_, index) => mnemonicToAccount(MNEMONIC, { addressIndex: 1 + index }))
  const senders = accounts.map(async (account) => {
    let nonce = Number(
      await (
        await fetch(devnet.rpcUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionCount', params: [account.address, 'pending'] }),
        })
      )
        .json()
        .then((answer) => (answer as { result: Hex }).result),
    )
    while (!stopping) {
      const raw = await account.signTransaction({
        type: 'eip1559',
        chainId: 31337,
        nonce: nonce++,
        to: `0x${'43'.repeat(20)}`,
        value: 1n,
        gas: 21_000n,
        maxFeePerGas: parseGwei('20'),
        maxPriorityFeePerGas: parseGwei('1'),
      })
      await fetch(devnet.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_sendRawTransaction', params: [raw] }),
      })
      await sleep(50 + Math.random() * 100)
    }
  })
  try {
    while (visible.length < HYDRATION_SAMPLES || batchRoundTrip.length < HYDRATION_SAMPLES) await sleep(200)
  } finally {
    stopping = true
    await Promise.all(senders)
    await gateway.stop()
    await devnet.stop()
  }
  return {
    visible: summarise(visible),
    upstream: summarise(upstream),
    overhead: summarise(overhead),
    batchRoundTrip: summarise(batchRoundTrip),
    blockReceiptsRoundTrip: summarise(blockReceiptsRoundTrip),
  }
}

/** `eth_sendRawTransactionSync` through flashgate (today's format, hydrated) until its pre-confirmed receipt: target p99 < 250 ms. */
export async function measureSyncSend(): Promise<LatencySummary & { preConfirmed: number }> {
  const { devnet, gateway } = await startDevnetGateway()
  const account = mnemonicToAccount(MNEMONIC, { addressIndex: 8 })
  const samples: number[] = []
  let preConfirmed = 0
  try {
    await gateway.ingester.waitForBlock(0, 10_000)
    for (let sample = -WARM_UP_SENDS; sample < SEND_SAMPLES; sample++) {
      const nonce = Number(await call<Hex>(gateway.url, 'eth_getTransactionCount', [account.address, 'pending']))
      const raw = await account.signTransaction({
        type: 'eip1559',
        chainId: 31337,
        nonce,
        to: `0x${'44'.repeat(20)}`,
        value: 1n,
        gas: 21_000n,
        maxFeePerGas: parseGwei('20'),
        maxPriorityFeePerGas: parseGwei('1'),
      })
      const sentAt = performance.now()
      const receipt = await call<{ blockHash: Hex }>(gateway.url, 'eth_sendRawTransactionSync', [raw, 6_000])
      if (sample < 0) continue
      samples.push(performance.now() - sentAt)
      if (/^0x0+$/.test(receipt.blockHash)) preConfirmed++
      await sleep(Math.random() * 200)
    }
  } finally {
    await gateway.stop()
    await devnet.stop()
  }
  return { ...summarise(samples), preConfirmed }
}

export type PendingFigures = Awaited<ReturnType<typeof measurePending>>

export async function measurePending(log: (line: string) => void) {
  log('pending: flashblock frame → pending view')
  const feedToVisible = await measureFeedToVisible()
  const { gcPauses, samplesWithGc } = feedToVisible
  log(
    `pending: frame → visible p50 ${feedToVisible.p50Ms.toFixed(2)} ms, p99 ${feedToVisible.p99Ms.toFixed(2)} ms (target p99 < 10 ms) after ${FEED_WARM_UP_MESSAGES} frames; the first ${FEED_WARM_UP_MESSAGES} p50 ${feedToVisible.cold.p50Ms.toFixed(2)} ms, p99 ${feedToVisible.cold.p99Ms.toFixed(2)} ms; ${gcPauses.count} GC pauses meanwhile (longest ${gcPauses.maxMs.toFixed(1)} ms), inside ${samplesWithGc} samples; heap ${feedToVisible.heapUsedMb.toFixed(0)} MB`,
  )
  const largeFeedToVisible = await measureFeedToVisible(LARGE_FLASHBLOCK_TRANSACTIONS)
  log(
    `pending: frame → visible, ${LARGE_FLASHBLOCK_TRANSACTIONS} tx per flashblock on ${defaultDecodeThreads()} decoding threads: p50 ${largeFeedToVisible.p50Ms.toFixed(2)} ms, p99 ${largeFeedToVisible.p99Ms.toFixed(2)} ms`,
  )
  log('pending: eth_sendRawTransaction on the devnet → visible through flashgate')
  const sendToVisible = await measureSendToVisible()
  log(`pending: send → visible p50 ${sendToVisible.p50Ms.toFixed(1)} ms, p99 ${sendToVisible.p99Ms.toFixed(1)} ms (target p99 < 250 ms)`)
  log("pending: today's format, receipts hydrated from the devnet")
  const hydration = await measureHydration()
  const figures = (summary: LatencySummary) => `p50 ${summary.p50Ms.toFixed(2)} ms, p99 ${summary.p99Ms.toFixed(2)} ms`
  log(
    `pending: applied → receipts visible ${figures(hydration.visible)}; of which upstream ${figures(hydration.upstream)}; flashgate's own ${figures(hydration.overhead)} (target p99 < 10 ms plus one upstream round trip)`,
  )
  log(
    `pending: batch of eth_getTransactionReceipt ${figures(hydration.batchRoundTrip)}; eth_getBlockReceipts("pending") ${figures(hydration.blockReceiptsRoundTrip)}`,
  )
  log('pending: eth_sendRawTransactionSync through flashgate → pre-confirmed receipt')
  const syncSend = await measureSyncSend()
  log(
    `pending: sync send p50 ${syncSend.p50Ms.toFixed(1)} ms, p99 ${syncSend.p99Ms.toFixed(1)} ms, ${syncSend.preConfirmed}/${syncSend.samples} pre-confirmed (target p99 < 250 ms)`,
  )
  return {
    feedToVisible,
    largeFeedToVisible: { ...largeFeedToVisible, transactionsPerFlashblock: LARGE_FLASHBLOCK_TRANSACTIONS, decodeThreads: defaultDecodeThreads() },
    sendToVisible,
    hydration,
    syncSend,
    transactionsPerFlashblock: TRANSACTIONS_PER_FLASHBLOCK,
    warmUpFlashblocks: FEED_WARM_UP_MESSAGES,
  }
}

/** What a child measuring the pending figures sends its parent: a line of its log, or the figures. */
type PendingChildMessage = { line: string } | { figures: PendingFigures }

/**
 * The pending figures measured in a process of their own, set up as `flashgate` starts (bin/idle-heap.js):
 * the devnet and the gateway timed there share no heap and no event loop with the bench, which by then
 * holds the 1M-log chain's bodies and a gateway of its own (a heap of ~140 MB, whose collections and
 * callbacks would be counted as flashgate's pending latency).
 */
export async function measurePendingApart(log: (line: string) => void): Promise<PendingFigures> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--import', IDLE_HEAP_PATH, '--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  return new Promise<PendingFigures>((resolve, reject) => {
    child.on('message', (message: PendingChildMessage) => {
      if ('line' in message) log(message.line)
      else resolve(message.figures)
    })
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`the pending measurement exited with code ${code}`)))
  })
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const send = process.send?.bind(process)
  // The bench that forked this one is gone (aborted, killed): so is the reason to go on.
  process.once('disconnect', () => process.exit(1))
  const log = send === undefined ? (line: string) => console.log(line) : (line: string) => send({ line } satisfies PendingChildMessage)
  const figures = await measurePending(log)
  if (send === undefined) console.log(JSON.stringify(figures, null, 2))
  else await new Promise((resolve) => send({ figures } satisfies PendingChildMessage, resolve))
  process.exit(0)
}
