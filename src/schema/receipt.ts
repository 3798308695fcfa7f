import type { RpcTransactionReceipt } from 'viem'
import { builder } from './builder.js'
import { Block } from './block.js'
import { Log } from './log.js'
import { Transaction } from './transaction.js'

/** A receipt as `eth_getTransactionReceipt` answers it. */
export const Receipt = builder.objectRef<RpcTransactionReceipt>('Receipt')

Receipt.implement({
  description: 'The outcome of a transaction: status, gas and logs.',
  fields: (t) => ({
    transactionHash: t.expose('transactionHash', { type: 'Hash' }),
    transactionIndex: t.int({ resolve: (receipt) => Number(receipt.transactionIndex) }),
    blockNumber: t.expose('blockNumber', { type: 'BigInt' }),
    blockHash: t.expose('blockHash', { type: 'Hash' }),
    from: t.expose('from', { type: 'Address' }),
    to: t.expose('to', { type: 'Address', nullable: true }),
    contractAddress: t.field({ type: 'Address', nullable: true, resolve: (receipt) => receipt.contractAddress ?? null }),
    status: t.int({ description: '1 success, 0 reverted.', resolve: (receipt) => Number(receipt.status) }),
    gasUsed: t.expose('gasUsed', { type: 'BigInt' }),
    cumulativeGasUsed: t.expose('cumulativeGasUsed', { type: 'BigInt' }),
    effectiveGasPrice: t.field({ type: 'BigInt', nullable: true, resolve: (receipt) => receipt.effectiveGasPrice ?? null }),
    type: t.int({ resolve: (receipt) => Number(receipt.type) }),
    logsBloom: t.field({ type: 'HexData', nullable: true, resolve: (receipt) => receipt.logsBloom ?? null }),
    logs: t.field({ type: [Log], resolve: (receipt) => receipt.logs }),
    transaction: t.field({
      type: Transaction,
      nullable: true,
      resolve: (receipt, _args, { loaders }) => loaders.transaction.load(receipt.transactionHash),
    }),
    block: t.field({
      type: Block,
      nullable: true,
      resolve: (receipt, _args, { loaders }) => loaders.block.load(Number(receipt.blockNumber)),
    }),
  }),
})
