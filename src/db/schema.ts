import { sql } from 'drizzle-orm'
import { bigint, customType, index, integer, json, jsonb, numeric, pgTable, primaryKey, serial, text, uniqueIndex } from 'drizzle-orm/pg-core'

/**
 * Hashes, addresses, topics and calldata are stored as raw bytes: half the size of hex text and cheaper to
 * compare in indexes. Hex exists only at the edges (see `src/db/bytes.ts`).
 */
export const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({
  dataType: () => 'bytea',
  // PGlite and postgres.js both hand back Uint8Array (Buffer for postgres.js); keep a plain view.
  fromDriver: (value) => value,
  toDriver: (value) => value,
})

const blockNumber = (name: string) => bigint(name, { mode: 'number' })

/** Block headers, as the upstream returned them minus `transactions` (stored in their own table). */
export const blocks = pgTable(
  'blocks',
  {
    number: blockNumber('number').primaryKey(),
    hash: bytea('hash').notNull(),
    parentHash: bytea('parent_hash').notNull(),
    timestamp: bigint('timestamp', { mode: 'number' }).notNull(),
    /**
     * Every header field the upstream sent, so that answers stay exact for any chain (OP-stack, L1, anvil).
     * `json`, not `jsonb`: it keeps the upstream's key order and costs less to write; it is never queried.
     * `transactions` is kept as an empty list and filled from the transactions table.
     */
    header: json('header').$type<Record<string, unknown>>().notNull(),
  },
  (t) => [uniqueIndex('blocks_hash_idx').on(t.hash)],
)

export const transactions = pgTable(
  'transactions',
  {
    hash: bytea('hash').primaryKey(),
    blockNumber: blockNumber('block_number').notNull(),
    transactionIndex: integer('transaction_index').notNull(),
    from: bytea('from').notNull(),
    to: bytea('to'),
    /**
     * Legacy: the transaction object, in indexes written before migration 0009. The bodies now live in
     * `block_transactions`; `upgradeStorage` (db/upgrade.ts) moves old ones there and empties this column.
     */
    body: json('body').$type<Record<string, unknown>>(),
  },
  (t) => [uniqueIndex('transactions_block_idx').on(t.blockNumber, t.transactionIndex)],
)

/**
 * Legacy: receipts of indexes written before migration 0009, with `logs` emptied. Receipts are now read from
 * `block_receipts`; `upgradeStorage` (db/upgrade.ts) renders any block missing there and empties this table.
 */
export const receipts = pgTable(
  'receipts',
  {
    transactionHash: bytea('transaction_hash').primaryKey(),
    blockNumber: blockNumber('block_number').notNull(),
    transactionIndex: integer('transaction_index').notNull(),
    /** The receipt as the upstream returned it, with `logs` emptied (they are rebuilt from the logs table). */
    body: json('body').$type<Record<string, unknown>>().notNull(),
  },
  (t) => [uniqueIndex('receipts_block_idx').on(t.blockNumber, t.transactionIndex)],
)

/**
 * Each block's `eth_getBlockReceipts` answer, rendered once at ingest (ingest/block-data.ts) from the same
 * rows and in the same bytes as objects/receipt.ts renders it, and stored as raw DEFLATE (RFC 1951).
 * Serving a block's receipts is then one row read and an inflate (none for a client accepting `deflate`)
 * instead of a join over its receipts and logs. Compressed here rather than by Postgres: a block of 160 logs is ~107 KB of JSON but ~3 KB deflated,
 * and moving 107 KB out of Postgres costs more than the join saves. The column is stored `EXTERNAL` (no
 * second compression attempt). Blocks indexed before this table existed are rendered from their rows.
 */
export const blockReceipts = pgTable('block_receipts', {
  blockNumber: blockNumber('block_number').primaryKey(),
  deflated: bytea('deflated').notNull(),
  /**
   * Set when `deflated` is an open stream (codecs/deflated.ts): the JSON's length and Adler-32, so that it
   * can go to a client accepting `deflate` as it is. Null for rows written before: finished streams.
   */
  plainLength: integer('plain_length'),
  adler32: bigint('adler32', { mode: 'number' }),
  /**
   * Where each segment of `deflated` starts, and its length last (codecs/segmented.ts): one receipt inflates
   * from its segment alone. Null for rows written before migration 0009: one segment, the whole stream.
   */
  segmentOffsets: integer('segment_offsets').array(),
  /**
   * CRC-32 of the JSON (migration 0013), so that the stream also goes as it is, in a gzip member, to a client
   * accepting only gzip (ethers, Go's `net/http`). Null for rows written before: compressed per request.
   */
  crc32: bigint('crc32', { mode: 'number' }),
})

/**
 * Each block's transactions, as the upstream returned them, in one JSON array deflated in segments of 16
 * (codecs/segmented.ts): ~37 bytes per log on a Base-shaped chain where a row per transaction took ~220.
 * `eth_getBlockByNumber(n, true)` inflates the whole stream; a transaction by hash (found in `transactions`)
 * inflates its segment alone, read with `substring` (the column is stored `EXTERNAL`: uncompressed by
 * Postgres, so a slice reads only the TOAST chunks it needs).
 */
export const blockTransactions = pgTable('block_transactions', {
  blockNumber: blockNumber('block_number').primaryKey(),
  deflated: bytea('deflated').notNull(),
  plainLength: integer('plain_length').notNull(),
  adler32: bigint('adler32', { mode: 'number' }).notNull(),
  segmentOffsets: integer('segment_offsets').array().notNull(),
})

/** A log's columns, as `logs` stores them and `undone_logs` keeps them after a reorg (fresh builders per table). */
const logColumns = () => ({
  blockNumber: blockNumber('block_number').notNull(),
  logIndex: integer('log_index').notNull(),
  blockHash: bytea('block_hash').notNull(),
  blockTimestamp: bigint('block_timestamp', { mode: 'number' }).notNull(),
  transactionHash: bytea('transaction_hash').notNull(),
  transactionIndex: integer('transaction_index').notNull(),
  address: bytea('address').notNull(),
  topic0: bytea('topic0'),
  topic1: bytea('topic1'),
  topic2: bytea('topic2'),
  topic3: bytea('topic3'),
  data: bytea('data').notNull(),
})

/**
 * One row per log, partitioned by block range (db/log-partitions.ts). Every index is each partition's own
 * (migrations 0015 and 0016), built by db/log-partitions.ts: the primary key (block_number, log_index), which
 * whole blocks are read by (by number or hash), and `LOG_INDEX_KEYS` (db/log-keys.ts), which follow the
 * `eth_getLogs` shapes clients send most (see bench/logs-plan.ts): address + topic0 over a block range, topic0
 * alone over a range, a topic1 or topic2 (a wallet's own transfers) over a range. A partition a backfill
 * writes far below the head has none of them until its seal (a BRIN on block_number meanwhile).
 */
export const logs = pgTable('logs', logColumns())

export type LogRow = typeof logs.$inferSelect

/**
 * The logs of blocks a reorg undid, moved here by the rewind that deletes them from `logs` (ingest/store.ts):
 * a log filter polled across the reorg reports those it had delivered again with `removed: true`, as geth's
 * filters do (resolvers/filters.ts). Kept for the newest blocks above the fork (`UNDONE_LOG_BLOCKS`) and for
 * longer than a filter lives unpolled; the next rewind deletes older rows. Keyed by block hash: a filter knows
 * the hashes of the blocks it delivered.
 */
export const undoneLogs = pgTable(
  'undone_logs',
  {
    ...logColumns(),
    /** When the rewind moved it here, in ms since the epoch. */
    undoneAt: bigint('undone_at', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.blockHash, t.logIndex] })],
)

/**
 * Balance and nonce of an account after each block that changed them, with the values before that block,
 * so that a read at any indexed height is one index probe (see resolvers/accounts.ts).
 */
export const accountChanges = pgTable(
  'account_changes',
  {
    address: bytea('address').notNull(),
    blockNumber: blockNumber('block_number').notNull(),
    balanceBefore: numeric('balance_before', { precision: 78, scale: 0 }).notNull(),
    nonceBefore: bigint('nonce_before', { mode: 'number' }).notNull(),
    balance: numeric('balance', { precision: 78, scale: 0 }).notNull(),
    nonce: bigint('nonce', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.address, t.blockNumber] })],
)

/** The keys of `sync_state`. */
export const SYNC_KEYS = {
  chainId: 'chain_id',
  firstBlock: 'first_block',
  safe: 'safe',
  finalized: 'finalized',
  accountSource: 'account_source',
  /** Bumped by the ingester in the transaction that undoes a reorg; readers drop cached answers on change. */
  reorgEpoch: 'reorg_epoch',
  /** The registry whose events `builder_code_registry_events` holds, and how far below the index it is read. */
  builderCodeRegistry: 'builder_code_registry',
  /** The storage layout the index is in (db/upgrade.ts); absent before migration 0009's upgrade ran. */
  storageVersion: 'storage_version',
} as const

/** Key/value progress of the single ingester: chain id, first indexed block, safe and finalized heads. */
export const syncState = pgTable('sync_state', {
  key: text('key').primaryKey(),
  value: jsonb('value').notNull(),
  updatedAt: bigint('updated_at', { mode: 'number' }).notNull().default(sql`(extract(epoch from now()) * 1000)::bigint`),
})

/**
 * One builder code per wallet, forever (DESIGN.md §7). The wallet is stored as bytes, which is the
 * lower-cased address: its unique index is what makes concurrent first registrations agree on one code.
 */
export const builderCodes = pgTable(
  'builder_codes',
  {
    code: text('code').primaryKey(),
    wallet: bytea('wallet').notNull(),
    createdAt: bigint('created_at', { mode: 'number' }).notNull().default(sql`(extract(epoch from now()) * 1000)::bigint`),
  },
  (t) => [uniqueIndex('builder_codes_wallet_idx').on(t.wallet)],
)

/**
 * One row per (code, confirmed transaction or user operation) whose calldata ends in an ERC-8021 suffix,
 * written by the ingester in the batch's transaction and deleted with its block on a reorg. A user
 * operation (ERC-4337) is a row of its own, `kind = 'userOperation'`, attributed to its smart account
 * (src/attribution/user-operations.ts). Codes nobody registered here are kept too: `builder_codes` tells
 * registered from unregistered at read time.
 */
export const attributions = pgTable(
  'attributions',
  {
    code: text('code').notNull(),
    transactionHash: bytea('transaction_hash').notNull(),
    /** `transaction` (the transaction's own calldata) or `userOperation` (one operation of a bundle). */
    kind: text('kind').$type<'transaction' | 'userOperation'>().notNull().default('transaction'),
    /** The operation's position in its bundle; -1 for the transaction itself. */
    operationIndex: integer('operation_index').notNull().default(-1),
    /** What the code stood for in the suffix: `app`, `wallet` or `service` (schema 2), `code` (schemas 0 and 1). */
    role: text('role').$type<'app' | 'wallet' | 'service' | 'code'>().notNull().default('code'),
    blockNumber: blockNumber('block_number').notNull(),
    blockTimestamp: bigint('block_timestamp', { mode: 'number' }).notNull(),
    transactionIndex: integer('transaction_index').notNull(),
    sender: bytea('sender').notNull(),
    /** `null` for a contract creation and for a user operation (its call is the account's own). */
    target: bytea('target'),
    gasUsed: bigint('gas_used', { mode: 'number' }).notNull(),
    /** Calldata gas of the suffix bytes: 16 per non-zero byte, 4 per zero byte. */
    suffixGas: integer('suffix_gas').notNull(),
    value: numeric('value', { precision: 78, scale: 0 }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.code, t.transactionHash, t.operationIndex] }),
    // Per-code figures and the time series read a code's rows by time; a reorg deletes by block.
    index('attributions_code_time_idx').on(t.code, t.blockTimestamp),
    index('attributions_block_idx').on(t.blockNumber),
  ],
)

/**
 * API keys of the dedicated endpoints (`POST /rpc/:apiKey`). Only a SHA-256 digest of each key is kept:
 * keys are 32 random bytes, so a plain digest cannot be reversed, and a look-up is one index probe.
 * `prefix` (the key's first characters) lets an operator tell keys apart in `flashgate keys list`.
 */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: serial('id').primaryKey(),
    name: text('name').notNull(),
    keyHash: bytea('key_hash').notNull(),
    prefix: text('prefix').notNull(),
    /** Which endpoint policy the key selects (`dedicated` or `public`). */
    policy: text('policy').notNull(),
    /** Requests per second the key may make; 0 for no limit. */
    rateLimit: integer('rate_limit').notNull(),
    createdAt: bigint('created_at', { mode: 'number' }).notNull().default(sql`(extract(epoch from now()) * 1000)::bigint`),
    revokedAt: bigint('revoked_at', { mode: 'number' }),
  },
  (t) => [uniqueIndex('api_keys_key_hash_idx').on(t.keyHash), uniqueIndex('api_keys_name_idx').on(t.name)],
)

export type ApiKeyRow = typeof apiKeys.$inferSelect

/**
 * The events of the on-chain Builder Codes registry (src/attribution/registry.ts), when one is configured:
 * written by the ingester with their block, deleted with it on a reorg, never pruned by retention (they are
 * the registry's whole history; blocks below the index are read from the upstream once). Each code's state
 * is folded from them at read time (resolvers/registry.ts).
 */
export const builderCodeRegistryEvents = pgTable(
  'builder_code_registry_events',
  {
    blockNumber: blockNumber('block_number').notNull(),
    logIndex: integer('log_index').notNull(),
    blockTimestamp: bigint('block_timestamp', { mode: 'number' }).notNull(),
    tokenId: bytea('token_id').notNull(),
    /** `transfer`, `registered` or `payout`. */
    kind: text('kind').$type<'transfer' | 'registered' | 'payout'>().notNull(),
    /** `registered`: the code. */
    code: text('code'),
    /** `transfer`: the new owner; `payout`: the payout address. */
    account: bytea('account'),
  },
  (t) => [primaryKey({ columns: [t.blockNumber, t.logIndex] })],
)
