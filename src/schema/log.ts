import type { RpcLog } from 'viem'
import { builder } from './builder.js'
import { Block } from './block.js'
import { PageInfo } from './inputs.js'
import { Receipt } from './receipt.js'
import { Transaction } from './transaction.js'

/** A log as `eth_getLogs` answers it (indexed logs always have their block and transaction fields). */
export const Log = builder.objectRef<RpcLog>('Log')

Log.implement({
  description: 'An event log, with the block, transaction and receipt it belongs to.',
  fields: (t) => ({
    address: t.expose('address', { type: 'Address' }),
    topics: t.field({ type: ['Hash'], resolve: (log) => log.topics as `0x${string}`[] }),
    data: t.expose('data', { type: 'HexData' }),
    blockNumber: t.field({ type: 'BigInt', resolve: (log) => log.blockNumber! }),
    blockHash: t.field({ type: 'Hash', description: '`0x00…00` for a pre-confirmed log.', resolve: (log) => log.blockHash! }),
    blockTimestamp: t.field({ type: 'BigInt', nullable: true, resolve: (log) => log.blockTimestamp ?? null }),
    transactionHash: t.field({ type: 'Hash', resolve: (log) => log.transactionHash! }),
    transactionIndex: t.int({ resolve: (log) => Number(log.transactionIndex) }),
    logIndex: t.int({ resolve: (log) => Number(log.logIndex) }),
    removed: t.boolean({ description: '`true` when a reorg undid the log (subscriptions only).', resolve: (log) => log.removed }),
    block: t.field({ type: Block, nullable: true, resolve: (log, _args, { loaders }) => loaders.block.load(Number(log.blockNumber)) }),
    transaction: t.field({
      type: Transaction,
      nullable: true,
      resolve: (log, _args, { loaders }) => loaders.transaction.load(log.transactionHash!),
    }),
    receipt: t.field({ type: Receipt, nullable: true, resolve: (log, _args, { loaders }) => loaders.receipt.load(log.transactionHash!) }),
  }),
})

export type LogPage = { logs: RpcLog[]; hasNextPage: boolean; endCursor: string | null }

export const LogConnection = builder.objectRef<LogPage>('LogConnection').implement({
  description: 'A page of logs; `pageInfo.endCursor` continues after the last one.',
  fields: (t) => ({
    nodes: t.field({ type: [Log], complexity: { field: 1, multiplier: 1 }, resolve: (page) => page.logs }),
    pageInfo: t.field({ type: PageInfo, resolve: (page) => page }),
  }),
})
