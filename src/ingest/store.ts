import { asc, desc, gt, sql } from 'drizzle-orm'
import type { PgTable } from 'drizzle-orm/pg-core'
import { byteaToHex, type Db, type Drizzle, SYNC_KEYS, schema } from '../db/index.js'
import type { LogRow } from '../resolvers/logs.js'
import type { BlockRows } from './block-data.js'

/** Postgres takes at most 65,535 bind parameters per statement; stay well under it. */
const MAX_PARAMETERS_PER_INSERT = 30_000

type Transaction = Parameters<Parameters<Drizzle['transaction']>[0]>[0]

async function insertChunked<table extends PgTable>(tx: Transaction, table: table, rows: table['$inferInsert'][]) {
  if (rows.length === 0) return
  const columns = Object.keys(rows[0]!).length
  const chunk = Math.max(1, Math.floor(MAX_PARAMETERS_PER_INSERT / columns))
  for (let start = 0; start < rows.length; start += chunk) await tx.insert(table).values(rows.slice(start, start + chunk))
}

async function putSyncState(tx: Transaction | Drizzle, key: string, value: unknown) {
  await tx
    .insert(schema.syncState)
    .values({ key, value })
    .onConflictDoUpdate({ target: schema.syncState.key, set: { value, updatedAt: sql`(extract(epoch from now()) * 1000)::bigint` } })
}

export type StoredHead = { number: number; hash: `0x${string}` }

/** The ingester's only door to the database: batched, transactional writes and the reads it needs. */
export function createStore({ db }: { db: Db }) {
  async function head(): Promise<StoredHead | null> {
    const rows = await db.drizzle
      .select({ number: schema.blocks.number, hash: schema.blocks.hash })
      .from(schema.blocks)
      .orderBy(desc(schema.blocks.number))
      .limit(1)
    const row = rows[0]
    return row ? { number: row.number, hash: byteaToHex(row.hash) } : null
  }

  async function hashesFrom(fromNumber: number, toNumber: number): Promise<Map<number, `0x${string}`>> {
    const rows = await db.drizzle
      .select({ number: schema.blocks.number, hash: schema.blocks.hash })
      .from(schema.blocks)
      .where(sql`${schema.blocks.number} between ${fromNumber} and ${toNumber}`)
    return new Map(rows.map((row) => [row.number, byteaToHex(row.hash)]))
  }

  async function syncState(): Promise<Map<string, unknown>> {
    const rows = await db.drizzle.select().from(schema.syncState)
    return new Map(rows.map((row) => [row.key, row.value]))
  }

  /** Writes consecutive blocks in one transaction: all of them land, or none. */
  async function writeBlocks(batch: BlockRows[], state: Record<string, unknown> = {}) {
    await db.drizzle.transaction(async (tx) => {
      await insertChunked(tx, schema.blocks, batch.map((rows) => rows.block))
      await insertChunked(tx, schema.transactions, batch.flatMap((rows) => rows.transactions))
      await insertChunked(tx, schema.receipts, batch.flatMap((rows) => rows.receipts))
      await insertChunked(tx, schema.logs, batch.flatMap((rows) => rows.logs))
      await insertChunked(tx, schema.accountChanges, batch.flatMap((rows) => rows.accountChanges))
      for (const [key, value] of Object.entries(state)) await putSyncState(tx, key, value)
    })
  }

  /**
   * Deletes every block above `ancestor` and what hangs off it, in one transaction, and returns the logs
   * that were removed (for subscribers, with `removed: true`).
   */
  async function rewindTo(ancestor: number): Promise<LogRow[]> {
    return db.drizzle.transaction(async (tx) => {
      const removed = await tx
        .select()
        .from(schema.logs)
        .where(gt(schema.logs.blockNumber, ancestor))
        .orderBy(asc(schema.logs.blockNumber), asc(schema.logs.logIndex))
      await tx.delete(schema.logs).where(gt(schema.logs.blockNumber, ancestor))
      await tx.delete(schema.receipts).where(gt(schema.receipts.blockNumber, ancestor))
      await tx.delete(schema.transactions).where(gt(schema.transactions.blockNumber, ancestor))
      await tx.delete(schema.accountChanges).where(gt(schema.accountChanges.blockNumber, ancestor))
      await tx.delete(schema.accountReads).where(gt(schema.accountReads.blockNumber, ancestor))
      await tx.delete(schema.blocks).where(gt(schema.blocks.number, ancestor))
      await tx
        .insert(schema.syncState)
        .values({ key: SYNC_KEYS.reorgEpoch, value: 1 })
        .onConflictDoUpdate({ target: schema.syncState.key, set: { value: sql`to_jsonb((${schema.syncState.value}::text)::bigint + 1)` } })
      return removed
    })
  }

  return {
    head,
    hashesFrom,
    syncState,
    writeBlocks,
    rewindTo,
    putSyncState: (key: (typeof SYNC_KEYS)[keyof typeof SYNC_KEYS], value: unknown) => putSyncState(db.drizzle, key, value),
  }
}

export type Store = ReturnType<typeof createStore>
