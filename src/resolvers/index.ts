import type { EntryPoint } from '../attribution/user-operations.js'
import type { Logger } from 'pino'
import type { Hash, Hex, RpcTransactionReceipt } from 'viem'
import { toQuantity } from '../codecs/index.js'
import { blockHashesBetween, type Db } from '../db/index.js'
import { HeaderNotFoundError } from '../errors.js'
import type { PendingState } from '../pending/index.js'
import type { ClusterLink } from '../cluster/link.js'
import type { SharedRedis } from '../redis/index.js'
import type { Upstream } from '../upstream/index.js'
import { createAccountHistoryResolvers } from './account-history.js'
import { createAccountResolvers } from './accounts.js'
import { createApiKeyResolvers } from './api-keys.js'
import { createAttributionResolvers } from './attribution.js'
import { createBatchResolvers } from './batches.js'
import { createBlockResolvers, createTransactionResolvers } from './blocks.js'
import { createBuilderCodeResolvers } from './builder-codes.js'
import { createCallResolvers, type PendingCalls } from './calls.js'
import { createAnswerCache, DEFAULT_ANSWER_CACHE_BYTES } from './cache.js'
import { type ChainState, createChainState } from './chain.js'
import { createEventStream } from './events.js'
import { createFilterStore } from './filter-store.js'
import { createFilterResolvers } from './filters.js'
import { DEFAULT_MAX_LOGS_BYTES } from './limits.js'
import { createLogResolvers, type LogLimits } from './logs.js'
import { createPendingView } from './pending.js'
import { createReceiptResolvers } from './receipts.js'
import { createSendResolvers, type Forward } from './send.js'
import type { HistoryMode } from '../config.js'
import { createHistory } from './history.js'
import { createForwardedTransactions } from '../pending/index.js'

export type { TransactionCursor, TransactionsPage } from './account-history.js'
export type { AccountParameters, AccountState } from './accounts.js'
export type { ApiKeyRecord } from './api-keys.js'
export type { BlockRange, BlockWithHashes } from './batches.js'
export type {
  AttributionFigures,
  BuilderCodeStats,
  BuilderCodeStatsOptions,
  BuilderCodeSummary,
  LeaderboardEntry,
  LeaderboardOptions,
  SeriesPoint,
} from './attribution.js'
export type { RegistryStatus } from './registry.js'
export type { BuilderCodeRecord, RegisterBuilderCodeReturnType } from './builder-codes.js'
export type { PendingCalls } from './calls.js'
export type { BlockRef, ChainState, ChainView } from './chain.js'
export type { ChainEvents } from './events.js'
export type { Log, LogCursor, LogLimits, LogRange, LogsPage } from './logs.js'
export type { GetBlockReceiptsParameters, TransactionReceiptLookup } from './receipts.js'
export { RawJson } from './raw-json.js'

export const DEFAULT_LOG_LIMITS: LogLimits = { maxBlockRange: 10_000, maxLogs: 10_000, maxBytes: DEFAULT_MAX_LOGS_BYTES, maxQueryCost: 0 }

export type ResolversConfig = {
  /** Where reads go: the database, or a streaming replica of it (`--database-read-url`). */
  db: Db
  /** Where registrations and API keys are written (and read back): the primary. Default: `db`. */
  primary?: Db
  /** Used only for state the index does not hold (see resolvers/accounts.ts). */
  upstream: Upstream | null
  limits?: Partial<LogLimits>
  /** Memory for cached answers (resolvers/cache.ts). */
  cacheBytes?: number
  /** The pre-confirmed view from a Flashblocks feed; without it `pending` answers as `latest`. */
  pending?: PendingState | null
  /** Sends transactions and calls to the upstream (the pass-through); without it they are refused. */
  forward?: Forward | null
  /** Runs `pending` calls on flashgate's own execution of the flashblocks; without it they are forwarded. */
  pendingCalls?: PendingCalls | null
  /** Reads below the index's first block: from the upstream (default) or refused. */
  history?: HistoryMode
  /** Shares key revocations and forwarded nonces with the deployment's other processes (`--redis-url`). */
  redis?: SharedRedis | null
  /** A worker of `serve --workers N`: forwarded nonces are shared through the primary when there is no Redis. */
  cluster?: ClusterLink | null
  /** The EntryPoints whose user operations are attributed (`--entry-points`); default: the canonical ones. */
  entryPoints?: readonly EntryPoint[]
  /** Where the subscriptions' event stream reports blocks it could not read (it tries again). */
  logger?: Logger | null
}

/**
 * The one read API behind JSON-RPC, GraphQL and REST (DESIGN.md §1). The `eth_getLogs` limits come with each
 * call that needs them (the endpoint's policy); `limits` is the configured default, for callers without one.
 */
export function createResolvers(config: ResolversConfig) {
  const { db, upstream } = config
  const cache = createAnswerCache({ maxBytes: config.cacheBytes ?? DEFAULT_ANSWER_CACHE_BYTES })
  const chain: ChainState = createChainState({ db, onReorg: () => cache.clear() })
  const limits = { ...DEFAULT_LOG_LIMITS, ...config.limits }
  const pendingView = createPendingView({ chain, pending: config.pending ?? null })
  // Transactions forwarded (by any process, with Redis): their nonces count as pending until a flashblock shows them.
  const forwarded = createForwardedTransactions({ redis: config.redis ?? null, cluster: config.cluster ?? null })
  const history = createHistory({ upstream, mode: config.history ?? 'upstream', chain, cache })
  const blocks = createBlockResolvers({ db, chain, cache, pendingView, history })
  const receipts = createReceiptResolvers({ db, chain, cache, pendingView, history })
  const logs = createLogResolvers({ db, chain, cache, pendingView, history })
  const stream = createEventStream({
    chain,
    cache,
    getBlock: blocks.getBlock,
    getLogs: logs.getLogs,
    pendingBlock: blocks.pendingBlock,
    blockHashes: (from, to) => blockHashesBetween(db, from, to),
    pending: config.pending ?? null,
    logger: config.logger ?? null,
  })

  async function chainId(): Promise<Hex> {
    const view = await chain.view()
    if (view.chainId === null) throw new HeaderNotFoundError('latest (the chain is not indexed yet)')
    return toQuantity(view.chainId)
  }

  /**
   * The hash of the indexed block `number`: `null` where the index holds no block there (above its head, as after
   * a reorg onto a shorter branch), `undefined` below its first block (the node's history, not the index's).
   */
  async function indexedBlockHash(number: number): Promise<Hash | null | undefined> {
    const view = await chain.view()
    if (view.firstBlock === null || number < view.firstBlock) return undefined
    const [row] = await blockHashesBetween(db, number, number)
    return row?.hash ?? null
  }

  async function blockNumber(): Promise<Hex> {
    const view = await chain.view()
    return toQuantity(view.head?.number ?? 0)
  }

  const filters = createFilterResolvers({
    db,
    chain,
    cache,
    pendingView,
    getLogs: logs.getLogs,
    store: createFilterStore({ redis: config.redis ?? null, cluster: config.cluster ?? null }),
  })

  const accountHistory = createAccountHistoryResolvers({ db, chain, pendingView, resolveLogRange: logs.resolveLogRange })
  const accounts = createAccountResolvers({ db, chain, upstream, cache, pendingView, forwarded, history })
  const transactions = createTransactionResolvers({ db, cache, pendingView, forwarded, history, preConfirmedNonce: accounts.preConfirmedNonce })
  const batches = createBatchResolvers({ db, chain, pendingView, pendingBlock: blocks.pendingBlock })
  const builderCodes = createBuilderCodeResolvers({ db, primary: config.primary ?? db })
  const attribution = createAttributionResolvers({ db, chain, pending: config.pending ?? null, entryPoints: config.entryPoints })
  const apiKeys = createApiKeyResolvers({ db: config.primary ?? db, readDb: db, redis: config.redis ?? null })

  const sending = createSendResolvers({
    forward: config.forward ?? null,
    pending: config.pending ?? null,
    pendingView,
    forwarded,
    chain,
    confirmedReceipt: async (hash) => (await receipts.getTransactionReceipt({ hash }))?.parse<RpcTransactionReceipt>() ?? null,
  })

  // Every public resolver named here, from the factory that makes it: one place that says what the
  // transports (JSON-RPC, GraphQL, REST) can call.
  const resolvers = {
    chain,
    /** Answers kept by block, cleared on a reorg: for the transports' own caches of finished answers (jsonrpc/memo.ts). */
    answerCache: cache,
    /** The `eth_getLogs` limits configured for this set, for callers that have no endpoint of their own (bench, tests). */
    limits,
    /**
     * Blocks were committed up to `head` (`reorg: false`) or undone (`reorg: true`): by the ingester in this
     * process, or by the one that ingests, as its Postgres NOTIFY says (db/notifications.ts).
     */
    notify({ reorg, head }: { reorg: boolean; head?: number }) {
      chain.invalidate()
      if (reorg) cache.clear()
      stream.changed({ reorg, head })
      // A waiting sync send learns of its block here too, on a process that does not ingest and has no feed.
      if (!reorg) sending.onHead()
    },
    /** Heads, logs (taken back after a reorg) and pre-confirmations, for the subscription adapters. */
    events: stream.events,
    chainId,
    blockNumber,
    pendingView,
    getLogs: logs.getLogs,
    getLogsPage: logs.getLogsPage,
    resolveLogRange: logs.resolveLogRange,
    // Stateful filters (JSON-RPC's eth_newFilter family), kept where every process of the deployment finds them.
    newFilter: filters.newFilter,
    newBlockFilter: filters.newBlockFilter,
    newPendingTransactionFilter: filters.newPendingTransactionFilter,
    getFilterChanges: filters.getFilterChanges,
    getFilterLogs: filters.getFilterLogs,
    uninstallFilter: filters.uninstallFilter,
    getAccountTransactions: accountHistory.getAccountTransactions,
    recentBlocksStart: accountHistory.recentBlocksStart,
    getBlock: blocks.getBlock,
    blockNumberOf: blocks.blockNumberOf,
    indexedBlockHash,
    pendingBlock: blocks.pendingBlock,
    getBlockTransactionCount: blocks.getBlockTransactionCount,
    getTransactionByBlockAndIndex: blocks.getTransactionByBlockAndIndex,
    getUncleCount: blocks.getUncleCount,
    getUncleByBlockAndIndex: blocks.getUncleByBlockAndIndex,
    getTransaction: transactions.getTransaction,
    getBlockReceipts: receipts.getBlockReceipts,
    getTransactionReceipt: receipts.getTransactionReceipt,
    getAccount: accounts.getAccount,
    getBalance: accounts.getBalance,
    getTransactionCount: accounts.getTransactionCount,
    /** Reads answered from the upstream because they lie below the index, by method (for `/metrics`). */
    historyReads: history.reads,
    // Look-ups by many keys and paged histories, for the GraphQL schema's dataloaders and connections.
    blocksByNumbers: batches.blocksByNumbers,
    transactionsByHashes: batches.transactionsByHashes,
    receiptsByHashes: batches.receiptsByHashes,
    blockNumbersInRange: batches.blockNumbersInRange,
    sending,
    calls: createCallResolvers({ pendingView, pendingCalls: config.pendingCalls ?? null, forward: config.forward ?? null, chain, upstream }),
    registerBuilderCode: builderCodes.registerBuilderCode,
    builderCodeOfWallet: builderCodes.builderCodeOfWallet,
    builderCode: attribution.builderCode,
    builderCodeStats: attribution.builderCodeStats,
    builderCodeLeaderboard: attribution.builderCodeLeaderboard,
    createApiKey: apiKeys.createApiKey,
    listApiKeys: apiKeys.listApiKeys,
    revokeApiKey: apiKeys.revokeApiKey,
    lookupApiKey: apiKeys.lookupApiKey,
  }
  return resolvers
}

export type Resolvers = ReturnType<typeof createResolvers>
