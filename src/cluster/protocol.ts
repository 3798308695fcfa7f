/**
 * The messages between the primary of `flashgate serve --workers N` and its serving workers, over Node's
 * cluster IPC channel with `advanced` serialisation (structured clone: bigints, Maps and Dates pass as they
 * are). The primary holds what there must be one of per machine: the ingester, the Flashblocks connection
 * and the pending state it feeds, the rate-limit buckets and the forwarded nonces; the workers answer the
 * APIs. See docs/DEPLOY.md.
 */
import type { Address, Hash, Hex } from 'viem'
import type { IngesterStatus } from '../ingest/index.js'
import type { FlashblockMessage } from '../pending/message.js'
import type { CallRequest } from '../codecs/index.js'
import type { AccessListResult, CallKind } from '../pending/execute/call.js'
import type { PendingSource } from '../pending/hydrate.js'
import type { PendingTransaction } from '../pending/transactions.js'
import type { FilterCursor, StoredFilter } from '../resolvers/filter-store.js'
import type { CanonicalBlock, PendingState, UpstreamReceipt } from '../pending/state.js'

/** A rate limiter as a worker names it to the primary: the buckets are the primary's, one set per name. */
export type LimiterSpec = { name: string; ratePerSecond: number; burstSeconds: number }

/** What a worker asks the primary, by operation: arguments and answer. */
export type ClusterOperations = {
  /** Receipts of a flashblock's transactions, from the primary's hydration (one upstream batch for all). */
  hydrate: { args: [hashes: Hash[]]; result: UpstreamReceipt[] }
  /** Takes from a client's bucket: the whole seconds to wait, 0 when admitted. */
  take: { args: [limiter: LimiterSpec, client: string, cost: number, rate: number]; result: number }
  /** A transaction forwarded by a worker: its sender's pending nonce counts it, and a look-up by hash finds it, on every worker. */
  forwardedRecord: { args: [sender: Address, nonce: number, hash: Hash, transaction: PendingTransaction | null]; result: null }
  /** Forwarded nonces of a sender from `known` on, not yet dropped. */
  forwardedFrom: { args: [sender: Address, known: bigint]; result: number[] }
  /** A forwarded transaction that still counts, by hash (a worker's look-up that its own sends missed). */
  forwardedTransaction: { args: [hash: Hash]; result: PendingTransaction | null }
  /**
   * A `pending` call on the primary's executed state (`--pending-source execute`): its answer, the revert or
   * failure to answer with, or `null` to forward it.
   */
  pendingCall: { args: [block: number, kind: CallKind, request: CallRequest]; result: RelayedCallAnswer | null }
  /** Stateful filters (`eth_newFilter`…), kept by the primary so that a client's polls may land on any worker. */
  filterInstall: { args: [id: string, filter: StoredFilter, owner: string | null]; result: boolean }
  filterGet: { args: [id: string]; result: StoredFilter | null }
  filterAdvance: { args: [id: string, from: FilterCursor, to: FilterCursor]; result: boolean }
  filterRemove: { args: [id: string]; result: boolean }
  /** `/metrics` for the whole machine: every worker's figures and the primary's, aggregated. */
  metrics: { args: []; result: { contentType: string; body: string } }
}

/** A pending call's outcome as it crosses the IPC channel (errors travel as data and are rebuilt). */
export type RelayedCallAnswer = { result: Hex | AccessListResult } | { reverted: { data: string; reason: string | null } } | { failed: string }

export type ClusterOperation = keyof ClusterOperations

/** What the primary knows and a worker reports in `/readyz` and `/metrics`. */
export type PrimaryStatus = {
  ingester: IngesterStatus
  feed: { connected: boolean; messages: number; rejected: number } | null
  pendingSource: ReturnType<PendingSource['status']> | null
  pending: ReturnType<PendingState['status']> | null
}

/** A canonical block as a worker's pending state needs it: for `confirm` and the size convention. */
export type SealedBlock = CanonicalBlock & { header: Record<string, unknown> }

/**
 * Why a worker could not start, as data (structured clone keeps an error's message and stack, not the `code`
 * and `port` by which a taken port is told apart).
 */
export type StartFailure = { message: string; stack?: string; code?: string; port?: number }

export type WorkerToPrimary =
  | { fg: 'request'; id: number; operation: ClusterOperation; args: unknown[] }
  | { fg: 'metrics-reply'; id: number; metrics: unknown[] }
  | { fg: 'listening'; port: number }
  /** The worker could not start (its port taken, its database unreachable) and exits: the primary reports it. */
  | { fg: 'start-failed'; failure: StartFailure }

export type PrimaryToWorker =
  | { fg: 'reply'; id: number; result?: unknown; error?: string }
  /** Applied to the primary's pending state: the worker applies the same, in the same order. */
  | { fg: 'flashblock'; message: FlashblockMessage }
  /** The primary's executor took back a pending block's receipts (built on a pre-confirmation that proved wrong). */
  | { fg: 'pending-withdraw'; number: number }
  | { fg: 'sealed'; blocks: SealedBlock[] }
  /** The ingester rewound to `ancestor` (a reorg, a chain reset to a lower height): the worker's pending state follows. */
  | { fg: 'pending-rewind'; ancestor: number }
  /** Whether pre-confirmed receipts are hydrated now (`auto` may turn it off for an unaware upstream). */
  | { fg: 'hydrating'; on: boolean; balances?: boolean }
  | { fg: 'status'; status: PrimaryStatus }
  | { fg: 'metrics-request'; id: number }

export function isClusterMessage(message: unknown): message is { fg: string } {
  return typeof message === 'object' && message !== null && typeof (message as { fg?: unknown }).fg === 'string'
}
