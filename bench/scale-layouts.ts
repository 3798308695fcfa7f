import type postgres from 'postgres'

/** The block-keyed tables the ingester writes, each measured on its own. */
export const BLOCK_TABLES = [
  'blocks',
  'transactions',
  'block_transactions',
  'log_chunks',
  'log_address_postings',
  'log_topic_postings',
  'block_receipts',
  'account_changes',
] as const
export type BlockTable = (typeof BLOCK_TABLES)[number]

/**
 * A way of storing the same rows. `current` is flashgate's migrations as they are; a candidate is SQL run
 * after them, in a database of its own, that keeps every name the resolvers read (a view where a table's
 * columns are now derived), so that the same resolvers run against it unchanged.
 */
export type ScaleLayout = {
  name: string
  summary: string
  /** Statements run once, after the migrations. */
  setup: string
  /** The relation holding each table's rows (the stored table behind a view). */
  storage: Record<BlockTable, string>
  /** Runs before blocks up to `lastBlock` are written (e.g. to create the partitions they fall in). */
  prepare?(sql: postgres.Sql, lastBlock: number): Promise<void>
}

const SAME_STORAGE: Record<BlockTable, string> = Object.fromEntries(BLOCK_TABLES.map((table) => [table, table])) as Record<BlockTable, string>

const current: ScaleLayout = {
  name: 'current',
  summary: "flashgate's migrations (drizzle/) as they are",
  setup: '',
  storage: SAME_STORAGE,
}

/**
 * The candidates measured before migration 0010 (`lean`, `lean-covering`, `compact`: a row per log with fewer
 * columns, covering or deduplicated indexes, partitions) kept a row per log, which the resolvers no longer
 * read; their figures are in bench/results/scale.json and docs/DEPLOY.md.
 */
export const LAYOUTS: Record<string, ScaleLayout> = { current }
