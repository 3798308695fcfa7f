import { EventEmitter } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import { BaseError, type Hash, type Hex, RpcError, RpcRequestError, webSocket } from 'viem'
import { type Db, type IngestLock, IngestLockLostError, isIngestLockLost, SYNC_KEYS } from '../db/index.js'
import type { Upstream } from '../upstream/index.js'
import type { EntryPoint } from '../attribution/user-operations.js'
import { createRegistryFollower, type RegistrySetting } from './registry.js'
import { type BlockData, InconsistentBlockError, toRows, type RawBlock, type RawReceipt } from './block-data.js'
import { createBlockFetcher, type UpstreamCapabilities } from './fetch-block.js'
import { createProgress } from './progress.js'
import { createStore, type Store, type StoredHead } from './store.js'

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
  /** The on-chain Builder Codes registry to follow (ingest/registry.ts); `default`: Base's, on its chains. */
  registry?: RegistrySetting
  /** The EntryPoints whose user operations are attributed; default: the canonical ones. */
  entryPoints?: readonly EntryPoint[]
}

export type IngesterStatus = {
  /** Holds the ingest lock (on Postgres, another process may be the ingester). */
  leader: boolean
  head: number | null
  upstreamHead: number | null
  /** The last upstream or database failure, cleared by the next success. */
  lastError: string | null
  /** Where `lastError` came from: the upstream node, the database (or the ingest lock), or the ingest itself. */
  lastErrorSource: 'upstream' | 'database' | 'ingest' | null
  /** When the upstream last answered the ingester (ms since the epoch); `null` before it first did. */
  lastUpstreamContactAt: number | null
}

function errorSource(error: unknown): NonNullable<IngesterStatus['lastErrorSource']> {
  if (error instanceof BaseError || error instanceof InconsistentBlockError) return 'upstream'
  // postgres.js and PGlite errors carry a string `code` (a SQLSTATE, or ECONNREFUSED, CONNECTION_CLOSED, …).
  if (isIngestLockLost(error) || typeof (error as { code?: unknown } | null)?.code === 'string') return 'database'
  return 'ingest'
}

export type IngesterEvents = {
  /** New canonical blocks were committed, up to `head`. */
  head: [head: StoredHead]
  /** The blocks of that commit, in order, with their transaction hashes and receipts (for the pending view). */
  blocks: [blocks: { number: number; hash: Hash; transactionHashes: Hash[]; receipts: RawReceipt[]; block: RawBlock }[]]
  /** Blocks above `ancestor` were removed, and `removedLogs` logs with them. */
  reorg: [event: { ancestor: number; removedLogs: number }]
}

export function createIngester(config: IngesterConfig) {
  const { db, upstream, logger } = config
  const batchSize = config.batchSize ?? DEFAULT_BATCH_SIZE
  const fetchConcurrency = config.fetchConcurrency ?? DEFAULT_FETCH_CONCURRENCY
  const pollIntervalMs = config.pollIntervalMs ?? POLL_INTERVAL_MS
  // Bound to the ingest lock's session once the lock is held (see acquireLock).
  let store: Store = createStore({ db })
  const capabilities: UpstreamCapabilities = { blockReceipts: true, tracing: true }
  const fetcher = createBlockFetcher({ upstream, capabilities })
  const events = new EventEmitter<IngesterEvents>()
  const registry = createRegistryFollower({ setting: config.registry === undefined ? 'default' : config.registry, upstream, logger })
  const status: IngesterStatus = {
    leader: false,
    head: null,
    upstreamHead: null,
    lastError: null,
    lastErrorSource: null,
    lastUpstreamContactAt: null,
  }

  let stopping = false
  let loop: Promise<void> | null = null
  let wake: (() => void) | null = null
  /** Set while the loop waits for the next head poll: the only wait `pollNow` cuts short (never a back-off). */
  let polling = false
  /** `pollNow` came while the loop was busy: its next wait between polls is skipped, so the request is not lost. */
  let pollAsked = false
  let unsubscribe: (() => void) | null = null
  let lock: IngestLock | null = null
  let safeHeadsCheckedAt = 0

  /** Waits `ms`, or until `stop` (or `pollNow`, between polls) wakes it; no wait at all once stopping. */
  function interruptibleSleep(ms: number): Promise<void> {
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

  async function upstreamNumber(): Promise<number> {
    const number = Number.parseInt(await upstream.request<Hex>('eth_blockNumber'), 16)
    status.lastUpstreamContactAt = Date.now()
    return number
  }

  /** Checks the chain id, records where the index starts, and returns the block to fetch next. */
  async function initialise(): Promise<number> {
    const chainId = Number.parseInt(await upstream.request<Hex>('eth_chainId'), 16)
    const state = await store.syncState()
    const storedChainId = state.get(SYNC_KEYS.chainId)
    if (storedChainId !== undefined && storedChainId !== chainId)
      throw new Error(`the database indexes chain ${storedChainId} but the upstream is chain ${chainId}`)
    const head = await store.head()
    // After a failure the last commit may have landed without us hearing of it (the connection died
    // during COMMIT): what the database holds is the truth, and readers hear of it like any commit.
    const known = status.head
    status.head = head?.number ?? null
    if (head !== null && known !== null && head.number > known) events.emit('head', head)
    if (head !== null) {
      logger.info({ head: head.number }, 'resuming ingest')
      await registry.start(store, chainId, state.get(SYNC_KEYS.builderCodeRegistry), (state.get(SYNC_KEYS.firstBlock) as number | undefined) ?? 0)
      return head.number + 1
    }
    const upstreamHead = await upstreamNumber()
    const start = typeof config.startBlock === 'number' ? config.startBlock : Math.max(0, upstreamHead - config.startBlock.latestMinus)
    await store.putSyncState(SYNC_KEYS.chainId, chainId)
    await store.putSyncState(SYNC_KEYS.firstBlock, start)
    await store.putSyncState(SYNC_KEYS.accountSource, 'trace')
    await registry.start(store, chainId, state.get(SYNC_KEYS.builderCodeRegistry), start)
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
    logger.warn({ from: head.number, ancestor, removedLogs }, 'chain reorganisation')
    status.head = ancestor >= firstBlock ? ancestor : null
    events.emit('reorg', { ancestor, removedLogs })
    return ancestor + 1
  }

  async function refreshSafeHeads() {
    if (Date.now() - safeHeadsCheckedAt < SAFE_HEAD_REFRESH_MS) return
    safeHeadsCheckedAt = Date.now()
    // A node without the tag answers null (or an error): no such block. A failed call (the upstream is
    // away) leaves the stored value as it was, so that `safe` does not vanish for the length of an outage.
    const read = async (tag: 'safe' | 'finalized'): Promise<number | null | undefined> => {
      try {
        const block = await upstream.request<{ number: Hex } | null>('eth_getBlockByNumber', [tag, false])
        return block === null ? null : Number.parseInt(block.number, 16)
      } catch (error) {
        return error instanceof RpcError || error instanceof RpcRequestError ? null : undefined
      }
    }
    const [safe, finalized] = await Promise.all([read('safe'), read('finalized')])
    if (safe !== undefined) await store.putSyncState(SYNC_KEYS.safe, safe)
    if (finalized !== undefined) await store.putSyncState(SYNC_KEYS.finalized, finalized)
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
        status.lastUpstreamContactAt = Date.now()
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
        const rows = accepted.map((data) => toRows(data, { registry: registry.address(), entryPoints: config.entryPoints }))
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
          accepted.map(({ block, receipts }) => ({
            number: Number.parseInt(block.number, 16),
            hash: block.hash,
            transactionHashes: block.transactions.map((transaction) => transaction.hash),
            receipts,
            block,
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

  /** Waits for the ingest lock (another process may hold it: stand by); returns false when stopping. */
  async function acquireLock(): Promise<boolean> {
    while (!stopping) {
      lock = await db.tryIngestLock()
      if (lock !== null) {
        store = createStore({ db: lock.db })
        status.leader = true
        logger.info('holding the ingest lock')
        return true
      }
      logger.info('another process is ingesting; standing by')
      await interruptibleSleep(LOCK_RETRY_MS)
    }
    return false
  }

  /** The lock went with its session (database restart, dropped connection): let it go, and compete again. */
  async function dropLock() {
    const lost = lock
    lock = null
    status.leader = false
    await lost?.release()
    logger.warn('lost the ingest lock; acquiring it again')
  }

  async function run() {
    let retryMs = RETRY_BASE_MS
    let next: number | null = null
    while (!stopping) {
      try {
        if (lock === null && !(await acquireLock())) break
        if (!lock!.held()) throw new IngestLockLostError()
        next ??= await initialise()
        // This read of the head is the one a `pollNow` before it asked for.
        pollAsked = false
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
            // Caught up: a turn of reading the registry below the index, if that is unfinished.
            if (!(await registry.backfill(store)) && !pollAsked) {
              polling = true
              await interruptibleSleep(upstream.wsUrl === null ? pollIntervalMs : WS_SAFETY_POLL_MS).finally(() => {
                polling = false
              })
            }
          }
        }
        status.lastError = null
        status.lastErrorSource = null
        retryMs = RETRY_BASE_MS
      } catch (error) {
        // Start again from what the database holds: batches committed before the failure are not fetched
        // again (no duplicates), and one whose commit may or may not have landed is settled by reading it.
        next = null
        if (lock !== null && (!lock.held() || isIngestLockLost(error))) await dropLock()
        if (stopping) break
        status.lastError = error instanceof Error ? error.message : String(error)
        status.lastErrorSource = errorSource(error)
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
      subscribeToHeads()
      loop = run()
    },
    /**
     * Asks the upstream for its head now rather than at the next poll: a flashblock of a newer block says the
     * one before it has sealed. Cuts short only the wait between head polls, never an error's back-off.
     */
    pollNow() {
      if (polling && wake !== null) wake()
      else pollAsked = true
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
