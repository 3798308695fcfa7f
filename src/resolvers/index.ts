import type { Hex } from 'viem'
import { toQuantity } from '../codecs/index.js'
import type { Db } from '../db/index.js'
import { HeaderNotFoundError } from '../errors.js'
import type { PendingState } from '../pending/index.js'
import type { Upstream } from '../upstream/index.js'
import { createAccountHistoryResolvers } from './account-history.js'
import { createAccountResolvers } from './accounts.js'
import { createApiKeyResolvers } from './api-keys.js'
import { createAttributionResolvers } from './attribution.js'
import { createBatchResolvers } from './batches.js'
import { createBlockResolvers, createTransactionResolvers } from './blocks.js'
import { createBuilderCodeResolvers } from './builder-codes.js'
import { createAnswerCache, DEFAULT_ANSWER_CACHE_BYTES } from './cache.js'
import { type ChainState, createChainState } from './chain.js'
import { createLogResolvers, type LogLimits } from './logs.js'
import { createPendingView } from './pending.js'
import { createReceiptResolvers } from './receipts.js'

export type { TransactionCursor, TransactionsPage } from './account-history.js'
export type { AccountParameters, AccountState } from './accounts.js'
export { API_KEY_POLICIES, type ApiKeyPolicy, type ApiKeyRecord } from './api-keys.js'
export type { BlockWithHashes } from './batches.js'
export type { AttributionFigures, BuilderCodeStats, LeaderboardEntry, SeriesPoint } from './attribution.js'
export type { BuilderCodeRecord, RegisterBuilderCodeReturnType } from './builder-codes.js'
export type { BlockRef, ChainState, ChainView } from './chain.js'
export type { Log, LogCursor, LogLimits, LogsPage } from './logs.js'
export { RawJson } from './raw-json.js'

export const DEFAULT_LOG_LIMITS: LogLimits = { maxBlockRange: 10_000, maxLogs: 10_000, maxQueryCost: 0 }

export type ResolversConfig = {
  db: Db
  /** Used only for state the index does not hold (see resolvers/accounts.ts). */
  upstream: Upstream | null
  limits?: Partial<LogLimits>
  /** Memory for cached answers (resolvers/cache.ts). */
  cacheBytes?: number
  /** The pre-confirmed view from a Flashblocks feed; without it `pending` answers as `latest`. */
  pending?: PendingState | null
}

/** The one read API behind JSON-RPC, GraphQL and REST (DESIGN.md §1). */
export function createResolvers(config: ResolversConfig): Resolvers {
  const base = createResolverSet(config)
  /**
   * The same resolvers with other `eth_getLogs` limits (an endpoint policy's): caches and chain state are
   * shared, only the range and result caps differ.
   */
  const withLimits = (limits: LogLimits): Resolvers => ({ ...base, ...base.limitedResolvers(limits), withLimits })
  return { ...base, withLimits }
}

function createResolverSet(config: ResolversConfig) {
  const { db, upstream } = config
  const cache = createAnswerCache({ maxBytes: config.cacheBytes ?? DEFAULT_ANSWER_CACHE_BYTES })
  const chain: ChainState = createChainState({ db, onReorg: () => cache.clear() })
  const limits = { ...DEFAULT_LOG_LIMITS, ...config.limits }
  const pendingView = createPendingView({ chain, pending: config.pending ?? null })

  async function chainId(): Promise<Hex> {
    const view = await chain.view()
    if (view.chainId === null) throw new HeaderNotFoundError('chain not indexed yet')
    return toQuantity(view.chainId)
  }

  async function blockNumber(): Promise<Hex> {
    const view = await chain.view()
    return toQuantity(view.head?.number ?? 0)
  }

  /** The resolvers whose answers depend on the `eth_getLogs` limits. */
  function limitedResolvers(limits: LogLimits) {
    const logs = createLogResolvers({ db, chain, limits, cache, pendingView })
    return {
      limits,
      ...logs,
      ...createAccountHistoryResolvers({ db, chain, limits, pendingView, resolveLogRange: logs.resolveLogRange }),
    }
  }

  const resolvers = {
    chain,
    limitedResolvers,
    /** The ingester in this process committed blocks (`reorg: false`) or undid some (`reorg: true`). */
    notify({ reorg }: { reorg: boolean }) {
      chain.invalidate()
      if (reorg) cache.clear()
    },
    chainId,
    blockNumber,
    pendingView,
    ...limitedResolvers(limits),
    ...createBlockResolvers({ db, chain, cache, pendingView }),
    ...createTransactionResolvers({ db, cache, pendingView }),
    ...createReceiptResolvers({ db, chain, cache, pendingView }),
    ...createAccountResolvers({ db, chain, upstream, cache, pendingView }),
    // Look-ups by many keys and paged histories, for the GraphQL schema's dataloaders and connections.
    ...createBatchResolvers({ db, chain, pendingView }),
    ...createBuilderCodeResolvers({ db }),
    ...createAttributionResolvers({ db, chain, pending: config.pending ?? null }),
    ...createApiKeyResolvers({ db }),
  }
  return resolvers
}

export type Resolvers = ReturnType<typeof createResolverSet> & { withLimits(limits: LogLimits): Resolvers }
