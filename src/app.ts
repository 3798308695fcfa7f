import type { Logger } from 'pino'
import { MIB, type ServeConfig } from './config.js'
import { createDb, type Db } from './db/index.js'
import { createIngester, type Ingester } from './ingest/index.js'
import { createFlashblocksFeed, createPendingState, type FlashblocksFeed, type PendingState } from './pending/index.js'
import { createPolicies } from './policy/index.js'
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

/** `flashgate serve`: the database, the ingester (when it wins the lock) and the HTTP server, wired. */
export async function startGateway({ config, logger }: { config: ServeConfig; logger: Logger }): Promise<Gateway> {
  const db = await createDb({ databaseUrl: config.databaseUrl })
  const upstream = createUpstream({ rpcUrl: config.upstreamRpc, wsUrl: config.upstreamWs })
  const pending =
    config.flashblocksWs === undefined
      ? null
      : createPendingState({
          logger: logger.child({ module: 'pending' }),
          // Feeds without receipts: ask the (pending-aware) upstream for them.
          fetchReceipt: (hash) => upstream.request('eth_getTransactionReceipt', [hash]),
        })
  const feed =
    config.flashblocksWs === undefined || pending === null
      ? null
      : createFlashblocksFeed({ url: config.flashblocksWs, state: pending, logger: logger.child({ module: 'flashblocks' }) })
  const resolvers = createResolvers({
    db,
    upstream,
    pending,
    limits: { maxBlockRange: config.maxBlockRange, maxLogs: config.maxLogs, maxQueryCost: config.maxQueryCost },
    cacheBytes: config.answerCacheMb * MIB,
  })
  const ingester = createIngester({ db, upstream, logger: logger.child({ module: 'ingest' }), startBlock: config.startBlock, batchSize: config.ingestBatchSize })
  // A serving process that also ingests sees its own commits at once; others poll (resolvers/chain.ts).
  ingester.events.on('head', () => resolvers.notify({ reorg: false }))
  ingester.events.on('reorg', () => resolvers.notify({ reorg: true }))
  ingester.events.on('blocks', (blocks) => {
    for (const block of blocks) pending?.confirm(block)
  })

  const server = createServer({
    resolvers,
    logger: logger.child({ module: 'http' }),
    port: config.port,
    host: config.host,
    policies: createPolicies(config),
    trustProxy: config.trustProxy,
    passThrough: createPassThrough({ upstream }),
    chainEvents: ingester.events,
    pending,
    registrationRateLimit: config.registrationRateLimit,
    metrics: {
      async chain() {
        const status = ingester.status()
        const view = await resolvers.chain.view().catch(() => null)
        return { indexHead: view?.head?.number ?? null, upstreamHead: status.upstreamHead, ingesting: status.leader }
      },
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
          head,
          upstreamHead: status.upstreamHead,
          leader: status.leader,
          lastError: status.lastError,
        },
      }
    },
  })
  const { url, port } = await server.listen()
  ingester.start()
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
        await server.close()
        await ingester.stop()
        await db.close()
      })()
      return stopping
    },
  }
}
