export { createFlashblocksFeed, type FlashblocksFeed } from './feed.js'
export { decodeFrame, type FeedReceipt, type FlashblockMessage, flashblockMessage } from './message.js'
export { PENDING_BLOCK_HASH, type PendingLog, type PendingReceipt } from './receipts.js'
export { createForwardedTransactions, FORWARDED_DROP_AFTER_MS, type ForwardedTransactions } from './forwarded.js'
export { createPendingSource, createReceiptFetcher, type PendingSource, type PendingSourceKind, type PendingSourceMode } from './hydrate.js'
export {
  type CanonicalBlock,
  createPendingState,
  type Divergence,
  FLASHBLOCK_STALE_MS,
  type Hydrate,
  type PendingBlock,
  type PendingHeader,
  type PendingState,
} from './state.js'
export { decodePendingTransaction, type PendingTransaction } from './transactions.js'
