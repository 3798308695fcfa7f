import { asc, desc, getTableColumns, getTableName, gt, type SQL, sql } from 'drizzle-orm'
import type { Address, Hex } from 'viem'
import { type RegistryProgress, registryEvents } from '../attribution/registry.js'

export type { RegistryProgress }
import { arrayLiteral, blockHashesBetween, byteaToHex, type CopyRows, type DbSession, SYNC_KEYS, rowsOf, schema, sqlState } from '../db/index.js'
import { logAddressIsAnyOf } from '../db/log-keys.js'
import { createLogPartitioner, logPartitions } from '../db/log-partitions.js'
import { notifyChain } from '../db/notifications.js'
import { type BlockRows, registryEventRows } from './block-data.js'
import { blockTables } from './block-tables.js'
import { sealableBelow } from './seal-logs.js'

function upsertSyncState(key: string, value: unknown): SQL {
  return sql`insert into ${schema.syncState} (${sql.identifier('key')}, ${sql.identifier('value')}) values (${key}, ${JSON.stringify(value)}::jsonb)
    on conflict (${sql.identifier('key')}) do update set ${sql.identifier('value')} = excluded.${sql.identifier('value')},
    ${sql.identifier('updated_at')} = (extract(epoch from now()) * 1000)::bigint`
}

/** SQLSTATE of a row no partition of `logs` accepts (as of a CHECK constraint). */
const CHECK_VIOLATION = '23514'

/**
 * Undone blocks whose logs a rewind keeps in `undone_logs`, the newest: as many as log filters remember (the
 * last 64 blocks each delivered: FILTER_REORG_DEPTH in resolvers/filters.ts), so that a filter finds every log
 * it delivered from a replaced block it remembers.
 */
export const UNDONE_LOG_BLOCKS = 64
/** How long undone logs are kept: twice as long as a filter lives without being polled (filter-store.ts). */
export const UNDONE_LOG_TTL_MS = 10 * 60_000

/** Rows per INSERT: well under Postgres' 65,535 parameters at 7 columns. */
const INSERT_CHUNK_ROWS = 1_000

export type StoredHead = { number: number; hash: `0x${string}` }

/**
 * The ingester's only door to the database: batched, transactional writes and the reads it needs.
 * `bareBackfill`: the ingest leader seals the partitions of `logs` (ingest/seal-logs.ts, Postgres only), so a
 * backfill that fills a partition far enough below the upstream's head to be sealed once written makes it
 * bare, leaving its secondary indexes to the seal (db/log-partitions.ts).
 */
export function createStore({ db, bareBackfill = false }: { db: DbSession; bareBackfill?: boolean }) {
  const partitioner = createLogPartitioner(db)
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
    return new Map((await blockHashesBetween(db, fromNumber, toNumber)).map((block) => [block.number, block.hash]))
  }

  async function syncState(): Promise<Map<string, unknown>> {
    const rows = await db.drizzle.select().from(schema.syncState)
    return new Map(rows.map((row) => [row.key, row.value]))
  }

  /**
   * Writes consecutive blocks in one transaction (COPY): all of them land, or none. The same transaction
   * announces the new head to processes that do not ingest (db/notifications.ts). `target`: the upstream's
   * head the ingester is syncing to, which says which blocks are final: the seal's margin below it.
   */
  /**
   * Writes a batch of blocks in one transaction; with `rewindTo`, the rewind to that ancestor goes first in the
   * same transaction, so that no reader sees the index below the new branch (a node's head never goes down
   * while it switches branches), and returns the logs it took away.
   */
  async function writeBlocks(
    batch: BlockRows[],
    state: Record<string, unknown> = {},
    { target, rewindTo }: { target?: number; rewindTo?: number } = {},
  ): Promise<number> {
    const removed = rewindTo === undefined ? 0 : await logsAbove(rewindTo)
    const last = batch[batch.length - 1]!.block
    const finalBelow = target === undefined ? undefined : sealableBelow(target)
    // A partition that ends below it is sealed soon after it is filled: written bare (`bareBackfill`).
    await partitioner.ensure(batch[0]!.block.number, last.number, { bareBelow: bareBackfill ? finalBelow : undefined })
    // A commit of final blocks lost to a crash of the server is written again the same from where the index
    // then ends, so it need not wait for the disk. Measured in the bench's write path: 185–187k logs/s
    // against 173–175k waiting for every commit.
    const durable = finalBelow === undefined || last.number >= finalBelow
    try {
      await db.copyInTransaction(
        blockTables.map(([key, { table }]) => ({ table, rows: batch.flatMap((rows): unknown => rows[key]) })) as CopyRows[],
        [...Object.entries(state).map(([key, value]) => upsertSyncState(key, value)), notifyChain({ head: last.number, hash: byteaToHex(last.hash) })],
        { durable: durable || rewindTo !== undefined, before: rewindTo === undefined ? [] : rewindStatements(rewindTo) },
      )
    } catch (error) {
      // A row without a partition (one dropped under the partitioner's memory): the batch's retry looks again.
      if (sqlState(error) === CHECK_VIOLATION) partitioner.forget()
      throw error
    }
    return removed
  }

  /**
   * What a rewind to `ancestor` runs, in one transaction: copies the logs of the blocks it undoes (the newest
   * `UNDONE_LOG_BLOCKS` of them) to `undone_logs`, for the log filters that delivered them
   * (resolvers/filters.ts), deleting the rows of rewinds older than `UNDONE_LOG_TTL_MS` (a block undone twice
   * keeps its rows of the first time: same hash, same logs); then deletes every block above `ancestor` and
   * what hangs off it (block headers last, COPY order reversed), and announces the rewind.
   */
  function rewindStatements(ancestor: number): SQL[] {
    const now = Date.now()
    const { undoneLogs, logs } = schema
    // The columns `undone_logs` shares with `logs`: all of the latter's.
    const columns = sql.raw(
      Object.values(getTableColumns(logs))
        .map((column) => column.name)
        .join(', '),
    )
    return [
      // A deep rewind deletes millions of rows, for longer than the statement timeout set for reads: cancelled
      // by it, the same rewind would be retried forever. `local`: it ends with the transaction.
      sql`set local statement_timeout = 0`,
      sql`delete from ${undoneLogs} where ${undoneLogs.undoneAt} < ${now - UNDONE_LOG_TTL_MS}`,
      sql`insert into ${undoneLogs} (${columns}, undone_at)
        select ${columns}, ${now}::bigint from ${logs}
        where ${logs.blockNumber} > greatest(${ancestor}::bigint, (select max(${schema.blocks.number}) from ${schema.blocks}) - ${UNDONE_LOG_BLOCKS}::bigint)
        on conflict do nothing`,
      ...[...blockTables].reverse().map(([, { table, blockNumber }]) => sql`delete from ${table} where ${gt(blockNumber, ancestor)}`),
      sql`insert into ${schema.syncState} (${sql.identifier('key')}, ${sql.identifier('value')}) values (${SYNC_KEYS.reorgEpoch}, ${'1'}::jsonb)
        on conflict (${sql.identifier('key')}) do update set ${sql.identifier('value')} = to_jsonb((${schema.syncState.value}::text)::bigint + 1)`,
      notifyChain({ rewoundTo: ancestor }),
    ]
  }

  /** The logs a rewind to `ancestor` takes away (read before it: the ingester is the one writer). */
  async function logsAbove(ancestor: number): Promise<number> {
    return db.transaction(async (tx) => {
      // Millions of them after a deep reorg: longer than the statement timeout set for reads.
      await tx.execute(sql`set local statement_timeout = 0`)
      const answer = await tx.execute(sql`select count(*)::int as count from ${schema.logs} where ${schema.logs.blockNumber} > ${ancestor}`)
      return Number(rowsOf<{ count: number }>(answer)[0]?.count ?? 0)
    })
  }

  /**
   * Deletes every block above `ancestor` and what hangs off it, in one transaction that also announces the
   * rewind, and returns how many logs went with them (subscribers learn which from the event stream). A rewind
   * with new blocks to write goes with them instead (`writeBlocks`' `rewindTo`).
   */
  async function rewindTo(ancestor: number): Promise<number> {
    const removed = await logsAbove(ancestor)
    await db.transaction(async (tx) => {
      for (const statement of rewindStatements(ancestor)) await tx.execute(statement)
    })
    return removed
  }

  /**
   * Starts over with `address`: its events are taken from the indexed logs (blocks from `below` up), and
   * those below are left to the upstream (`addRegistryEvents`). `null` forgets the registry.
   */
  async function setRegistry(address: Address | null, below: number) {
    await db.transaction(async (tx) => {
      await tx.delete(schema.builderCodeRegistryEvents)
      if (address !== null) {
        const { logs } = schema
        const logRows = await tx
          .select({
            blockNumber: logs.blockNumber,
            blockTimestamp: logs.blockTimestamp,
            logIndex: logs.logIndex,
            topic0: logs.topic0,
            topic1: logs.topic1,
            topic2: logs.topic2,
            topic3: logs.topic3,
            data: logs.data,
          })
          .from(logs)
          .where(logAddressIsAnyOf(logs.address, [address]))
          .orderBy(asc(logs.blockNumber), asc(logs.logIndex))
        const events = logRows.flatMap((row) =>
          registryEvents(address, { number: row.blockNumber, timestamp: row.blockTimestamp }, [
            {
              address,
              topics: [row.topic0, row.topic1, row.topic2, row.topic3].filter((topic) => topic !== null).map((topic) => byteaToHex(topic)) as Hex[],
              data: byteaToHex(row.data),
              logIndex: row.logIndex,
            },
          ]),
        )
        const rows = registryEventRows(events)
        for (let at = 0; at < rows.length; at += INSERT_CHUNK_ROWS)
          await tx.insert(schema.builderCodeRegistryEvents).values(rows.slice(at, at + INSERT_CHUNK_ROWS))
      }
      const progress: RegistryProgress | null = address === null ? null : { address, below, next: 0 }
      await tx.execute(upsertSyncState(SYNC_KEYS.builderCodeRegistry, progress))
    })
  }

  /** Adds events read from the upstream below the index, and records how far that reading got. */
  async function addRegistryEvents(rows: BlockRows['registryEvents'], progress: RegistryProgress) {
    await db.transaction(async (tx) => {
      for (let at = 0; at < rows.length; at += INSERT_CHUNK_ROWS)
        await tx
          .insert(schema.builderCodeRegistryEvents)
          .values(rows.slice(at, at + INSERT_CHUNK_ROWS))
          .onConflictDoNothing()
      await tx.execute(upsertSyncState(SYNC_KEYS.builderCodeRegistry, progress))
    })
  }

  /**
   * What a refresh while following analyses: the partitions of `logs` still written that hold blocks from
   * `from` on; any other block table or partition without statistics; and any other block table that has
   * more than doubled in pages since its statistics were taken (`relpages` is what ANALYZE last saw), so
   * that each is analysed a logarithmic number of times as it grows, not at every refresh.
   */
  async function tablesWrittenSince(from: number): Promise<string[]> {
    const partitions = await logPartitions(db)
    const written = partitions.filter((partition) => !partition.sealed && partition.to > from).map((partition) => partition.name)
    const others = blockTables.filter(([key]) => key !== 'logs').map(([, { table }]) => getTableName(table))
    const tables = await db.query<{ name: string; analysed: boolean; doubled: boolean }>(sql`
      select c.relname as name,
        exists (select 1 from pg_stats s where s.schemaname = current_schema() and s.tablename = c.relname) as analysed,
        pg_relation_size(c.oid) > 2 * greatest(c.relpages, 1)::bigint * current_setting('block_size')::bigint as doubled
      from pg_class c
      where c.relnamespace = current_schema()::regnamespace and c.relname = any(${arrayLiteral([...others, ...partitions.map(({ name }) => name)])}::text[])`)
    const stale = tables.filter(({ name, analysed, doubled }) => !analysed || (doubled && others.includes(name)))
    return [...new Set([...written, ...stale.map(({ name }) => name)])]
  }

  async function lowestBlock(): Promise<number | null> {
    const rows = await db.drizzle.select({ number: schema.blocks.number }).from(schema.blocks).orderBy(asc(schema.blocks.number)).limit(1)
    return rows[0]?.number ?? null
  }

  return {
    setRegistry,
    addRegistryEvents,
    lowestBlock,
    /**
     * Refreshes the planner statistics of what ingest wrote. After a large backfill (no `from`): every block
     * table, `logs` and all its partitions. While following (`from`, the first block written since the last
     * refresh): only the partitions of `logs` holding blocks from `from` on that are not sealed (a sealed one
     * never changes, and sealing analysed it: db/log-partitions.ts), and the other tables that have none or
     * have doubled since (`tablesWrittenSince`). Analysing every partition each time would read ~30,000 pages of
     * each, every ~2 minutes at Base's rate, for statistics that cannot have changed.
     */
    async analyze(from?: number) {
      const tables = from === undefined ? blockTables.map(([, { table }]) => getTableName(table)) : await tablesWrittenSince(from)
      if (tables.length === 0) return
      // SKIP_LOCKED: a partition of logs being sealed (db/log-partitions.ts) keeps its statistics, and ingest does not wait.
      await db.query(
        sql`analyze (skip_locked) ${sql.join(
          tables.map((name) => sql.identifier(name)),
          sql`, `,
        )}`,
      )
    },
    head,
    hashesFrom,
    syncState,
    writeBlocks,
    rewindTo,
    async putSyncState(key: (typeof SYNC_KEYS)[keyof typeof SYNC_KEYS], value: unknown) {
      await db.drizzle.execute(upsertSyncState(key, value))
    },
  }
}

export type Store = ReturnType<typeof createStore>
