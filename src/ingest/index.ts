import { EventEmitter } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import { type Hash, type Hex, webSocket } from 'viem'
import { type Db, type LogRow, SYNC_KEYS } from '../db/index.js'
import type { Upstream } from '../upstream/index.js'
import { type BlockData, toRows } from './block-data.js'
import { createBlockFetcher, type UpstreamCapabilities } from './fetch-block.js'
import { createProgress } from './progress.js'
import { createStore, type StoredHead } from './store.js'

/** Blocks written per transaction while backfilling, and upstream requests in flight at once. */
const DEFAULT_BATCH_SIZE = 100
const DEFAULT_FETCH_CONCURRENCY = 8
/** Head polling when the upstream has no WebSocket; with one, a slower safety poll. */
const POLL_INTERVAL_MS = 250
const WS_SAFETY_POLL_MS = 2_000
const SAFE_HEAD_REFRESH_MS = 1_000
const RETRY_BASE_MS = 250
const RETRY_MAX_MS = 10_000
const LOCK_RETRY_MS = 1_000
/** Blocks compared per round trip while looking for the common ancestor of a reorg. */
const REORG_PROBE_BATCH = 16
/**
 * After a backfill of at least this many logs the planner's statistics are refreshed at once, so that the
 * first `eth_getLogs` do not wait for autovacuum to find the (address, topic0) index worth using.
 */
const ANALYZE_AFTER_LOGS = 100_000

export type StartBlock = number | { latestMinus: number }

export type IngesterConfig = {
  db: Db
  upstream: Upstream
  logger: Logger
  /** Where an empty index starts; ignored when resuming. */
  startBlock: StartBlock
  batchSize?: number
  fetchConcurrency?: number
  pollIntervalMs?: number
}

export type IngesterStatus = {
  running: boolean
  /** Holds the ingest lock (on Postgres, another process may be the ingester). */
  leader: boolean
  head: number | null
  upstreamHead: number | null
  /** The last upstream or database failure, cleared by the next success. */
  lastError: string | null
}

export type IngesterEvents = {
  /** New canonical blocks were committed, up to `head`. */
  head: [head: StoredHead]
  /** The blocks of that commit, in order, with their transaction hashes (for the pending view). */
  blocks: [blocks: { number: number; hash: Hash; transactionHashes: Hash[] }[]]
  /** Blocks above `ancestor` were removed; `removedLogs` are the logs that went with them. */
  reorg: [event: { ancestor: number; removedLogs: LogRow[] }]
}

export function createIngester(config: IngesterConfig) {
  const { db, upstream, logger } = config
  const batchSize = config.batchSize ?? DEFAULT_BATCH_SIZE
  const fetchConcurrency = config.fetchConcurrency ?? DEFAULT_FETCH_CONCURRENCY
  const pollIntervalMs = config.pollIntervalMs ?? POLL_INTERVAL_MS
  const store = createStore({ db })
  const capabilities: UpstreamCapabilities = { blockReceipts: true, tracing: true }
  const fetcher = createBlockFetcher({ upstream, capabilities })
  const events = new EventEmitter<IngesterEvents>()
  const status: IngesterStatus = { running: false, leader: false, head: null, upstreamHead: null, lastError: null }

  let stopping = false
  let loop: Promise<void> | null = null
  let wake: (() => void) | null = null
  let unsubscribe: (() => void) | null = null
  let lock: { release(): Promise<void> } | null = null
  let safeHeadsCheckedAt = 0

  function interruptibleSleep(ms: number): Promise<void> {
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

  async function upstreamNumber(): Promise<number> {
    return Number.parseInt(await upstream.request<Hex>('eth_blockNumber'), 16)
  }

  /** Checks the chain id, records where the index starts, and returns the block to fetch next. */
  async function initialise(): Promise<number> {
    const chainId = Number.parseInt(await upstream.request<Hex>('eth_chainId'), 16)
    const state = await store.syncState()
    const storedChainId = state.get(SYNC_KEYS.chainId)
    if (storedChainId !== undefined && storedChainId !== chainId)
      throw new Error(`the database indexes chain ${storedChainId} but the upstream is chain ${chainId}`)
    const head = await store.head()
    status.head = head?.number ?? null
    if (head !== null) {
      logger.info({ head: head.number }, 'resuming ingest')
      return head.number + 1
    }
    const upstreamHead = await upstreamNumber()
    const start =
      typeof config.startBlock === 'number' ? config.startBlock : Math.max(0, upstreamHead - config.startBlock.latestMinus)
    await store.putSyncState(SYNC_KEYS.chainId, chainId)
    await store.putSyncState(SYNC_KEYS.firstBlock, start)
    await store.putSyncState(SYNC_KEYS.accountSource, 'trace')
    logger.info({ chainId, start, upstreamHead }, 'starting a new index')
    return start
  }

  async function fetchRange(from: number, to: number): Promise<BlockData[]> {
    const numbers = Array.from({ length: to - from + 1 }, (_, index) => from + index)
    const results: BlockData[] = new Array(numbers.length)
    let next = 0
    async function worker() {
      while (next < numbers.length) {
        const index = next++
        results[index] = await fetcher.fetchBlock(numbers[index]!)
      }
    }
    await Promise.all(Array.from({ length: Math.min(fetchConcurrency, numbers.length) }, worker))
    return results
  }

  /**
   * Walks back from the stored head until the upstream agrees on a block hash, deletes everything above
   * that common ancestor in one transaction, and returns the block to fetch next.
   */
  async function handleReorg(head: StoredHead): Promise<number> {
    const state = await store.syncState()
    const firstBlock = (state.get(SYNC_KEYS.firstBlock) as number | undefined) ?? 0
    let ancestor = firstBlock - 1
    search: for (let top = head.number; top >= firstBlock; top -= REORG_PROBE_BATCH) {
      const bottom = Math.max(firstBlock, top - REORG_PROBE_BATCH + 1)
      const [stored, upstreamHeaders] = await Promise.all([
        store.hashesFrom(bottom, top),
        Promise.all(Array.from({ length: top - bottom + 1 }, (_, index) => fetcher.fetchHeader(top - index))),
      ])
      for (const header of upstreamHeaders) {
        if (header === null) continue
        const number = Number.parseInt(header.number, 16)
        if (stored.get(number) === header.hash) {
          ancestor = number
          break search
        }
      }
    }
    const removedLogs = await store.rewindTo(ancestor)
    logger.warn({ from: head.number, ancestor, removedLogs: removedLogs.length }, 'chain reorganisation')
    status.head = ancestor >= firstBlock ? ancestor : null
    events.emit('reorg', { ancestor, removedLogs })
    return ancestor + 1
  }

  async function refreshSafeHeads() {
    if (Date.now() - safeHeadsCheckedAt < SAFE_HEAD_REFRESH_MS) return
    safeHeadsCheckedAt = Date.now()
    const read = async (tag: 'safe' | 'finalized') => {
      try {
        const block = await upstream.request<{ number: Hex } | null>('eth_getBlockByNumber', [tag, false])
        return block === null ? null : Number.parseInt(block.number, 16)
      } catch {
        return null
      }
    }
    const [safe, finalized] = await Promise.all([read('safe'), read('finalized')])
    await store.putSyncState(SYNC_KEYS.safe, safe)
    await store.putSyncState(SYNC_KEYS.finalized, finalized)
  }

  /** Fetches `[from, min(from + batchSize - 1, target)]`, or nothing past the target. */
  function fetchBatch(from: number, target: number): Promise<BlockData[]> | null {
    if (from > target) return null
    const batch = fetchRange(from, Math.min(from + batchSize - 1, target))
    // It may be dropped unawaited (reorg, stop); its failure is then of no interest.
    batch.catch(() => {})
    return batch
  }

  /**
   * Ingests up to `target`, batch by batch, fetching the next batch while the current one is written;
   * returns the next block to fetch.
   */
  async function syncTo(next: number, target: number): Promise<number> {
    const progress = createProgress({ logger })
    let prefetched = fetchBatch(next, target)
    let logsWritten = 0
    try {
      while (next <= target && !stopping && prefetched !== null) {
        const batch = await prefetched
        prefetched = null
        const head = await store.head()
        const first = batch[0]!.block
        if (head !== null && head.number === next - 1 && first.parentHash !== head.hash) {
          next = await handleReorg(head)
          prefetched = fetchBatch(next, target)
          continue
        }
        // Keep only the prefix that links up: the upstream may have reorganised while we fetched.
        let linked = 1
        while (linked < batch.length && batch[linked]!.block.parentHash === batch[linked - 1]!.block.hash) linked++
        const accepted = batch.slice(0, linked)
        const rows = accepted.map(toRows)
        const tracing = accepted.every((block) => block.accountChanges !== null)
        prefetched = fetchBatch(next + accepted.length, target)
        await store.writeBlocks(rows, tracing ? {} : { [SYNC_KEYS.accountSource]: 'read-through' })
        const last = accepted[accepted.length - 1]!.block
        const committed = { number: Number.parseInt(last.number, 16), hash: last.hash as Hash }
        status.head = committed.number
        next = committed.number + 1
        events.emit('head', committed)
        events.emit(
          'blocks',
          accepted.map(({ block }) => ({
            number: Number.parseInt(block.number, 16),
            hash: block.hash,
            transactionHashes: block.transactions.map((transaction) => transaction.hash),
          })),
        )
        const logs = rows.reduce((sum, block) => sum + block.logs.length, 0)
        logsWritten += logs
        progress.record(accepted.length, logs, committed.number, target)
        await refreshSafeHeads()
      }
    } finally {
      progress.done()
    }
    if (logsWritten >= ANALYZE_AFTER_LOGS) await store.analyze()
    return next
  }

  function subscribeToHeads() {
    if (upstream.wsUrl === null) return
    try {
      const transport = webSocket(upstream.wsUrl, { reconnect: true })({})
      let active = true
      transport.value
        ?.subscribe({
          params: ['newHeads'],
          onData: () => wake?.(),
          onError: (error) => logger.warn({ err: error }, 'newHeads subscription error'),
        })
        .then(({ unsubscribe: stop }) => {
          if (!active) void stop().catch(() => {})
          else unsubscribe = () => void stop().catch(() => {})
        })
        .catch((error: unknown) => logger.warn({ err: error }, 'newHeads subscription failed; polling'))
      unsubscribe = () => {
        active = false
      }
    } catch (error) {
      logger.warn({ err: error }, 'newHeads subscription failed; polling')
    }
  }

  async function acquireLock() {
    while (!stopping) {
      lock = await db.tryIngestLock()
      if (lock !== null) {
        status.leader = true
        return
      }
      logger.info('another process is ingesting; standing by')
      await interruptibleSleep(LOCK_RETRY_MS)
    }
  }

  async function run() {
    let retryMs = RETRY_BASE_MS
    let next: number | null = null
    await acquireLock()
    while (!stopping) {
      try {
        next ??= await initialise()
        const target = await upstreamNumber()
        status.upstreamHead = target
        if (next <= target) next = await syncTo(next, target)
        else {
          const head = await store.head()
          const upstreamHeader = head === null ? null : await fetcher.fetchHeader(head.number)
          // The upstream may have replaced our head with a block at the same height (or dropped it).
          if (head !== null && upstreamHeader?.hash !== head.hash) next = await handleReorg(head)
          else {
            await refreshSafeHeads()
            await interruptibleSleep(upstream.wsUrl === null ? pollIntervalMs : WS_SAFETY_POLL_MS)
          }
        }
        status.lastError = null
        retryMs = RETRY_BASE_MS
      } catch (error) {
        if (stopping) break
        status.lastError = error instanceof Error ? error.message : String(error)
        logger.warn({ err: error, retryInMs: retryMs }, 'ingest step failed; retrying')
        await interruptibleSleep(retryMs)
        retryMs = Math.min(retryMs * 2, RETRY_MAX_MS)
      }
    }
  }

  return {
    events,
    status: (): IngesterStatus => ({ ...status }),
    /** Starts following the upstream in the background. */
    start() {
      if (loop !== null) return
      stopping = false
      status.running = true
      subscribeToHeads()
      loop = run().finally(() => {
        status.running = false
      })
    },
    /** Resolves once the index holds block `number` (or rejects after `timeoutMs`). */
    async waitForBlock(number: number, timeoutMs = 30_000): Promise<void> {
      const deadline = Date.now() + timeoutMs
      while ((status.head ?? -1) < number) {
        if (Date.now() > deadline) throw new Error(`ingester did not reach block ${number} (at ${status.head})`)
        await sleep(20)
      }
    },
    /** Finishes the current batch, releases the lock and stops. */
    async stop() {
      stopping = true
      wake?.()
      unsubscribe?.()
      await loop
      loop = null
      await lock?.release()
      lock = null
      status.leader = false
    },
  }
}

export type Ingester = ReturnType<typeof createIngester>
