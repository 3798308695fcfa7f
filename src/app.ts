import type { Logger } from 'pino'
import { ConfigError, MIB, type ServeConfig } from './config.js'
import { createDb, type Db, isPostgresUrl } from './db/index.js'
import { listenForChainChanges } from './db/notifications.js'
import { createIngester, type Ingester } from './ingest/index.js'
import { startRetention } from './ingest/retention.js'
import {
  createFlashblocksFeed,
  createPendingSource,
  createPendingState,
  createReceiptFetcher,
  type FlashblocksFeed,
  type PendingSource,
  type PendingState,
} from './pending/index.js'
import { createPolicies } from './policy/index.js'
import { createRedis } from './redis/index.js'
import { createResolvers, type Resolvers } from './resolvers/index.js'
import { createServer } from './server/index.js'
import { createUpstream } from './upstream/index.js'
import { createPassThrough } from './upstream/pass-through.js'

/** The index is "ready" while its head is at most this many blocks behind the upstream's. */
const READY_MAX_LAG_BLOCKS = 5
/** The ingester asks the upstream several times a second; this long without an answer, it is not keeping up. */
const READY_UPSTREAM_SILENCE_MS = 30_000

export type Gateway = {
  url: string
  port: number
  db: Db
  resolvers: Resolvers
  ingester: Ingester
  pending: PendingState | null
  feed: FlashblocksFeed | null
  stop(): Promise<void>
}

/**
 * What `/readyz` says of the pending view (informative: it never makes the process unready): where receipts
 * come from, whether the upstream is flashblocks-aware, and how far hydration lags the frames.
 */
function pendingReadiness(source: PendingSource, state: PendingState) {
  const { mode, source: current, upstreamAware } = source.status()
  const { hydration, divergences } = state.status()
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
  }
}

/** Refuses a role or replica that cannot work with the database named: before anything is opened. */
function checkDeployment(config: ServeConfig) {
  const postgres = isPostgresUrl(config.databaseUrl)
  if (config.role !== 'all' && !postgres)
    throw new ConfigError(`invalid configuration: --role ${config.role} needs a Postgres database shared by several processes (PGlite is one process: use --role all)`)
  if (config.databaseReadUrl !== undefined && !(postgres && isPostgresUrl(config.databaseReadUrl)))
    throw new ConfigError('invalid configuration: --database-read-url needs Postgres, for it and for --database-url (its primary)')
  if (config.databaseReadUrl !== undefined && config.role === 'ingest')
    throw new ConfigError('invalid configuration: --database-read-url is for serving processes; --role ingest writes to --database-url')
}

/** `flashgate serve`: the database, the ingester (when it wins the lock) and the HTTP server, wired. */
export async function startGateway({ config, logger }: { config: ServeConfig; logger: Logger }): Promise<Gateway> {
  checkDeployment(config)
  const db = await createDb({ databaseUrl: config.databaseUrl })
  // Reads from a streaming replica when one is named; its head is the one this process serves.
  const readDb = config.databaseReadUrl === undefined ? db : await createDb({ databaseUrl: config.databaseReadUrl, migrate: false }).catch(async (error: unknown) => {
    await db.close()
    throw error
  })
  // With --redis-url, rate limits, key revocations and forwarded nonces are shared by every serving process.
  const redis = config.redisUrl === undefined ? null : await createRedis({ url: config.redisUrl, prefix: config.redisPrefix, logger: logger.child({ module: 'redis' }) })
  const upstream = createUpstream({ rpcUrl: config.upstreamRpc, wsUrl: config.upstreamWs })
  const pendingLogger = logger.child({ module: 'pending' })
  const pending = config.flashblocksWs === undefined ? null : createPendingState({ logger: pendingLogger })
  // Feeds without receipts (Base since Azul): hydrate them from a flashblocks-aware upstream (src/pending/hydrate.ts).
  const pendingSource =
    pending === null
      ? null
      : createPendingSource({
          mode: config.pendingSource,
          state: pending,
          fetchReceipts: createReceiptFetcher({ rpcUrl: upstream.rpcUrl, request: (method, params) => upstream.request(method, params) }),
          logger: pendingLogger,
        })
  const passThrough = createPassThrough({ upstream })
  const feed =
    config.flashblocksWs === undefined || pending === null
      ? null
      : createFlashblocksFeed({ url: config.flashblocksWs, state: pending, logger: logger.child({ module: 'flashblocks' }) })
  const resolvers = createResolvers({
    db: readDb,
    primary: db,
    upstream,
    pending,
    limits: { maxBlockRange: config.maxBlockRange, maxLogs: config.maxLogs, maxQueryCost: config.maxQueryCost },
    cacheBytes: config.answerCacheMb * MIB,
    forward: passThrough,
    history: config.history,
    logger: logger.child({ module: 'events' }),
    redis,
  })
  const ingester = createIngester({ db, upstream, logger: logger.child({ module: 'ingest' }), startBlock: config.startBlock, batchSize: config.ingestBatchSize })
  // A serving process that also ingests sees its own commits at once; others hear of them by Postgres
  // NOTIFY (below), and subscribers everywhere through `resolvers.events`.
  ingester.events.on('head', (head) => resolvers.notify({ reorg: false, head: head.number }))
  ingester.events.on('reorg', () => resolvers.notify({ reorg: true }))
  ingester.events.on('blocks', (blocks) => {
    for (const block of blocks) {
      resolvers.pendingView.observeSealed(block.block)
      pending?.confirm(block)
    }
    resolvers.sending.onBlocks(blocks)
  })

  const server = createServer({
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
    redis,
    metrics: {
      async chain() {
        const status = ingester.status()
        const view = await resolvers.chain.view().catch(() => null)
        return { indexHead: view?.head?.number ?? null, upstreamHead: status.upstreamHead, ingesting: status.leader }
      },
      ...(pending !== null && pendingSource !== null && { pending: () => ({ source: pendingSource.status().source, ...pending.status() }) }),
      history: () => resolvers.historyReads,
      ...(redis !== null && { redis: () => redis.status() }),
    },
    async readiness() {
      const status = ingester.status()
      const view = await resolvers.chain.view().catch(() => null)
      const head = view?.head?.number ?? null
      const lag = head !== null && status.upstreamHead !== null ? status.upstreamHead - head : null
      // A standby serves from the index another process keeps: ready as long as the database answers.
      // The ingester is ready while the upstream answers and the index keeps up with it.
      const silentFor = status.lastUpstreamContactAt === null ? 0 : Date.now() - status.lastUpstreamContactAt
      const upstreamState = !status.leader
        ? null
        : status.lastErrorSource === 'upstream'
          ? 'unreachable'
          : silentFor > READY_UPSTREAM_SILENCE_MS
            ? 'unresponsive'
            : 'ok'
      const keepingUp = status.lastError === null && upstreamState === 'ok' && lag !== null && lag <= READY_MAX_LAG_BLOCKS
      const ready = view !== null && head !== null && (!status.leader || keepingUp)
      return {
        ready,
        details: {
          database: view === null ? 'unreachable' : 'ok',
          upstream: upstreamState,
          flashblocks: feed === null ? null : feed.status().connected ? 'connected' : 'disconnected',
          pending: pending === null || pendingSource === null ? null : pendingReadiness(pendingSource, pending),
          head,
          upstreamHead: status.upstreamHead,
          leader: status.leader,
          redis: redis === null ? null : redis.status().connected ? 'connected' : 'disconnected',
          lastError: status.lastError,
        },
      }
    },
  })
  const { url, port } = await server.listen()
  // `null` on PGlite: one process, whose ingester tells it directly.
  const chainChanges = listenForChainChanges({ databaseUrl: config.databaseUrl, onChange: (change) => resolvers.notify(change), logger: logger.child({ module: 'listen' }) })
  // `--role serve` never ingests (nor takes the ingest lock): another process keeps the index.
  if (config.role !== 'serve') ingester.start()
  const retention =
    config.retainBlocks === undefined || config.role === 'serve'
      ? null
      : startRetention({ db, retainBlocks: config.retainBlocks, leads: () => ingester.status().leader, logger: logger.child({ module: 'retention' }) })
  feed?.start()

  let stopping: Promise<void> | null = null
  return {
    url,
    port,
    db,
    resolvers,
    ingester,
    pending,
    feed,
    /** Idempotent: a second call waits for the first. */
    stop() {
      stopping ??= (async () => {
        await feed?.stop()
        pendingSource?.stop()
        await server.close()
        await chainChanges?.close()
        await retention?.stop()
        await ingester.stop()
        await redis?.close()
        if (readDb !== db) await readDb.close()
        await db.close()
      })()
      return stopping
    },
  }
}
