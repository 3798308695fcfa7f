import { Repeater } from 'graphql-yoga'
import type { RpcLog } from 'viem'
import type { BlockWithHashes } from '../resolvers/index.js'
import { matchesFilter } from '../resolvers/pending.js'
import { Block } from './block.js'
import { builder } from './builder.js'
import { LogMatchInput, logMatchSchema, parseArgument } from './inputs.js'
import { inOrder } from './in-order.js'
import { Log } from './log.js'

/**
 * Subscriptions over server-sent events (graphql-yoga answers `Accept: text/event-stream`): an adapter over
 * the resolvers' one event stream (resolvers/events.ts), as `eth_subscribe` on the WebSocket is
 * (src/jsonrpc/subscriptions.ts). Each subscription sends what it hears in order, with a bounded backlog
 * for a slow reader (in-order.ts).
 */
builder.subscriptionType({
  fields: (t) => ({
    newHeads: t.field({
      type: Block,
      description: 'Each new block the index commits, as `eth_subscribe("newHeads")`.',
      subscribe: (_root, _args, { chainEvents }) =>
        new Repeater<BlockWithHashes>(async (push, stop) => {
          const send = inOrder(push, stop)
          const unsubscribe = chainEvents?.subscribe('head', (block) => send([block]))
          await stop
          unsubscribe?.()
        }),
      resolve: (block) => block,
    }),
    logs: t.field({
      type: Log,
      description: 'Logs of each new block that match, as `eth_subscribe("logs")`; a reorg sends the logs it undid again with `removed: true`.',
      args: { filter: t.arg({ type: LogMatchInput }) },
      subscribe: (_root, args, { chainEvents }) => {
        const match = parseArgument(logMatchSchema, args.filter, 'filter')
        return new Repeater<RpcLog>(async (push, stop) => {
          const send = inOrder(push, stop)
          const unsubscribe = chainEvents?.subscribe('logs', (logs) => send(logs.filter((log) => matchesFilter(log, match))))
          await stop
          unsubscribe?.()
        })
      },
      resolve: (log) => log,
    }),
    pendingLogs: t.field({
      type: Log,
      description: 'Pre-confirmed logs that match, as each flashblock arrives (Base’s `pendingLogs`); their `blockHash` is `0x00…00`.',
      args: { filter: t.arg({ type: LogMatchInput }) },
      subscribe: (_root, args, { chainEvents }) => {
        const match = parseArgument(logMatchSchema, args.filter, 'filter')
        return new Repeater<RpcLog>(async (push, stop) => {
          const send = inOrder(push, stop)
          const unsubscribe = chainEvents?.subscribe('pendingLogs', (logs) => send(logs.filter((log) => matchesFilter(log, match)) as unknown as RpcLog[]))
          await stop
          unsubscribe?.()
        })
      },
      resolve: (log) => log,
    }),
  }),
})
