import type { Address, Hash, Hex, RpcTransaction } from 'viem'
import { builder } from './builder.js'
import { Block } from './block.js'
import { PageInfo } from './inputs.js'
import { Log } from './log.js'
import { Receipt } from './receipt.js'

/** A field that only some transaction types carry (fee-market fields, chain id, access list). */
function optional<value extends Hex | Address | Hash>(transaction: RpcTransaction, key: string): value | null {
  return ((transaction as unknown as Record<string, unknown>)[key] as value | undefined) ?? null
}

const IN_POOL = '`null` while the transaction waits in the pool: sent through flashgate, in no flashblock or block yet.'
const UNSEALED = "`null` until the transaction is in a sealed block: in the pool, and pre-confirmed in a flashblock (as Base's node shows it)."

/** A transaction as `eth_getTransactionByHash` answers it. */
export const Transaction = builder.objectRef<RpcTransaction>('Transaction')

Transaction.implement({
  description: 'A transaction, confirmed or pre-confirmed, with its block, receipt and logs.',
  fields: (t) => ({
    hash: t.expose('hash', { type: 'Hash' }),
    from: t.expose('from', { type: 'Address' }),
    to: t.field({ type: 'Address', nullable: true, description: '`null` for a contract creation.', resolve: (tx) => tx.to }),
    value: t.expose('value', { type: 'BigInt' }),
    nonce: t.expose('nonce', { type: 'BigInt' }),
    input: t.expose('input', { type: 'HexData' }),
    gas: t.expose('gas', { type: 'BigInt' }),
    gasPrice: t.field({ type: 'BigInt', nullable: true, resolve: (tx) => optional(tx, 'gasPrice') }),
    maxFeePerGas: t.field({ type: 'BigInt', nullable: true, resolve: (tx) => optional(tx, 'maxFeePerGas') }),
    maxPriorityFeePerGas: t.field({ type: 'BigInt', nullable: true, resolve: (tx) => optional(tx, 'maxPriorityFeePerGas') }),
    type: t.int({ description: 'EIP-2718 type: 0 legacy, 1 access list, 2 fee market, …', resolve: (tx) => Number(tx.type) }),
    chainId: t.field({ type: 'BigInt', nullable: true, resolve: (tx) => optional(tx, 'chainId') }),
    // A transaction sent through flashgate that no flashblock or block shows yet has no block, as a node
    // answers one from its pool (`eth_getTransactionByHash`).
    blockNumber: t.field({ type: 'BigInt', nullable: true, description: IN_POOL, resolve: (tx) => tx.blockNumber }),
    blockHash: t.field({ type: 'Hash', nullable: true, description: UNSEALED, resolve: (tx) => tx.blockHash }),
    transactionIndex: t.int({ nullable: true, description: IN_POOL, resolve: (tx) => (tx.transactionIndex === null ? null : Number(tx.transactionIndex)) }),
    block: t.field({
      type: Block,
      nullable: true,
      resolve: (tx, _args, { loaders }) => (tx.blockNumber === null ? null : loaders.block.load(Number(tx.blockNumber))),
    }),
    receipt: t.field({
      type: Receipt,
      nullable: true,
      description: '`null` only for a pre-confirmed transaction whose receipt has not arrived yet.',
      resolve: (tx, _args, { loaders }) => loaders.receipt.load(tx.hash),
    }),
    logs: t.field({
      type: [Log],
      resolve: async (tx, _args, { loaders }) => (await loaders.receipt.load(tx.hash))?.logs ?? [],
    }),
  }),
})

export type TransactionPage = { transactions: RpcTransaction[]; hasNextPage: boolean; endCursor: string | null }

export const TransactionConnection = builder.objectRef<TransactionPage>('TransactionConnection').implement({
  description: 'A page of transactions; `pageInfo.endCursor` continues after the last one.',
  fields: (t) => ({
    nodes: t.field({ type: [Transaction], complexity: { field: 1, multiplier: 1 }, resolve: (page) => page.transactions }),
    pageInfo: t.field({ type: PageInfo, resolve: (page) => page }),
  }),
})
