import { transactionCountOf } from '../objects/block.js'
import type { BlockWithHashes } from '../resolvers/index.js'
import { builder } from './builder.js'
import { Log } from './log.js'
import { Receipt } from './receipt.js'
import { Transaction } from './transaction.js'

/** A block as `eth_getBlockByNumber(n, false)` answers it; the pending block has hash `0x00…00`. */
/**
 * What a block's lists weigh in a query's complexity: a Base block, not the default list of 10 (about 250
 * transactions and 1,500 logs, more when busy). Weighed at 10, a 62-byte query that asks each log's block for
 * its logs again (`{ block { logs { block { logs { logIndex } } } } }`: 2 million logs on Base) was let in at
 * complexity 122, and held the event loop for half a minute building a 41 MB answer.
 */
const TRANSACTIONS_PER_BLOCK = 500
const LOGS_PER_BLOCK = 2_000

export const Block = builder.objectRef<BlockWithHashes>('Block')

Block.implement({
  description: 'A block: the header the node reported, with its transactions, receipts and logs.',
  fields: (t) => ({
    number: t.expose('number', { type: 'BigInt' }),
    hash: t.expose('hash', { type: 'Hash', description: '`0x00…00` for the pending (pre-confirmed) block.' }),
    parentHash: t.expose('parentHash', { type: 'Hash' }),
    timestamp: t.expose('timestamp', { type: 'BigInt', description: 'Seconds since the Unix epoch.' }),
    miner: t.expose('miner', { type: 'Address' }),
    gasUsed: t.expose('gasUsed', { type: 'BigInt' }),
    gasLimit: t.expose('gasLimit', { type: 'BigInt' }),
    baseFeePerGas: t.expose('baseFeePerGas', { type: 'BigInt', nullable: true }),
    extraData: t.expose('extraData', { type: 'HexData' }),
    stateRoot: t.expose('stateRoot', { type: 'Hash', nullable: true }),
    transactionsRoot: t.expose('transactionsRoot', { type: 'Hash', nullable: true }),
    receiptsRoot: t.expose('receiptsRoot', { type: 'Hash', nullable: true }),
    logsBloom: t.expose('logsBloom', { type: 'HexData', nullable: true }),
    size: t.expose('size', { type: 'BigInt', nullable: true }),
    transactionCount: t.int({
      description: 'As `eth_getBlockTransactionCountByNumber`: a pre-confirmed transaction no decoder knows is counted, though not listed.',
      resolve: (block) => transactionCountOf(block),
    }),
    transactionHashes: t.field({ type: ['Hash'], resolve: (block) => block.transactions }),
    transactions: t.field({
      type: [Transaction],
      complexity: { field: 1, multiplier: TRANSACTIONS_PER_BLOCK },
      resolve: async (block, _args, { loaders }) => present(await loaders.transaction.loadMany(block.transactions)),
    }),
    receipts: t.field({
      type: [Receipt],
      description: 'Receipts in transaction order; a pre-confirmed transaction without a receipt yet is left out.',
      complexity: { field: 1, multiplier: TRANSACTIONS_PER_BLOCK },
      resolve: async (block, _args, { loaders }) => present(await loaders.receipt.loadMany(block.transactions)),
    }),
    logs: t.field({
      type: [Log],
      complexity: { field: 1, multiplier: LOGS_PER_BLOCK },
      resolve: async (block, _args, { loaders }) => present(await loaders.receipt.loadMany(block.transactions)).flatMap((receipt) => receipt.logs),
    }),
  }),
})

/** Loaded values without the missing ones; a failed load fails the field. */
export function present<value>(values: (value | null | Error)[]): value[] {
  const found: value[] = []
  for (const value of values) {
    if (value instanceof Error) throw value
    if (value !== null) found.push(value)
  }
  return found
}
