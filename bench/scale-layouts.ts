import type postgres from 'postgres'
import type { Db } from '../src/db/index.js'
import { attachLogPartitions, LOG_PARTITION_BLOCKS, logPartitions, sealLogPartition } from '../src/db/log-partitions.js'
import { partitionsToSeal } from '../src/ingest/seal-logs.js'
import type { LogColumn } from './scale-data.js'

/** The block-keyed tables the ingester writes, each measured on its own. */
export const BLOCK_TABLES = ['blocks', 'transactions', 'block_transactions', 'logs', 'block_receipts', 'account_changes'] as const
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
  /** Where the generated logs go, and which of their columns it stores. */
  logsTable: string
  logColumns: readonly LogColumn[]
  /** The relation holding each table's rows (the stored table behind a view). */
  storage: Record<BlockTable, string>
  /** Runs before blocks `firstBlock` to `lastBlock` are written (e.g. to create the partitions they fall in). */
  prepare?(target: LayoutTarget, firstBlock: number, lastBlock: number): Promise<void>
  /**
   * Runs after loading, before measuring, with the newest block written: reorganises what no new block can
   * change any more (e.g. rewrites sealed partitions in index order). Answers how many relations it rewrote.
   */
  seal?(target: LayoutTarget, head: number): Promise<number>
}

/** The database a layout grows in: raw SQL, and flashgate's own session for what flashgate itself does. */
export type LayoutTarget = { sql: postgres.Sql; db: Db }

const ALL_LOG_COLUMNS: readonly LogColumn[] = [
  'block_number',
  'log_index',
  'block_hash',
  'block_timestamp',
  'transaction_hash',
  'transaction_index',
  'address',
  'topic0',
  'topic1',
  'topic2',
  'topic3',
  'data',
]

const LEAN_LOG_COLUMNS_LIST: readonly LogColumn[] = [
  'block_number',
  'log_index',
  'transaction_index',
  'address',
  'topic0',
  'topic1',
  'topic2',
  'topic3',
  'data',
]

const SAME_STORAGE: Record<BlockTable, string> = Object.fromEntries(BLOCK_TABLES.map((table) => [table, table])) as Record<BlockTable, string>

/**
 * `current`: flashgate's migrations, and what flashgate does with them as it runs: the logs partitions
 * attached ahead of the blocks (as the ingester does), and every partition the head has left sealed (as the
 * ingest leader does; src/db/log-partitions.ts).
 */
const current: ScaleLayout = {
  name: 'current',
  summary: `flashgate's migrations (drizzle/) as they are: logs in ${LOG_PARTITION_BLOCKS.toLocaleString('en-US')}-block partitions, those the head has left sealed in (address, topic0, block_number) order`,
  setup: '',
  logsTable: 'logs',
  logColumns: ALL_LOG_COLUMNS,
  storage: SAME_STORAGE,
  async prepare({ db }, firstBlock, lastBlock) {
    await attachLogPartitions(db, firstBlock, lastBlock)
  },
  async seal({ db }, head) {
    let sealed = 0
    for (const partition of partitionsToSeal(await logPartitions(db), { head, firstBlock: null }))
      if ((await sealLogPartition(db, partition)) === 'sealed') sealed++
    return sealed
  },
}

/** `unpartitioned`: the logs table before migration 0010, one table in block order, for comparison. */
const unpartitioned: ScaleLayout = {
  name: 'unpartitioned',
  summary: 'logs as before migration 0010: one table, in block order',
  setup: `
create table logs_plain (like logs);
drop table logs;
alter table logs_plain rename to logs;
alter table logs add primary key (block_number, log_index);
create index logs_address_topic0_idx on logs (address, topic0, block_number);
create index logs_topic0_idx on logs (topic0, block_number);`,
  logsTable: 'logs',
  logColumns: ALL_LOG_COLUMNS,
  storage: SAME_STORAGE,
}

/** A log row without the columns another table holds; columns ordered so that no alignment padding falls between them. */
const LEAN_LOG_COLUMNS = `
  block_number bigint not null,
  log_index integer not null,
  transaction_index integer not null,
  address bytea not null,
  topic0 bytea,
  topic1 bytea,
  topic2 bytea,
  topic3 bytea,
  data bytea not null`

/** `logs` as the resolvers read it: the block hash and timestamp from `blocks`, the transaction hash from `transactions`. */
const LOGS_VIEW = `
create view logs as
  select l.block_number, l.log_index, b.hash as block_hash, b.timestamp as block_timestamp, t.hash as transaction_hash,
    l.transaction_index, l.address, l.topic0, l.topic1, l.topic2, l.topic3, l.data
  from logs_stored l
  join blocks b on b.number = l.block_number
  join transactions t on t.block_number = l.block_number and t.transaction_index = l.transaction_index;`

/** `lean`: the current layout, but a log stores only what it alone has (its block's and transaction's hashes are joined back). */
const lean: ScaleLayout = {
  name: 'lean',
  summary: 'current, but logs without block_hash/block_timestamp/transaction_hash: a view named logs joins them from blocks and transactions',
  setup: `
drop table logs;
create table logs_stored (${LEAN_LOG_COLUMNS},
  primary key (block_number, log_index)
);
create index logs_stored_address_topic0_idx on logs_stored (address, topic0, block_number);
create index logs_stored_topic0_idx on logs_stored (topic0, block_number);
${LOGS_VIEW}`,
  logsTable: 'logs_stored',
  logColumns: LEAN_LOG_COLUMNS_LIST,
  storage: { ...SAME_STORAGE, logs: 'logs_stored' },
}

/**
 * `lean-covering`: `lean`, with the transaction hash in the index the view joins on, so that deriving a log's
 * transaction hash is an index-only probe instead of a read of the (wide) transaction row.
 */
const leanCovering: ScaleLayout = {
  ...lean,
  name: 'lean-covering',
  summary: 'lean, and transactions_block_idx covers the hash (INCLUDE): the join that derives transaction_hash reads no transaction row',
  setup: `${lean.setup}
drop index transactions_block_idx;
create unique index transactions_block_idx on transactions (block_number, transaction_index) include (hash);`,
}

/** Blocks per partition of `compact`'s logs: ~15M logs, ~5.5 hours of Base. */
export const COMPACT_PARTITION_BLOCKS = 10_000

/**
 * `compact`: `lean`'s logs, partitioned by block range, with indexes that B-tree deduplication shrinks to a
 * few bytes per log: (address, topic0) and (topic0) without the block number (equal keys share one entry and
 * a list of row pointers), and BRIN on the block number instead of the primary key (rows are written in
 * block order, so a block range is a page range). A partition bounds how many row pointers one key's list
 * holds.
 */
const compact: ScaleLayout = {
  name: 'compact',
  summary: `lean's logs partitioned by ${COMPACT_PARTITION_BLOCKS.toLocaleString('en-US')}-block ranges, B-tree (address, topic0) and (topic0) deduplicated, BRIN (block_number) instead of the primary key`,
  setup: `
drop table logs;
create table logs_stored (${LEAN_LOG_COLUMNS}
) partition by range (block_number);
create index logs_stored_address_topic0_idx on logs_stored (address, topic0);
create index logs_stored_topic0_idx on logs_stored (topic0);
create index logs_stored_block_idx on logs_stored using brin (block_number) with (pages_per_range = 8);
${LOGS_VIEW}`,
  logsTable: 'logs_stored',
  logColumns: LEAN_LOG_COLUMNS_LIST,
  storage: { ...SAME_STORAGE, logs: 'logs_stored' },
  async prepare({ sql }, _firstBlock, lastBlock) {
    const start = lastBlock - (lastBlock % COMPACT_PARTITION_BLOCKS)
    await sql.unsafe(
      `create table if not exists logs_stored_${start} partition of logs_stored for values from (${start}) to (${start + COMPACT_PARTITION_BLOCKS})`,
    )
  },
}

export const LAYOUTS: Record<string, ScaleLayout> = { current, unpartitioned, lean, 'lean-covering': leanCovering, compact }
