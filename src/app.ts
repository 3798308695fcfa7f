import type { Logger } from 'pino'
import { entryPointsFor } from './attribution/user-operations.js'
import type { ClusterHub } from './cluster/hub.js'
import type { ClusterLink } from './cluster/link.js'
import type { PrimaryStatus, RelayedCallAnswer, SealedBlock } from './cluster/protocol.js'
import { checkDeployment, MIB, type ServeConfig } from './config.js'
import { desc } from 'drizzle-orm'
import { ExecutionFailedError, ExecutionRevertedError, loggableError } from './errors.js'
import { byteaToHex, createDb, type Db, isPostgresUrl, schema } from './db/index.js'
import { listenForChainChanges } from './db/notifications.js'
import { createIngester, type Ingester, type IngesterEvents, type IngesterStatus } from './ingest/index.js'
import { startRetention } from './ingest/retention.js'
import { logPartitionState, logPartitions } from './db/log-partitions.js'
import { startLogSealer } from './ingest/seal-logs.js'
import {
  createFlashblocksFeed,
  createPendingSource,
  createDecodePool,
  createPendingState,
  defaultDecodeThreads,
  createReceiptFetcher,
  type FlashblocksFeed,
  type PendingState,
} from './pending/index.js'
import { createNonceRegistry } from './pending/forwarded.js'
import { createMemoryFilterStore } from './resolvers/filter-store.js'
import { createFlashblockExecutor, type FlashblockExecutor } from './pending/execute/index.js'
import { createPolicies, createRateLimiter, type RateLimiter } from './policy/index.js'
import { createRedis } from './redis/index.js'
import { createResolvers, type PendingCalls, type Resolvers } from './resolvers/index.js'
import { createServer } from './server/index.js'
import type { Hash, Hex } from 'viem'
import { createUpstream } from './upstream/index.js'
import { createPassThrough } from './upstream/pass-through.js'

/** The index is "ready" while its head is at most this many blocks behind the upstream's. */
const READY_MAX_LAG_BLOCKS = 5

export type Gateway = {
  /** Where the APIs are served (by the workers, on the primary of `--workers N`). */
  url: string
  port: number
  db: Db
  resolvers: Resolvers
  ingester: Ingester
  pending: PendingState | null
  feed: FlashblocksFeed | null
  /** The ingester, the feed and the pending view as this process sees them (what a primary tells its workers). */
  primaryStatus(): PrimaryStatus
  stop(): Promise<void>
}

/**
 * What `/readyz` says of the pending view (informative: it never makes the process unready): where receipts
 * come from, whether the upstream is flashblocks-aware, and how far hydration lags the frames.
 */
function pendingReadiness(source: PrimaryStatus['pendingSource'] & {}, state: PrimaryStatus['pending'] & {}) {
  const { mode, source: current, upstreamAware, execution } = source
  const { hydration, divergences } = state
  return {
    mode,
    source: current,
    upstreamFlashblocksAware: upstreamAware,
    hydrationLagMs: { p50: hydration.lagMsP50, p99: hydration.lagMsP99 },
    hydrationsInFlight: hydration.inFlight,
    hydrationFailures: hydration.failures,
    missingReceipts: hydration.missingReceipts,
    lastHydrationError: hydration.lastError,
    divergences,
    execution,
  }
}

/**
 * The part a process plays in `serve --workers N` (src/cluster): the primary ingests, holds the Flashblocks
 * connection, the pending state and the shared buckets, and serves no HTTP; a worker serves, with a replica
 * of the pending state fed by the primary, and never ingests.
 */
export type GatewayCluster = { kind: 'primary'; hub: ClusterHub } | { kind: 'worker'; link: ClusterLink }

/** What a worker's pending state needs of a committed block, without the rest of its receipts. */
function sealedBlock({ number, hash, transactionHashes, receipts, block, form }: IngesterEvents['blocks'][0][number]): SealedBlock {
  return {
    number,
    hash,
    transactionHashes,
    form,
    receipts: receipts.map(({ status, gasUsed, cumulativeGasUsed, logs, ...rest }) => ({
      status,
      gasUsed,
      cumulativeGasUsed,
      logs: logs.map(({ address, topics, data }) => ({ address, topics, data })),
      // Compared with the pre-confirmed receipt's, as the ingesting process compares it (the form comes in `form`).
      ...(Object.hasOwn(rest, 'blockTimestamp') && { blockTimestamp: (rest as Record<string, unknown>).blockTimestamp }),
    })),
    header: { ...block, transactions: transactionHashes },
  }
}

/** `flashgate serve`: the database, the ingester (when it wins the lock) and the HTTP server, wired. */
export async function startGateway({
  config,
  logger,
  cluster = null,
  unansweredAfterMs,
}: {
  config: ServeConfig
  logger: Logger
  cluster?: GatewayCluster | null
  /** How long a database statement may go unanswered before its connections are replaced (tests shorten it). */
  unansweredAfterMs?: number
}): Promise<Gateway> {
  checkDeployment(config)
  const hub = cluster?.kind === 'primary' ? cluster.hub : null
  const link = cluster?.kind === 'worker' ? cluster.link : null
  const onUnanswered = ({ session, waitedMs }: { session: string; waitedMs: number }) =>
    logger.warn(
      { module: 'db', session, waitedMs: Math.round(waitedMs) },
      'the database left a statement unanswered: its connections are taken for dead and replaced',
    )
  const db = await createDb({
    databaseUrl: config.databaseUrl,
    unansweredAfterMs,
    onUnanswered,
    upgradeProgress: ({ toBlock, lastBlock }) => logger.info({ module: 'db', toBlock, lastBlock }, 'upgrading the stored bodies of an older index'),
  })
  // Reads from a streaming replica when one is named; its head is the one this process serves.
  const readDb =
    config.databaseReadUrl === undefined
      ? db
      : await createDb({ databaseUrl: config.databaseReadUrl, migrate: false, unansweredAfterMs, onUnanswered }).catch(async (error: unknown) => {
          await db.close()
          throw error
        })
  // With --redis-url, rate limits, key revocations and forwarded nonces are shared by every serving process.
  const redis =
    config.redisUrl === undefined ? null : await createRedis({ url: config.redisUrl, prefix: config.redisPrefix, logger: logger.child({ module: 'redis' }) })
  const upstream = createUpstream({ rpcUrl: config.upstreamRpc, wsUrl: config.upstreamWs })
  const pendingLogger = logger.child({ module: 'pending' })
  // The process that reads the feed decodes its transactions on threads; a worker of `--workers N` decodes
  // what its primary relays on its own thread (its cores serve requests).
  const decodePool =
    config.flashblocksWs === undefined || link !== null
      ? null
      : createDecodePool({ threads: config.decodeThreads ?? defaultDecodeThreads(), logger: pendingLogger })
  const pending = config.flashblocksWs === undefined ? null : createPendingState({ logger: pendingLogger, decode: decodePool?.decode })
  // On the primary of `--workers N`, what the feed and the source do to the state is announced to the workers.
  const sharedPending = hub === null || pending === null ? null : hub.sharePending(pending)
  const feedState = sharedPending?.state ?? pending
  // Feeds without receipts (Base since Azul): hydrate them from a flashblocks-aware upstream (src/pending/hydrate.ts).
  // A worker's replica is fed by its primary, which alone reads the feed and asks the upstream.
  // `--pending-source execute`: the primary executes the flashblocks itself (src/pending/execute/).
  const executor =
    feedState === null || link !== null || config.pendingSource !== 'execute'
      ? null
      : createFlashblockExecutor({
          state: feedState,
          chainId: Number(await upstream.request<Hex>('eth_chainId', [])),
          request: (method, params) => upstream.batchedRequest(method, params),
          logger: pendingLogger.child({ source: 'execute' }),
        })
  const pendingSource =
    feedState === null || link !== null
      ? null
      : createPendingSource({
          mode: config.pendingSource,
          state: feedState,
          fetchReceipts: createReceiptFetcher({ rpcUrl: upstream.rpcUrl, request: (method, params) => upstream.request(method, params) }),
          execute: executor,
          logger: pendingLogger,
        })
  const passThrough = createPassThrough({ upstream })
  const feed =
    config.flashblocksWs === undefined || feedState === null || link !== null
      ? null
      : createFlashblocksFeed({ url: config.flashblocksWs, state: feedState, logger: logger.child({ module: 'flashblocks' }) })
  const entryPoints = entryPointsFor(config.entryPoints)
  const resolvers = createResolvers({
    db: readDb,
    entryPoints,
    primary: db,
    upstream,
    pending,
    limits: { maxBlockRange: config.maxBlockRange, maxLogs: config.maxLogs, maxQueryCost: config.maxQueryCost },
    cacheBytes: config.answerCacheMb * MIB,
    forward: passThrough,
    // `pending` calls run on the executed state: here, or on the primary for a worker of `--workers N`
    // (asked over the cluster link when the primary executes; it forwards them otherwise).
    pendingCalls: link !== null && config.pendingSource === 'execute' ? relayedPendingCalls(link) : executor,
    history: config.history,
    logger: logger.child({ module: 'events' }),
    redis,
    cluster: redis === null ? link : null,
  })
  // How the node writes its receipts and transactions, from the newest ones the index holds, until a block says; the
  // feed is read once it is known (below), so that no frame's receipts are built before.
  const receiptFormLearnt = pending === null ? Promise.resolve() : learnNodeForm(pending)
  async function learnNodeForm(state: PendingState) {
    try {
      const [newest] = await readDb.drizzle
        .select({ hash: schema.transactions.hash })
        .from(schema.transactions)
        .orderBy(desc(schema.transactions.blockNumber))
        .limit(1)
      if (newest === undefined) return
      const hash = byteaToHex(newest.hash)
      const [receipt, transaction] = await Promise.all([resolvers.getTransactionReceipt({ hash }), resolvers.getTransaction({ hash })])
      state.learnForm({
        receipt: receipt === null ? null : receipt.parse<Record<string, unknown>>(),
        transaction: transaction === null ? null : (transaction as unknown as Record<string, unknown>),
      })
    } catch (error) {
      logger.warn({ err: loggableError(error) }, 'could not read a stored receipt; pre-confirmed receipts follow the node’s form from its next block')
    }
  }
  // Where it ingests, the leader seals the partitions of `logs` (below), on Postgres only: on PGlite a
  // partition's rewrite would hold the one connection every reader waits for. The ingester knows it too.
  const sealsLogs = isPostgresUrl(config.databaseUrl)
  const ingester = createIngester({
    db,
    upstream,
    logger: logger.child({ module: 'ingest' }),
    startBlock: config.startBlock,
    batchSize: config.ingestBatchSize,
    registry: config.builderCodeRegistry,
    entryPoints,
    keepRecentStateDiffs: executor !== null,
    sealsLogs,
  })
  // A serving process that also ingests sees its own commits at once; others hear of them by Postgres
  // NOTIFY (below), and subscribers everywhere through `resolvers.events`.
  ingester.events.on('head', (head) => resolvers.notify({ reorg: false, head: head.number }))
  // The first flashblock of a block means its parent has sealed: the ingester asks for it now, not at its next
  // poll (an upstream without WebSocket is polled every 250 ms).
  let newestPending = -1
  pending?.events.on('transactions', (block) => {
    if (block.number <= newestPending) return
    newestPending = block.number
    ingester.pollNow()
  })
  // A block opened on a parent the index does not hold: the sealed head was likely replaced (a reorg) and the
  // index has not seen it yet; the block is shown once it has, so the ingester looks now.
  pending?.events.on('awaitingParent', () => ingester.pollNow())
  ingester.events.on('reorg', ({ ancestor }) => {
    resolvers.notify({ reorg: true })
    // The blocks above the ancestor are gone (a reorg, or a chain reset to a lower height): the pending view
    // forgets them and what was pre-confirmed on them, and takes the new branch's blocks, whatever their numbers.
    newestPending = Math.min(newestPending, ancestor)
    pending?.rewind(ancestor)
    hub?.rewound(ancestor)
  })
  ingester.events.on('blocks', (blocks) => {
    for (const block of blocks) {
      resolvers.pendingView.observeSealed(block.block)
      executor?.sealed(block)
      pending?.confirm(block)
    }
    resolvers.sending.onBlocks(blocks)
    hub?.sealed(blocks.map(sealedBlock))
  })
  if (link !== null) {
    const hydrate = (hashes: Hash[]) => link.request('hydrate', hashes)
    link.events.on('flashblock', ({ message }) => void pending?.apply(message))
    link.events.on('pending-withdraw', ({ number }) => pending?.withdraw(number))
    link.events.on('pending-rewind', ({ ancestor }) => pending?.rewind(ancestor))
    link.events.on('hydrating', ({ on, balances }) => pending?.setHydrate(on ? Object.assign(hydrate, { providesBalances: balances === true }) : null))
    link.events.on('sealed', ({ blocks }) => {
      for (const block of blocks) {
        resolvers.pendingView.observeSealed(block.header)
        pending?.confirm(block)
      }
      resolvers.sending.onBlocks(blocks)
    })
  }
  if (hub !== null) shareWithWorkers(hub, { hydrate: sharedPending?.hydrate ?? null, pending, executor })

  // What `/readyz` and `/metrics` report of the ingester, the feed and the pending view: a worker reports its primary's.
  const primaryStatus = (): PrimaryStatus | null => link?.primaryStatus() ?? null
  const ingesterStatus = (): IngesterStatus => primaryStatus()?.ingester ?? ingester.status()
  /** Silence from the upstream counts from here until its first answer. */
  const startedAt = Date.now()
  const feedConnected = (): boolean | null => (link !== null ? (primaryStatus()?.feed?.connected ?? null) : feed === null ? null : feed.status().connected)
  const pendingStatus = () =>
    link !== null
      ? { source: primaryStatus()?.pendingSource ?? null, state: primaryStatus()?.pending ?? null }
      : { source: pendingSource?.status() ?? null, state: pending?.status() ?? null }

  const server =
    hub !== null
      ? null
      : createServer({
          resolvers,
          logger: logger.child({ module: 'http' }),
          port: config.port,
          host: config.host,
          policies: createPolicies(config),
          trustProxy: config.trustProxy,
          passThrough,
          chainEvents: resolvers.events,
          registrationRateLimit: config.registrationRateLimit,
          corsOrigins: config.corsOrigins,
          servesApis: config.role !== 'ingest',
          requestTimeoutSeconds: config.requestTimeout,
          redis,
          metrics: {
            async chain() {
              const status = ingesterStatus()
              const view = await resolvers.chain.view().catch(() => null)
              return { indexHead: view?.head?.number ?? null, upstreamHead: status.upstreamHead, ingesting: status.leader }
            },
            ...(pending !== null && {
              pending: () => {
                const { source, state } = pendingStatus()
                return { source: source?.source ?? 'probing', execution: source?.execution ?? null, ...(state ?? pending.status()) }
              },
            }),
            history: () => resolvers.historyReads,
            ...(redis !== null && { redis: () => redis.status() }),
            async logPartitions() {
              const counts = { sealed: 0, written: 0, bare: 0 }
              for (const partition of await logPartitions(db)) counts[logPartitionState(partition)]++
              return counts
            },
          },
          async readiness() {
            const status = ingesterStatus()
            const view = await resolvers.chain.view().catch(() => null)
            const head = view?.head?.number ?? null
            const lag = head !== null && status.upstreamHead !== null ? status.upstreamHead - head : null
            // A standby serves from the index another process keeps: ready as long as the database answers.
            // The ingester is ready while the upstream answers and the index keeps up with it.
            // The ingester asks the upstream several times a second; this long without an answer, it is not keeping up.
            // Before its first answer the upstream is `connecting`, not `ok`, and silent since this process started.
            const silentFor = Date.now() - (status.lastUpstreamContactAt ?? startedAt)
            const upstreamState = !status.leader
              ? null
              : status.lastErrorSource === 'upstream'
                ? 'unreachable'
                : silentFor > config.readyUpstreamSilence * 1_000
                  ? 'unresponsive'
                  : status.lastUpstreamContactAt === null
                    ? 'connecting'
                    : 'ok'
            const keepingUp = status.lastError === null && upstreamState === 'ok' && lag !== null && lag <= READY_MAX_LAG_BLOCKS
            const ready = view !== null && head !== null && (!status.leader || keepingUp)
            return {
              ready,
              details: {
                database: view === null ? 'unreachable' : 'ok',
                upstream: upstreamState,
                flashblocks: feedConnected() === null ? null : feedConnected() ? 'connected' : 'disconnected',
                pending: (() => {
                  const { source, state } = pendingStatus()
                  return pending === null || source === null || state === null ? null : pendingReadiness(source, state)
                })(),
                head,
                upstreamHead: status.upstreamHead,
                leader: status.leader,
                redis: redis === null ? null : redis.status().connected ? 'connected' : 'disconnected',
                lastError: status.lastError,
              },
            }
          },
          cluster: link,
        })
  if (link !== null)
    link.events.on('metrics-request', ({ id }) => {
      // Unanswered, the primary leaves this worker out of that scrape after a wait.
      server!.metrics.json().then(
        (metrics) => link.post({ fg: 'metrics-reply', id, metrics }),
        (error: unknown) => logger.warn({ err: error }, "could not collect this worker's metrics"),
      )
    })
  const { url, port } = server === null ? { url: `http://${config.host}:${config.port}`, port: config.port } : await server.listen()
  // `null` on PGlite: one process, whose ingester tells it directly.
  const chainChanges = listenForChainChanges({
    databaseUrl: config.databaseUrl,
    onChange: (change) => resolvers.notify(change),
    logger: logger.child({ module: 'listen' }),
  })
  // `--role serve` never ingests (nor takes the ingest lock): another process keeps the index; nor does a worker.
  const ingests = config.role !== 'serve' && link === null
  if (ingests) ingester.start()
  const retention =
    config.retainBlocks === undefined || !ingests
      ? null
      : startRetention({ db, retainBlocks: config.retainBlocks, leads: () => ingester.status().leader, logger: logger.child({ module: 'retention' }) })
  const sealer = sealsLogs && ingests ? startLogSealer({ db, leads: () => ingester.status().leader, logger: logger.child({ module: 'seal-logs' }) }) : null
  let stopping: Promise<void> | null = null
  if (feed !== null) void receiptFormLearnt.then(() => stopping === null && feed.start())
  return {
    url,
    port,
    db,
    resolvers,
    ingester,
    pending,
    feed,
    primaryStatus: () => ({
      ingester: ingester.status(),
      feed: feed === null ? null : feed.status(),
      pendingSource: pendingSource?.status() ?? null,
      pending: pending?.status() ?? null,
    }),
    /** Idempotent: a second call waits for the first. */
    stop() {
      stopping ??= (async () => {
        // Upkeep (retention, seals) takes no new round from now on: a round begun while the server drains (a
        // seal's query into a database that no longer answers) held the stop for as long as that query was waited
        // on, past the stop timeout. The ingester goes on until the server has drained (a sync send in flight may
        // wait for the block that holds its transaction).
        const upkeep = Promise.all([retention?.stop(), sealer?.stop()])
        upkeep.catch(() => {}) // awaited below, after the server has drained
        await feed?.stop()
        await decodePool?.close()
        pendingSource?.stop()
        executor?.stop()
        await server?.close()
        await chainChanges?.close()
        await upkeep
        await ingester.stop()
        await redis?.close()
        if (readDb !== db) await readDb.close()
        await db.close()
      })()
      return stopping
    },
  }
}

/**
 * What the primary of `serve --workers N` keeps for its workers: the rate-limit buckets (one set per
 * limiter name), the forwarded nonces, and the shared hydration. Used only without Redis (with it, the
 * workers share these through Redis as separate processes do).
 */
function shareWithWorkers(
  hub: ClusterHub,
  {
    hydrate,
    pending,
    executor,
  }: { hydrate: ((hashes: Hash[]) => Promise<(Record<string, unknown> | null)[]>) | null; pending: PendingState | null; executor: FlashblockExecutor | null },
) {
  const limiters = new Map<string, RateLimiter>()
  hub.handle('take', (limiter, client, cost, rate) => {
    const key = `${limiter.name}:${limiter.ratePerSecond}:${limiter.burstSeconds}`
    let shared = limiters.get(key)
    if (shared === undefined)
      limiters.set(key, (shared = createRateLimiter({ ratePerSecond: limiter.ratePerSecond, burstSeconds: limiter.burstSeconds, name: limiter.name })))
    return shared.take(client, { cost, rate })
  })
  const nonces = createNonceRegistry()
  hub.handle('forwardedRecord', (sender, nonce, hash, transaction) => {
    nonces.record(sender, nonce, hash, transaction)
    return null
  })
  hub.handle('forwardedFrom', (sender, known) => nonces.from(sender, known))
  hub.handle('forwardedTransaction', (hash) => nonces.transaction(hash))
  const filters = createMemoryFilterStore()
  hub.handle('filterInstall', (id, filter, owner) => filters.install(id, filter, owner))
  hub.handle('filterGet', (id) => filters.get(id))
  hub.handle('filterAdvance', (id, from, to) => filters.advance(id, from, to))
  hub.handle('filterRemove', (id) => filters.remove(id))
  hub.handle('hydrate', (hashes) => (hydrate === null ? hashes.map(() => null) : hydrate(hashes)))
  // A worker's pending call runs on the executed state here; reverts and failures travel as data.
  hub.handle('pendingCall', async (number, kind, request): Promise<RelayedCallAnswer | null> => {
    const block = pending?.blocks(number - 1).find((candidate) => candidate.number === number)
    if (executor === null || block === undefined) return null
    try {
      const result = await executor.call(block, kind, request)
      return result === null ? null : { result }
    } catch (error) {
      if (error instanceof ExecutionRevertedError) return { reverted: { data: error.data, reason: error.reason } }
      if (error instanceof ExecutionFailedError) return { failed: error.message }
      throw error
    }
  })
}

/** A worker's pending calls, run by its primary's executor (`--pending-source execute`). */
function relayedPendingCalls(link: ClusterLink): PendingCalls {
  return {
    async call(block, kind, request) {
      const answer = await link.request('pendingCall', block.number, kind, request)
      if (answer === null) return null
      if ('reverted' in answer) throw new ExecutionRevertedError(answer.reverted.data, answer.reverted.reason)
      if ('failed' in answer) throw new ExecutionFailedError(answer.failed)
      return answer.result
    },
  }
}
