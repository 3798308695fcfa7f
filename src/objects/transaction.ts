import { toQuantity } from '../codecs/index.js'
import type { PendingBlock } from '../pending/state.js'
import type { PendingTransaction } from '../pending/transactions.js'
import { effectiveGasPrice, type PendingReceipt, transactionInNodeForm } from './receipt.js'

// Transactions flashgate knows before a node's index does, as nodes write them: forwarded and still in the
// pool, or pre-confirmed in a flashblock. Confirmed ones are the node's own objects, stored as it sent them.

/**
 * A transaction this process forwarded and no flashblock shows yet, as a node shows one from its pool: no
 * block, and for fee-market transactions the fee cap as `gasPrice` (geth's `RPCTransaction`).
 */
export function formatPoolTransaction(transaction: PendingTransaction): Record<string, unknown> {
  return {
    ...transaction.fields,
    hash: transaction.hash,
    blockHash: null,
    blockNumber: null,
    transactionIndex: null,
    from: transaction.from,
    gasPrice: transaction.fields.maxFeePerGas ?? transaction.fields.gasPrice ?? '0x0',
  }
}

/**
 * The RPC object of a pre-confirmed transaction, as Base's node shows it: its block's number and its index,
 * but no block hash (`null`: the block has none yet), where its receipt and logs carry zeros.
 */
export function formatPendingTransaction(block: PendingBlock, position: number): Record<string, unknown> {
  const transaction = block.transactions[position]!
  const deposit = transaction.type === 0x7e
  return transactionInNodeForm(
    {
      ...transaction.fields,
      ...(deposit && depositFields(block.receipts[position] ?? null)),
      hash: transaction.hash,
      blockHash: null,
      blockNumber: toQuantity(block.number),
      transactionIndex: toQuantity(transaction.index),
      from: transaction.from,
      // For fee-market transactions nodes report the price actually paid.
      gasPrice: deposit ? (transaction.fields.gasPrice ?? '0x0') : toQuantity(effectiveGasPrice(transaction.fields, block.header.baseFeePerGas)),
      blockTimestamp: toQuantity(block.header.timestamp),
    },
    block.form,
  )
}

/**
 * A deposit's envelope has no nonce: an OP node shows the nonce its execution gave it (`depositNonce`) as
 * `nonce`, with `depositReceiptVersion`, as Base's node shows a pre-confirmed one. Known once its receipt is
 * (hydrated or executed); until then the envelope's fields alone.
 */
function depositFields(receipt: PendingReceipt | null): Record<string, unknown> {
  const { depositNonce, depositReceiptVersion } = (receipt ?? {}) as { depositNonce?: unknown; depositReceiptVersion?: unknown }
  return {
    ...(typeof depositNonce === 'string' && { nonce: depositNonce }),
    ...(typeof depositReceiptVersion === 'string' && { depositReceiptVersion }),
  }
}
