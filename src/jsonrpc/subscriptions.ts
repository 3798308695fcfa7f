import { randomBytes } from 'node:crypto'
import type { Hash } from 'viem'
import { z } from 'zod'
import { describeParamsError, logFilter } from '../codecs/index.js'
import { InvalidParamsError, LimitExceededError } from '../errors.js'
import type { ChainEvents } from '../resolvers/index.js'
import { formatPendingTransaction } from '../objects/transaction.js'
import { matchesFilter } from '../resolvers/pending.js'

export type { ChainEvents } from '../resolvers/index.js'

/** Subscriptions one connection may hold: each costs work on every block and flashblock. */
export const MAX_SUBSCRIPTIONS_PER_CONNECTION = 100

type Notify = (subscription: string, result: unknown) => void

const subscribeParams = z.union([
  z.tuple([z.literal('newHeads')]),
  z.tuple([z.literal('logs')]).rest(z.unknown()),
  z.tuple([z.literal('newFlashblocks')]),
  z.tuple([z.literal('pendingLogs')]).rest(z.unknown()),
  z.tuple([z.literal('newFlashblockTransactions')]).rest(z.unknown()),
  z.tuple([z.literal('newPendingTransactions')]).rest(z.unknown()),
])

const optionalFilter = logFilter.optional()

type MatchFilter = { addresses: `0x${string}`[] | null; topics: (Hash[] | null)[] }
type Subscription =
  | { kind: 'newHeads' }
  | { kind: 'logs'; filter: MatchFilter }
  | { kind: 'pendingLogs'; filter: MatchFilter }
  | { kind: 'newFlashblocks' }
  | { kind: 'newFlashblockTransactions'; full: boolean }
type Kind = Subscription['kind']

/**
 * `eth_subscribe` on one WebSocket connection (`close` when the socket goes): `newHeads`, `logs` (with
 * `removed: true` for logs a reorg undid) and `newPendingTransactions` (hashes, or with `true` whole
 * transactions, as they are pre-confirmed) as geth serves them, and Base's pre-confirmation streams
 * `newFlashblocks`, `pendingLogs` and `newFlashblockTransactions`. An adapter over the resolvers' one event
 * stream (resolvers/events.ts), which every process feeds, whether it ingests or not.
 * https://geth.ethereum.org/docs/interacting-with-geth/rpc/pubsub
 */
export function createSubscriptions(options: { chainEvents: ChainEvents | null; notify: Notify }) {
  const { chainEvents, notify } = options
  const active = new Map<string, Subscription>()
  /** The connection listens to an event only while it has a subscription fed by it. */
  const listening = new Map<Kind, () => void>()

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
            for (const log of logs) if (matchesFilter(log, subscription.filter)) notify(id, log)
          }),
        )
      case 'pendingLogs':
        return chainEvents?.subscribe('pendingLogs', (logs) =>
          each('pendingLogs', (id, subscription) => {
            for (const log of logs) if (matchesFilter(log, subscription.filter)) notify(id, log)
          }),
        )
      case 'newFlashblocks':
        return chainEvents?.subscribe('flashblock', (header) => each('newFlashblocks', (id) => notify(id, header)))
      case 'newFlashblockTransactions':
        return chainEvents?.subscribe('pendingTransactions', (block, transactions) => {
          const first = block.transactions.length - transactions.length
          each('newFlashblockTransactions', (id, subscription) => {
            transactions.forEach((transaction, offset) => {
              notify(id, subscription.full ? formatPendingTransaction(block, first + offset) : transaction.hash)
            })
          })
        })
    }
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
    subscribe(rawParams: unknown): string {
      const parsed = subscribeParams.safeParse(rawParams)
      if (!parsed.success) throw new InvalidParamsError(describeParamsError(parsed.error))
      if (active.size >= MAX_SUBSCRIPTIONS_PER_CONNECTION)
        throw new LimitExceededError(`too many subscriptions on this connection: at most ${MAX_SUBSCRIPTIONS_PER_CONNECTION}; unsubscribe first`)
      const [kind, argument] = parsed.data as [Kind | 'newPendingTransactions', unknown]
      let subscription: Subscription
      if (kind === 'logs' || kind === 'pendingLogs') {
        const filter = optionalFilter.safeParse(argument === null ? undefined : argument)
        if (!filter.success) throw new InvalidParamsError(`invalid argument 1: ${filter.error.issues[0]?.message}`)
        subscription = { kind, filter: { addresses: filter.data?.addresses ?? null, topics: filter.data?.topics ?? [] } }
      } else if (kind === 'newFlashblockTransactions' || kind === 'newPendingTransactions')
        // geth's `newPendingTransactions` (what viem's and ethers' pending watchers ask for over a socket) is,
        // on a flashblocks chain, the transactions as they are pre-confirmed: the same stream as Base's own.
        subscription = { kind: 'newFlashblockTransactions', full: argument === true }
      else subscription = { kind }
      const id = `0x${randomBytes(16).toString('hex')}`
      active.set(id, subscription)
      settle(subscription.kind)
      return id
    },
    unsubscribe(id: unknown): boolean {
      const subscription = typeof id === 'string' ? active.get(id) : undefined
      if (subscription === undefined) return false
      active.delete(id as string)
      settle(subscription.kind)
      return true
    },
    close() {
      active.clear()
      for (const unsubscribe of listening.values()) unsubscribe()
      listening.clear()
    },
  }
}
