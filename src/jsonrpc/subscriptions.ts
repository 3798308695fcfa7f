import { z } from 'zod'
import { type BlockSelector, describeParamsError, type LogFilter, logFilter, MISSING_ARGUMENT, newQuantityId } from '../codecs/index.js'
import { InvalidParamsError, InvalidRequestError, LimitExceededError } from '../errors.js'
import type { ChainEvents } from '../resolvers/index.js'
import { formatPendingTransaction } from '../objects/transaction.js'
import { type LogCriteria, matchesCriteria } from '../resolvers/pending.js'

export type { ChainEvents } from '../resolvers/index.js'

/** Subscriptions one connection may hold: each costs work on every block and flashblock. */
export const MAX_SUBSCRIPTIONS_PER_CONNECTION = 100
/**
 * Bytes of subscription arguments (their JSON) one client may hold open across all its connections: a `logs`
 * filter may name 1,000 addresses and 1,000 topics per position (~320 KB, and ~1 MB once parsed), so the count
 * alone does not bound the memory (as filter-store.ts's share of stateful filters).
 */
export const MAX_SUBSCRIPTION_BYTES_PER_CLIENT = 4 * 1024 * 1024

/** What a client's open subscriptions hold, shared by its connections: `take` says whether `bytes` more fit. */
export type SubscriptionShare = { take(bytes: number): boolean; give(bytes: number): void }

type Notify = (subscription: string, result: unknown) => void

const SUBSCRIPTION_NAMES = ['newHeads', 'logs', 'newPendingTransactions', 'newFlashblocks', 'pendingLogs', 'newFlashblockTransactions'] as const
type SubscriptionName = (typeof SUBSCRIPTION_NAMES)[number]

const subscriptionName = z.enum(SUBSCRIPTION_NAMES, {
  error: (issue) => (issue.input === undefined ? MISSING_ARGUMENT : `expected a subscription: one of ${SUBSCRIPTION_NAMES.join(', ')}`),
})
/** `newHeads` and `newFlashblocks` take no argument; an object, a boolean or `null` is ignored, as anvil ignores it. */
const ignoredArgument = z.union([z.null(), z.boolean(), z.record(z.string(), z.unknown())], { error: 'expected no argument' }).optional()
/** `true` for whole transactions, else hashes. */
const wholeTransactions = z.boolean({ error: 'expected a boolean (true for whole transactions)' }).nullish()
const optionalFilter = z
  .unknown()
  .transform((input) => input ?? {})
  .pipe(logFilter)

/** What each subscription takes after its name: at most one argument (geth refuses more). */
const ARGUMENT_OF = {
  newHeads: ignoredArgument,
  newFlashblocks: ignoredArgument,
  logs: optionalFilter.optional(),
  pendingLogs: optionalFilter.optional(),
  newPendingTransactions: wholeTransactions.optional(),
  newFlashblockTransactions: wholeTransactions.optional(),
} as const satisfies Record<SubscriptionName, z.ZodType>
const unsubscribeParams = z.tuple([z.string({ error: (issue) => (issue.input === undefined ? MISSING_ARGUMENT : 'expected a subscription id') })])

type Subscription =
  | { kind: 'newHeads' }
  | { kind: 'logs'; filter: LogCriteria }
  | { kind: 'pendingLogs'; filter: LogCriteria }
  | { kind: 'newFlashblocks' }
  | { kind: 'newFlashblockTransactions'; full: boolean }
  | { kind: 'newPendingTransactions'; full: boolean }
type Kind = Subscription['kind']

/** Parses `eth_subscribe`'s params, or throws -32602 naming the argument at fault. */
function parseSubscription(params: unknown): Subscription {
  const named = z.tuple([subscriptionName]).rest(z.unknown()).safeParse(params)
  if (!named.success) throw new InvalidParamsError(describeParamsError(named.error, params))
  const name: SubscriptionName = named.data[0]
  const parsed = z.tuple([subscriptionName, ARGUMENT_OF[name]]).safeParse(params)
  if (!parsed.success) throw new InvalidParamsError(describeParamsError(parsed.error, params))
  const argument: unknown = parsed.data[1]
  switch (name) {
    case 'newHeads':
    case 'newFlashblocks':
      return { kind: name }
    case 'newPendingTransactions':
    case 'newFlashblockTransactions':
      return { kind: name, full: argument === true }
    case 'logs':
    case 'pendingLogs': {
      const filter = argument as LogFilter | undefined
      const numbered = (selector: BlockSelector | undefined) => (selector?.kind === 'number' ? selector.number : null)
      const from = numbered(filter?.fromBlock)
      const to = numbered(filter?.toBlock)
      if (from !== null && to !== null && from > to) throw new InvalidParamsError('invalid from and to block combination')
      return { kind: name, filter: { addresses: filter?.addresses ?? null, topics: filter?.topics ?? [], from, to, blockHash: filter?.blockHash ?? null } }
    }
  }
}

/**
 * `eth_subscribe` on one WebSocket connection (`close` when the socket goes): `newHeads`, `logs` (with
 * `removed: true` for logs a reorg undid) and `newPendingTransactions` (hashes, or with `true` whole
 * transactions, as they are pre-confirmed) as geth serves them, and Base's pre-confirmation streams
 * `newFlashblocks`, `pendingLogs` and `newFlashblockTransactions`. An adapter over the resolvers' one event
 * stream (resolvers/events.ts), which every process feeds, whether it ingests or not.
 * https://geth.ethereum.org/docs/interacting-with-geth/rpc/pubsub
 */
export function createSubscriptions(options: { chainEvents: ChainEvents | null; notify: Notify; share?: SubscriptionShare }) {
  const { chainEvents, notify, share } = options
  const active = new Map<string, Subscription>()
  /** The bytes each subscription's arguments hold of the client's share. */
  const held = new Map<string, number>()
  const release = (id: string) => {
    const bytes = held.get(id)
    if (bytes === undefined) return
    held.delete(id)
    share?.give(bytes)
  }
  /** The connection listens to an event only while it has a subscription fed by it. */
  const listening = new Map<Kind, () => void>()
  /** Closed with its connection: a subscribe that comes later (a batch's, after slower calls) adds nothing. */
  let closed = false

  function each<kind extends Kind>(kind: kind, send: (id: string, subscription: Extract<Subscription, { kind: kind }>) => void) {
    for (const [id, subscription] of active) if (subscription.kind === kind) send(id, subscription as Extract<Subscription, { kind: kind }>)
  }

  function listen(kind: Kind): (() => void) | undefined {
    switch (kind) {
      case 'newHeads':
        return chainEvents?.subscribe('head', (block) => {
          const { transactions: _transactions, ...header } = block
          each('newHeads', (id) => notify(id, header))
        })
      case 'logs':
        return chainEvents?.subscribe('logs', (logs) =>
          each('logs', (id, subscription) => {
            for (const log of logs) if (matchesCriteria(log, subscription.filter)) notify(id, log)
          }),
        )
      case 'pendingLogs':
        return chainEvents?.subscribe('pendingLogs', (logs) =>
          each('pendingLogs', (id, subscription) => {
            for (const log of logs) if (matchesCriteria(log, subscription.filter)) notify(id, log)
          }),
        )
      case 'newFlashblocks':
        return chainEvents?.subscribe('flashblock', (header) => each('newFlashblocks', (id) => notify(id, header)))
      case 'newFlashblockTransactions': {
        // Hashes as each frame arrives; whole transactions, as Base's node sends them, with their logs once
        // their receipts are known (at once, without, where none will come).
        const stopHashes = preConfirmations(kind, { full: false })
        const stopWhole = chainEvents?.subscribe('flashblockTransactions', (block, transactions, receipts) =>
          each(kind, (id, subscription) => {
            if (!subscription.full) return
            transactions.forEach((transaction, offset) => {
              const whole = formatPendingTransaction(block, block.transactions.indexOf(transaction))
              notify(id, receipts === null ? whole : { ...whole, logs: receipts[offset]!.logs })
            })
          }),
        )
        return () => {
          stopHashes?.()
          stopWhole?.()
        }
      }
      case 'newPendingTransactions': {
        // geth's `newPendingTransactions` (what viem's and ethers' pending watchers ask for over a socket) is,
        // on a flashblocks chain, the transactions as they are pre-confirmed: Base's own stream; and those no
        // flashblock showed (every one on a chain without a feed) as their block seals.
        const stopPreConfirmations = preConfirmations(kind)
        const stopSealed = chainEvents?.subscribe('sealedTransactions', (transactions) =>
          each(kind, (id, subscription) => {
            for (const transaction of transactions) notify(id, subscription.full ? transaction : transaction.hash)
          }),
        )
        return () => {
          stopPreConfirmations?.()
          stopSealed?.()
        }
      }
    }
  }

  /** Transactions as each frame pre-confirms them, to the subscriptions of `kind` (only those not `full`, with `only`). */
  function preConfirmations(kind: 'newFlashblockTransactions' | 'newPendingTransactions', only?: { full: false }) {
    return chainEvents?.subscribe('pendingTransactions', (block, transactions) => {
      const first = block.transactions.length - transactions.length
      each(kind, (id, subscription) => {
        if (only !== undefined && subscription.full) return
        transactions.forEach((transaction, offset) => {
          notify(id, subscription.full ? formatPendingTransaction(block, first + offset) : transaction.hash)
        })
      })
    })
  }

  function settle(kind: Kind) {
    const wanted = [...active.values()].some((subscription) => subscription.kind === kind)
    const unsubscribe = listening.get(kind)
    if (wanted && unsubscribe === undefined) listening.set(kind, listen(kind) ?? (() => {}))
    else if (!wanted && unsubscribe !== undefined) {
      unsubscribe()
      listening.delete(kind)
    }
  }

  return {
    subscribe(params: unknown): string {
      const subscription = parseSubscription(params)
      if (closed) throw new InvalidRequestError('the connection is closed')
      if (active.size >= MAX_SUBSCRIPTIONS_PER_CONNECTION)
        throw new LimitExceededError(`too many subscriptions on this connection: at most ${MAX_SUBSCRIPTIONS_PER_CONNECTION}; unsubscribe first`)
      const bytes = JSON.stringify(params)?.length ?? 0
      if (share !== undefined && !share.take(bytes))
        throw new LimitExceededError(
          `too many subscription filters from this client: at most ${MAX_SUBSCRIPTION_BYTES_PER_CLIENT / 1024 / 1024} MiB of arguments open across its connections; unsubscribe first`,
        )
      const id = newQuantityId()
      active.set(id, subscription)
      if (share !== undefined) held.set(id, bytes)
      settle(subscription.kind)
      return id
    },
    /** `eth_unsubscribe`'s params: `false` for an id this connection does not hold. */
    unsubscribe(params: unknown): boolean {
      const parsed = unsubscribeParams.safeParse(params)
      if (!parsed.success) throw new InvalidParamsError(describeParamsError(parsed.error, params))
      const [id] = parsed.data
      const subscription = active.get(id)
      if (subscription === undefined) return false
      active.delete(id)
      release(id)
      settle(subscription.kind)
      return true
    },
    close() {
      closed = true
      active.clear()
      for (const id of [...held.keys()]) release(id)
      for (const unsubscribe of listening.values()) unsubscribe()
      listening.clear()
    },
  }
}
