import { EventEmitter } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import type { Hash, Hex } from 'viem'
import { type Db, type IngestLock, IngestLockLostError, isIngestLockLost, SYNC_KEYS } from '../db/index.js'
import type { Upstream } from '../upstream/index.js'
import type { EntryPoint } from '../attribution/user-operations.js'
import { type NodeForm, sealedForm } from '../objects/receipt.js'
import { createRegistryFollower, type RegistrySetting } from './registry.js'
import type { PrestateDiff } from './account-diffs.js'
import type { RawBlock, RawReceipt } from './block-data.js'
import { createBlockFetcher, type UpstreamCapabilities } from './fetch-block.js'
import { createHeadFollower } from './follow.js'
import { type DeferredRewind, findCommonAncestor } from './reorg.js'
import { createStatus, type IngesterStatus, recordFailure, recordSuccess } from './status.js'
import { createStore, type Store, type StoredHead } from './store.js'
import { createBlockSync } from './sync.js'

export type { IngesterStatus }

/** Blocks written per transaction while backfilling, and upstream requests in flight at once. */
const DEFAULT_BATCH_SIZE = 100
/** With `keepRecentStateDiffs`, blocks sealed within this long keep their state diffs. */
const RECENT_STATE_DIFFS_S = 60
const DEFAULT_FETCH_CONCURRENCY = 8
const RETRY_BASE_MS = 250
const RETRY_MAX_MS = 10_000
const LOCK_RETRY_MS = 1_000
/**
 * How long an upstream may stay below our head, agreeing with the block we hold at its own head, before the
 * blocks above are taken as dropped (as a devnet's `evm_revert` drops them) rather than not yet seen by a node
 * lagging behind its peers (an upstream behind a load balancer).
 */
const UPSTREAM_BEHIND_GRACE_MS = 30_000

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
  /** Logs written between two refreshes of the planner's statistics (ingest/sync.ts; tests lower it). */
  analyzeAfterLogs?: number
  /** The on-chain Builder Codes registry to follow (ingest/registry.ts); `default`: Base's, on its chains. */
  registry?: RegistrySetting
  /** The EntryPoints whose user operations are attributed; default: the canonical ones. */
  entryPoints?: readonly EntryPoint[]
  /**
   * Hand the state diffs of blocks sealed in the last minute to `blocks` listeners (the flashblock executor
   * keeps its parent-state cache current with them); older blocks, a backfill's, never keep them.
   */
  keepRecentStateDiffs?: boolean
  /** Default `UPSTREAM_BEHIND_GRACE_MS`. */
  upstreamBehindGraceMs?: number
  /**
   * The leader also seals the partitions of `logs` (Postgres): a backfill then leaves the secondary indexes of
   * the partitions it fills far below the head to the seal (ingest/store.ts `bareBackfill`).
   */
  sealsLogs?: boolean
}

export type IngesterEvents = {
  /** New canonical blocks were committed, up to `head`. */
  head: [head: StoredHead]
  /** The blocks of that commit, in order, with their transaction hashes and receipts (for the pending view). */
  blocks: [
    blocks: {
      number: number
      hash: Hash
      transactionHashes: Hash[]
      receipts: RawReceipt[]
      block: RawBlock
      stateDiffs?: PrestateDiff[]
      form: Partial<NodeForm>
    }[],
  ]
  /** Blocks above `ancestor` were removed, and `removedLogs` logs with them. */
  reorg: [event: { ancestor: number; removedLogs: number }]
}

export function createIngester(config: IngesterConfig) {
  const { db, upstream, logger } = config
  // Bound to the ingest lock's session once the lock is held (see acquireLock).
  let store: Store = createStore({ db, bareBackfill: config.sealsLogs })
  const capabilities: UpstreamCapabilities = { blockReceipts: true, tracing: true }
  const fetcher = createBlockFetcher({
    upstream,
    capabilities,
    logger,
    keepStateDiffs: config.keepRecentStateDiffs ? (block) => Date.now() / 1000 - Number.parseInt(block.timestamp, 16) < RECENT_STATE_DIFFS_S : undefined,
  })
  const events = new EventEmitter<IngesterEvents>()
  const registry = createRegistryFollower({ setting: config.registry === undefined ? 'default' : config.registry, upstream, logger })
  const status = createStatus()
  let stopping = false
  let loop: Promise<void> | null = null
  let lock: IngestLock | null = null

  const follower = createHeadFollower({ upstream, logger, status, pollIntervalMs: config.pollIntervalMs })
  const sync = createBlockSync({
    fetcher,
    logger,
    status,
    batchSize: config.batchSize ?? DEFAULT_BATCH_SIZE,
    fetchConcurrency: config.fetchConcurrency ?? DEFAULT_FETCH_CONCURRENCY,
    analyzeAfterLogs: config.analyzeAfterLogs,
    rowOptions: () => ({ registry: registry.address(), entryPoints: config.entryPoints }),
    stopping: () => stopping,
    rewind: handleReorg,
    deferredRewind: () => deferredRewind,
    rewound({ ancestor, from }, removedLogs) {
      deferredRewind = null
      logger.warn({ from, ancestor, removedLogs }, 'chain reorganisation')
      events.emit('reorg', { ancestor, removedLogs })
    },
    committed(head, blocks) {
      events.emit('head', head)
      events.emit(
        'blocks',
        blocks.map(({ block, receipts, stateDiffs }) => ({
          number: Number.parseInt(block.number, 16),
          hash: block.hash,
          transactionHashes: block.transactions.map((transaction) => transaction.hash),
          receipts,
          block,
          stateDiffs,
          // How the node writes its receipts and transactions, for the pre-confirmed ones to follow.
          form: sealedForm({ receipts, transactions: block.transactions }),
        })),
      )
    },
    readSafeHeads: follower.readSafeHeads,
  })

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
    return startIndex(chainId, state.get(SYNC_KEYS.builderCodeRegistry))
  }

  /** Records where a new index starts (`--start-block` on the upstream's chain as it is now); returns that block. */
  async function startIndex(chainId: number, registryProgress: unknown): Promise<number> {
    const upstreamHead = await follower.readHead()
    const start = typeof config.startBlock === 'number' ? config.startBlock : Math.max(0, upstreamHead - config.startBlock.latestMinus)
    await store.putSyncState(SYNC_KEYS.chainId, chainId)
    await store.putSyncState(SYNC_KEYS.firstBlock, start)
    await store.putSyncState(SYNC_KEYS.accountSource, 'trace')
    await registry.start(store, chainId, registryProgress, start)
    logger.info({ chainId, start, upstreamHead }, 'starting a new index')
    return start
  }

  /**
   * A rewind found and not yet written: it goes in the transaction that writes the new branch's first blocks,
   * so that readers see the old branch, then the new one, never the index down at the fork between.
   */
  let deferredRewind: DeferredRewind | null = null

  /**
   * Finds the common ancestor of the stored and the upstream's chain; returns the block to fetch next. When the
   * upstream has blocks above it (`target`, its head), the rewind is deferred to the write of the first of them;
   * otherwise it is done now.
   */
  async function handleReorg(head: StoredHead, target?: number): Promise<number> {
    deferredRewind = null
    const { ancestor, ancestorHash, firstBlock } = await findCommonAncestor({ store, fetcher }, head)
    if (ancestorHash !== null && ancestor >= firstBlock && target !== undefined && target > ancestor) {
      deferredRewind = { ancestor, ancestorHash, from: head.number }
      return ancestor + 1
    }
    const removedLogs = await store.rewindTo(ancestor)
    logger.warn({ from: head.number, ancestor, removedLogs }, 'chain reorganisation')
    status.head = ancestor >= firstBlock ? ancestor : null
    events.emit('reorg', { ancestor, removedLogs })
    if (ancestor >= firstBlock) return ancestor + 1
    // Not one block in common: the upstream's chain was reset or replaced (a wiped devnet, a node synced
    // anew). The index starts again where `--start-block` says on that chain, rather than waiting for it to
    // grow back to where the old one started; what was read below the index is read again.
    logger.warn({ firstBlock }, 'the upstream shares no block with the index: starting a new index on its chain')
    const chainId = (await store.syncState()).get(SYNC_KEYS.chainId) as number
    return startIndex(chainId, null)
  }

  /** Since when the upstream has been below our head while agreeing with what we hold at its head. */
  let behindSince: number | null = null

  /**
   * Whether the upstream no longer has our head: it holds another block at that height, or it is below it and
   * its own head is not the block we hold there. Below it and agreeing (or with nothing to compare), it is taken
   * as behind for `UPSTREAM_BEHIND_GRACE_MS`: a rewind would take back blocks that are still canonical.
   */
  async function headReplaced(head: StoredHead, upstreamHead: number): Promise<boolean> {
    const upstreamHeader = await fetcher.fetchHeader(head.number)
    if (upstreamHeader !== null) {
      behindSince = null
      return upstreamHeader.hash !== head.hash
    }
    const [theirs, ours] = await Promise.all([fetcher.fetchHeader(upstreamHead), store.hashesFrom(upstreamHead, upstreamHead)])
    const held = ours.get(upstreamHead)
    if (theirs !== null && held !== undefined && theirs.hash !== held) return true
    behindSince ??= Date.now()
    if (Date.now() - behindSince < (config.upstreamBehindGraceMs ?? UPSTREAM_BEHIND_GRACE_MS)) return false
    behindSince = null
    return true
  }

  /** Waits for the ingest lock (another process may hold it: stand by); returns false when stopping. */
  async function acquireLock(): Promise<boolean> {
    while (!stopping) {
      lock = await db.tryIngestLock()
      if (lock !== null) {
        store = createStore({ db: lock.db, bareBackfill: config.sealsLogs })
        status.leader = true
        logger.info('holding the ingest lock')
        return true
      }
      logger.info('another process is ingesting; standing by')
      await follower.sleep(LOCK_RETRY_MS)
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
        const target = await follower.readHead()
        status.upstreamHead = target
        if (next <= target) next = await sync.syncTo(store, next, target)
        else {
          const head = await store.head()
          if (head !== null && (await headReplaced(head, target))) next = await handleReorg(head, target)
          else {
            await follower.refreshSafeHeads(store)
            // Caught up: a turn of reading the registry below the index, if that is unfinished.
            if (!(await registry.backfill(store))) await follower.waitForNextPoll()
          }
        }
        recordSuccess(status)
        retryMs = RETRY_BASE_MS
      } catch (error) {
        // Start again from what the database holds: batches committed before the failure are not fetched
        // again (no duplicates), and one whose commit may or may not have landed is settled by reading it.
        next = null
        deferredRewind = null
        if (lock !== null && (!lock.held() || isIngestLockLost(error))) await dropLock()
        if (stopping) break
        recordFailure(status, error)
        logger.warn({ err: error, retryInMs: retryMs }, 'ingest step failed; retrying')
        await follower.sleep(retryMs)
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
      follower.start()
      loop = run()
    },
    /**
     * Asks the upstream for its head now rather than at the next poll: a flashblock of a newer block says the
     * one before it has sealed. Cuts short only the wait between head polls, never an error's back-off.
     */
    pollNow: follower.pollNow,
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
      follower.stop()
      await loop
      loop = null
      await lock?.release()
      lock = null
      status.leader = false
    },
  }
}

export type Ingester = ReturnType<typeof createIngester>
