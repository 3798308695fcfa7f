import { Repeater } from 'graphql-yoga'
import type { RpcLog } from 'viem'
import type { LogRow } from '../db/index.js'
import type { PendingBlock, PendingTransaction } from '../pending/index.js'
import type { BlockWithHashes } from '../resolvers/index.js'
import { formatLog } from '../resolvers/logs.js'
import { matchesFilter } from '../resolvers/pending.js'
import { Block } from './block.js'
import { builder } from './builder.js'
import { LogMatchInput, logMatchSchema, parseArgument } from './inputs.js'
import { Log } from './log.js'

/**
 * Subscriptions over server-sent events (graphql-yoga answers `Accept: text/event-stream`), fed by the same
 * events as `eth_subscribe` on the WebSocket (src/jsonrpc/subscriptions.ts): the ingester's `blocks` and
 * `reorg`, and the pending state's `transactions`. Each subscription handles its events one at a time, in
 * order, so that a reorg's removed logs never overtake the logs they undo.
 */
function serially<args extends unknown[]>(handle: (...args: args) => Promise<void>, onError: (error: unknown) => void) {
  let queue = Promise.resolve()
  return (...args: args) => {
    queue = queue.then(() => handle(...args)).catch(onError)
  }
}

builder.subscriptionType({
  fields: (t) => ({
    newHeads: t.field({
      type: Block,
      description: 'Each new block the index commits, as `eth_subscribe("newHeads")`.',
      subscribe: (_root, _args, { chainEvents, resolvers }) =>
        new Repeater<BlockWithHashes>(async (push, stop) => {
          const onBlocks = serially(
            async (blocks: { number: number }[]) => {
              for (const { number } of blocks) {
                const block = await resolvers.getBlock({ block: { kind: 'number', number: BigInt(number) }, includeTransactions: false })
                if (block !== null) await push(block as BlockWithHashes)
              }
            },
            (error) => stop(error),
          )
          chainEvents?.on('blocks', onBlocks)
          await stop
          chainEvents?.off('blocks', onBlocks)
        }),
      resolve: (block) => block,
    }),
    logs: t.field({
      type: Log,
      description: 'Logs of each new block that match, as `eth_subscribe("logs")`; a reorg sends the logs it undid again with `removed: true`.',
      args: { filter: t.arg({ type: LogMatchInput }) },
      subscribe: (_root, args, { chainEvents, resolvers }) => {
        const match = parseArgument(logMatchSchema, args.filter, 'filter')
        return new Repeater<RpcLog>(async (push, stop) => {
          const onBlocks = serially(
            async (blocks: { number: number }[]) => {
              for (const { number } of blocks) {
                const selector = { kind: 'number', number: BigInt(number) } as const
                for (const log of await resolvers.getLogs({ filter: { ...match, fromBlock: selector, toBlock: selector } })) await push(log)
              }
            },
            (error) => stop(error),
          )
          const onReorg = serially(
            async ({ removedLogs }: { removedLogs: LogRow[] }) => {
              for (const row of removedLogs) {
                const log = formatLog(row)
                if (matchesFilter(log, match)) await push({ ...log, removed: true })
              }
            },
            (error) => stop(error),
          )
          chainEvents?.on('blocks', onBlocks)
          chainEvents?.on('reorg', onReorg)
          await stop
          chainEvents?.off('blocks', onBlocks)
          chainEvents?.off('reorg', onReorg)
        })
      },
      resolve: (log) => log,
    }),
    pendingLogs: t.field({
      type: Log,
      description: 'Pre-confirmed logs that match, as each flashblock arrives (Base’s `pendingLogs`); their `blockHash` is `0x00…00`.',
      args: { filter: t.arg({ type: LogMatchInput }) },
      subscribe: (_root, args, { pending }) => {
        const match = parseArgument(logMatchSchema, args.filter, 'filter')
        return new Repeater<RpcLog>(async (push, stop) => {
          const onTransactions = (block: PendingBlock, added: PendingTransaction[]) => {
            for (let index = block.transactions.length - added.length; index < block.transactions.length; index++)
              for (const log of block.receipts[index]?.logs ?? []) if (matchesFilter(log, match)) void push(log as unknown as RpcLog)
          }
          pending?.events.on('transactions', onTransactions)
          await stop
          pending?.events.off('transactions', onTransactions)
        })
      },
      resolve: (log) => log,
    }),
  }),
})
