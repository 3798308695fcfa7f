import type { Logger } from 'pino'
import type { Hash } from 'viem'
import { SYNC_KEYS } from '../db/index.js'
import { type BlockData, type RowOptions, toRows } from './block-data.js'
import type { BlockFetcher } from './fetch-block.js'
import type { DeferredRewind } from './reorg.js'
import { type SafeHeads, safeHeadsState } from './follow.js'
import { createProgress } from './progress.js'
import type { IngesterStatus } from './status.js'
import type { Store, StoredHead } from './store.js'

/**
 * Every time this many logs have been written (in one backfill, or over many blocks followed one by one) the
 * planner's statistics are refreshed, so that log filters planned for their values (db/log-keys.ts) see the
 * index's current shape without waiting for autovacuum, which may lag far behind on a table growing by 750
 * logs a second, or be off. Measured on Base's shape with autovacuum off: a wallet's transfers over 1,000
 * blocks took 51 ms by the topic0 index before the first `analyze`, 0.2 ms by the topic2 index after it.
 * One `analyze` of the block tables takes ~0.4 s there, once per ~130 s of Base. A process's first refresh
 * comes after `FIRST_ANALYZE_AFTER_LOGS`, and the interval doubles up to this: a new index grows fastest,
 * relatively, in its first minutes (at Base's rate the first comes after 13 s instead of 130).
 */
const ANALYZE_AFTER_LOGS = 100_000
const FIRST_ANALYZE_AFTER_LOGS = 10_000

export type BlockSyncConfig = {
  fetcher: BlockFetcher
  logger: Logger
  /** `head` and `lastUpstreamContactAt` are kept up to date by each batch. */
  status: IngesterStatus
  /** Blocks written per transaction, and upstream requests in flight at once. */
  batchSize: number
  fetchConcurrency: number
  /** Read for each block: the registry is known only once it is followed. */
  rowOptions: () => RowOptions
  stopping: () => boolean
  /**
   * Finds where a reorganisation above `head` forked; returns the block to fetch next. It rewinds at once, or
   * leaves the rewind to the write of the new branch's first blocks (`deferredRewind`).
   */
  rewind: (head: StoredHead, target: number) => Promise<number>
  /** The rewind to write with the next batch, if any. */
  deferredRewind?: () => DeferredRewind | null
  /** The deferred rewind was committed with the new branch's first blocks (before `committed`). */
  rewound?: (rewind: DeferredRewind, removedLogs: number) => void
  /** Announces a commit: its new head, and its blocks in order. */
  committed: (head: StoredHead, blocks: BlockData[]) => void
  /**
   * The upstream's safe and finalized heads, read as each batch is fetched and written in its commit: a reader
   * never sees a new head with the safe heads of the one before.
   */
  readSafeHeads: () => Promise<SafeHeads>
  /** Logs written between two refreshes of the planner's statistics (`ANALYZE_AFTER_LOGS` when absent). */
  analyzeAfterLogs?: number
}

/** Ingests ranges of blocks: fetched in parallel, written batch by batch, each batch one transaction. */
export function createBlockSync(config: BlockSyncConfig) {
  const { fetcher, logger, status, batchSize, fetchConcurrency } = config
  const analyzeAfterLogs = config.analyzeAfterLogs ?? ANALYZE_AFTER_LOGS
  /**
   * Logs written since the statistics were last refreshed, over every call of `syncTo`, the first block
   * they were written from, and how many to wait for.
   */
  let logsSinceAnalyze = 0
  let analyzeFrom: number | null = null
  let analyzeAt = Math.min(FIRST_ANALYZE_AFTER_LOGS, analyzeAfterLogs)

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

  /** Fetches `[from, min(from + batchSize - 1, target)]`, and the safe heads meanwhile; or nothing past the target. */
  function fetchBatch(from: number, target: number): Promise<[BlockData[], SafeHeads]> | null {
    if (from > target) return null
    const batch = Promise.all([fetchRange(from, Math.min(from + batchSize - 1, target)), config.readSafeHeads()])
    // It may be dropped unawaited (reorg, stop); its failure is then of no interest.
    batch.catch(() => {})
    return batch
  }

  /**
   * Ingests up to `target`, batch by batch, fetching the next batch while the current one is written;
   * returns the next block to fetch.
   */
  async function syncTo(store: Store, next: number, target: number): Promise<number> {
    const progress = createProgress({ logger })
    let logsWritten = 0
    let prefetched = fetchBatch(next, target)
    try {
      while (next <= target && !config.stopping() && prefetched !== null) {
        const [batch, safeHeads] = await prefetched
        prefetched = null
        status.lastUpstreamContactAt = Date.now()
        const head = await store.head()
        const first = batch[0]!.block
        const rewind = config.deferredRewind?.() ?? null
        // Not linked to the stored head, or (a rewind deferred) to the fork: the upstream moved meanwhile.
        const unlinked =
          rewind !== null
            ? next !== rewind.ancestor + 1 || first.parentHash !== rewind.ancestorHash
            : head !== null && head.number === next - 1 && first.parentHash !== head.hash
        if (unlinked && head !== null) {
          next = await config.rewind(head, target)
          prefetched = fetchBatch(next, target)
          continue
        }
        // Keep only the prefix that links up: the upstream may have reorganised while we fetched.
        let linked = 1
        while (linked < batch.length && batch[linked]!.block.parentHash === batch[linked - 1]!.block.hash) linked++
        const accepted = batch.slice(0, linked)
        const rows = accepted.map((data) => toRows(data, config.rowOptions()))
        const tracing = accepted.every((block) => block.accountChanges !== null)
        prefetched = fetchBatch(next + accepted.length, target)
        const state = { ...safeHeadsState(safeHeads), ...(!tracing && { [SYNC_KEYS.accountSource]: 'read-through' }) }
        const removedLogs = await store.writeBlocks(rows, state, {
          target,
          rewindTo: rewind?.ancestor,
        })
        if (rewind !== null) config.rewound?.(rewind, removedLogs)
        const last = accepted[accepted.length - 1]!.block
        const committed = { number: Number.parseInt(last.number, 16), hash: last.hash as Hash }
        status.head = committed.number
        next = committed.number + 1
        config.committed(committed, accepted)
        const logs = rows.reduce((sum, block) => sum + block.logs.length, 0)
        logsWritten += logs
        logsSinceAnalyze += logs
        analyzeFrom = Math.min(analyzeFrom ?? rows[0]!.block.number, rows[0]!.block.number)
        progress.record(accepted.length, logs, committed.number, target)
      }
    } finally {
      progress.done()
    }
    if (logsSinceAnalyze >= analyzeAt) {
      // A backfill this large analyses every block table; blocks followed a few at a time, only what they changed.
      await store.analyze(logsWritten >= analyzeAfterLogs ? undefined : (analyzeFrom ?? undefined))
      logsSinceAnalyze = 0
      analyzeFrom = null
      analyzeAt = Math.min(analyzeAt * 2, analyzeAfterLogs)
    }
    return next
  }

  return { syncTo }
}
