import { randomBytes } from 'node:crypto'
import type { EventEmitter } from 'node:events'
import type { Logger } from 'pino'
import type { Hash } from 'viem'
import { z } from 'zod'
import { describeParamsError, logFilter } from '../codecs/index.js'
import type { LogRow } from '../db/index.js'
import { InvalidParamsError, LimitExceededError } from '../errors.js'
import type { IngesterEvents } from '../ingest/index.js'
import type { PendingBlock, PendingState, PendingTransaction } from '../pending/index.js'
import type { Resolvers } from '../resolvers/index.js'
import { formatLog } from '../resolvers/logs.js'
import { formatPendingBlock, formatPendingTransaction, matchesFilter } from '../resolvers/pending.js'

/**
 * `eth_subscribe` over WebSocket: `newHeads` and `logs` (with `removed: true` for logs a reorg undid) as
 * geth serves them, and Base's pre-confirmation streams `newFlashblocks`, `pendingLogs` and
 * `newFlashblockTransactions`. https://geth.ethereum.org/docs/interacting-with-geth/rpc/pubsub
 */
export type ChainEvents = EventEmitter<IngesterEvents>

/** Subscriptions one connection may hold: each costs work on every block and flashblock. */
export const MAX_SUBSCRIPTIONS_PER_CONNECTION = 100

type Notify = (subscription: string, result: unknown) => void

const subscribeParams = z.union([
  z.tuple([z.literal('newHeads')]),
  z.tuple([z.literal('logs')]).rest(z.unknown()),
  z.tuple([z.literal('newFlashblocks')]),
  z.tuple([z.literal('pendingLogs')]).rest(z.unknown()),
  z.tuple([z.literal('newFlashblockTransactions')]).rest(z.unknown()),
])

const optionalFilter = logFilter.optional()

type MatchFilter = { addresses: `0x${string}`[] | null; topics: (Hash[] | null)[] }
type Subscription =
  | { kind: 'newHeads' }
  | { kind: 'logs'; filter: MatchFilter }
  | { kind: 'pendingLogs'; filter: MatchFilter }
  | { kind: 'newFlashblocks' }
  | { kind: 'newFlashblockTransactions'; full: boolean }

const removedLog = (row: LogRow) => ({ ...formatLog(row), removed: true })

/** Subscriptions of one WebSocket connection; `close` when the socket goes. */
export function createSubscriptions(options: {
  resolvers: Resolvers
  chainEvents: ChainEvents | null
  pending: PendingState | null
  logger: Logger
  notify: Notify
}) {
  const { resolvers, chainEvents, pending, logger, notify } = options
  const active = new Map<string, Subscription>()

  function each<kind extends Subscription['kind']>(kind: kind, send: (id: string, subscription: Extract<Subscription, { kind: kind }>) => void) {
    for (const [id, subscription] of active) if (subscription.kind === kind) send(id, subscription as Extract<Subscription, { kind: kind }>)
  }

  async function onBlocks(blocks: { number: number }[]) {
    try {
      for (const { number } of blocks) {
        const selector = { kind: 'number', number: BigInt(number) } as const
        if ([...active.values()].some((subscription) => subscription.kind === 'newHeads')) {
          const block = await resolvers.getBlock({ block: selector, includeTransactions: false })
          if (block !== null) {
            const { transactions: _transactions, ...header } = block as unknown as Record<string, unknown>
            each('newHeads', (id) => notify(id, header))
          }
        }
        const logSubscriptions = [...active.entries()].filter(([, subscription]) => subscription.kind === 'logs')
        if (logSubscriptions.length === 0) continue
        const logs = await resolvers.getLogs({ filter: { addresses: null, topics: [], fromBlock: selector, toBlock: selector } })
        each('logs', (id, subscription) => {
          for (const log of logs) if (matchesFilter(log, subscription.filter)) notify(id, log)
        })
      }
    } catch (error) {
      logger.warn({ err: error }, 'could not notify subscribers of new blocks')
    }
  }

  function onReorg({ removedLogs }: { removedLogs: LogRow[] }) {
    const formatted = removedLogs.map(removedLog)
    each('logs', (id, subscription) => {
      for (const log of formatted) if (matchesFilter(log, subscription.filter)) notify(id, log)
    })
  }

  function onFlashblock(block: PendingBlock, transactions: PendingTransaction[]) {
    each('newFlashblocks', (id) => notify(id, formatPendingBlock(block, false)))
    const first = block.transactions.length - transactions.length
    each('newFlashblockTransactions', (id, subscription) => {
      transactions.forEach((transaction, offset) =>
        notify(id, subscription.full ? formatPendingTransaction(block, first + offset) : transaction.hash),
      )
    })
    each('pendingLogs', (id, subscription) => {
      for (let index = first; index < block.transactions.length; index++)
        for (const log of block.receipts[index]?.logs ?? []) if (matchesFilter(log, subscription.filter)) notify(id, log)
    })
  }

  chainEvents?.on('blocks', onBlocks)
  chainEvents?.on('reorg', onReorg)
  pending?.events.on('transactions', onFlashblock)

  return {
    subscribe(rawParams: unknown): string {
      const parsed = subscribeParams.safeParse(rawParams)
      if (!parsed.success) throw new InvalidParamsError(describeParamsError(parsed.error))
      if (active.size >= MAX_SUBSCRIPTIONS_PER_CONNECTION)
        throw new LimitExceededError(`too many subscriptions on this connection: at most ${MAX_SUBSCRIPTIONS_PER_CONNECTION}; unsubscribe first`)
      const [kind, argument] = parsed.data as [Subscription['kind'], unknown]
      let subscription: Subscription
      if (kind === 'logs' || kind === 'pendingLogs') {
        const filter = optionalFilter.safeParse(argument === null ? undefined : argument)
        if (!filter.success) throw new InvalidParamsError(`invalid argument 1: ${filter.error.issues[0]?.message}`)
        subscription = { kind, filter: { addresses: filter.data?.addresses ?? null, topics: filter.data?.topics ?? [] } }
      } else if (kind === 'newFlashblockTransactions') subscription = { kind, full: argument === true }
      else subscription = { kind }
      const id = `0x${randomBytes(16).toString('hex')}`
      active.set(id, subscription)
      return id
    },
    unsubscribe(id: unknown): boolean {
      return typeof id === 'string' && active.delete(id)
    },
    close() {
      active.clear()
      chainEvents?.off('blocks', onBlocks)
      chainEvents?.off('reorg', onReorg)
      pending?.events.off('transactions', onFlashblock)
    },
  }
}
