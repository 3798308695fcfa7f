import type { PgColumn, PgTable } from 'drizzle-orm/pg-core'
import { schema } from '../db/index.js'
import type { BlockRows } from './block-data.js'

/**
 * What retention does with a table's rows below the first block kept: `range` deletes them; `superseded`
 * deletes an account's row only once a newer one below the cut supersedes it (the value at the cut must
 * stay readable); `never` keeps them (attributions and registry events are history of their own).
 */
export type Pruning = 'range' | 'superseded' | 'never'

type BlockTable = { table: PgTable; blockNumber: PgColumn; pruning: Pruning }

/**
 * Every table the ingester writes per block, once, keyed by its rows in `BlockRows`: a batch is COPYed into
 * them in this order (store.ts), a reorg deletes their rows above the common ancestor in the reverse order,
 * ANALYZE covers them after a backfill, and retention prunes them as `pruning` says (retention.ts). A new
 * table written at ingest is its schema, its migration, its rows in `toRows` (block-data.ts) and a line here;
 * the compiler refuses a `BlockRows` key without one.
 */
export const BLOCK_TABLES = {
  block: { table: schema.blocks, blockNumber: schema.blocks.number, pruning: 'range' },
  transactions: { table: schema.transactions, blockNumber: schema.transactions.blockNumber, pruning: 'range' },
  blockTransactions: { table: schema.blockTransactions, blockNumber: schema.blockTransactions.blockNumber, pruning: 'range' },
  blockReceipts: { table: schema.blockReceipts, blockNumber: schema.blockReceipts.blockNumber, pruning: 'range' },
  logs: { table: schema.logs, blockNumber: schema.logs.blockNumber, pruning: 'range' },
  accountChanges: { table: schema.accountChanges, blockNumber: schema.accountChanges.blockNumber, pruning: 'superseded' },
  attributions: { table: schema.attributions, blockNumber: schema.attributions.blockNumber, pruning: 'never' },
  registryEvents: { table: schema.builderCodeRegistryEvents, blockNumber: schema.builderCodeRegistryEvents.blockNumber, pruning: 'never' },
} as const satisfies Record<keyof BlockRows, BlockTable>

export type BlockTableKey = keyof typeof BLOCK_TABLES

/** The tables in COPY order, with their key in `BlockRows`. */
export const blockTables = Object.entries(BLOCK_TABLES) as [BlockTableKey, BlockTable][]
