import DataLoader from 'dataloader'
import type { Hash } from 'viem'
import type { Resolvers } from '../resolvers/index.js'

/** Keys per batch; each batch is one `in (…)` list, far below Postgres's 65,535 parameters. */
const MAX_BATCH_SIZE = 1_000

/**
 * Per-request dataloaders over the batch resolvers: every block, transaction or receipt a query reaches
 * through nested fields is fetched with the others of its kind in one statement, never one per row.
 */
export function createLoaders(resolvers: Resolvers) {
  const options = { maxBatchSize: MAX_BATCH_SIZE }
  return {
    block: new DataLoader((numbers: readonly number[]) => resolvers.blocksByNumbers(numbers), options),
    transaction: new DataLoader((hashes: readonly Hash[]) => resolvers.transactionsByHashes(hashes), options),
    receipt: new DataLoader((hashes: readonly Hash[]) => resolvers.receiptsByHashes(hashes), options),
  }
}

export type Loaders = ReturnType<typeof createLoaders>
