import { type SQL, sql } from 'drizzle-orm'
import { LOG_INDEX_KEYS } from './log-keys.js'
import { type DbSession, rowsOf, sqlState } from './session.js'

/**
 * The `logs` table is partitioned by block range (migration 0010). Measured at 10M and 100M Base-shaped
 * logs (bench/results/scale-sealed.json): a selective `eth_getLogs` (address + topic0 over 2,000 blocks)
 * reads one heap page per log while logs lie in block order, because one contract's logs are scattered over
 * every block. Once no new block can land in a partition, it is sealed: rewritten in the order of
 * `logs_address_topic0_idx` (address, topic0, block_number, by their keys: db/log-keys.ts), so that the same
 * query reads a few neighbouring pages. The partition still written stays in block order, which the
 * ingester's COPY and whole-block reads want.
 *
 * Three things change partitions, each without pausing reads or ingest for more than a lock's wait:
 * - the ingester attaches empty partitions ahead of the blocks it writes (`createLogPartitioner`);
 * - the ingest leader seals the partitions the head has left (`sealLogPartition`, ingest/seal-logs.ts);
 * - retention drops the partitions wholly below the first block kept (`dropLogPartition`).
 *
 * Every index of a partition, its primary key (block_number, log_index) included, is the partition's own, not
 * the parent's (migrations 0015 and 0016), so that a partition can be written without them: a *bare*
 * partition, with a small BRIN index on block_number alone. The ingester makes one where a backfill far below
 * the head fills it whole and the seal, which rebuilds every index anyway, follows soon after. Its logs are
 * then written at several times the rate, because five B-trees are no longer updated a row at a time only to
 * be thrown away by the seal (measured on the bench's chain: COPY of one partition's 810k logs took 1.0–1.15 s
 * for the heap alone, 1.3 s with the BRIN and 1.9–2.0 s with the primary key; in the full bench a bare
 * partition took 184–312k logs/s with its primary key and 470–503k with the BRIN alone, on a machine faster by
 * about a third, as the head's partition, with every index, shows: 102–134k before, 152–170k after).
 * Until then a query of it reads it by block range through the BRIN: the answers are the same, slower. Its
 * logs are still written once each: a block's rows land in one transaction with the block's own, whose
 * primary key refuses a block written twice, and the seal builds the partition's primary key, which would
 * refuse (and leave the partition as it was) a duplicate that got in some other way. Should the head come to
 * lie in a bare partition (the upstream's head moved back), the ingester builds its indexes before it writes
 * there.
 */

/** Blocks per partition: ~7.5M logs of Base's shape (~2.8 hours of Base), sealed in about a minute. */
export const LOG_PARTITION_BLOCKS = 5_000

/** How far ahead of the newest block written a partition is attached: a new one is never created in a hurry. */
export const LOG_PARTITION_AHEAD_BLOCKS = 1_000

/** The comment a sealed partition carries: the rewrite is done, nothing is left to do with it. */
export const SEALED_COMMENT = 'flashgate: sealed'

/**
 * A partition of `logs`: blocks [from, to); `from` is null for the partition of logs indexed before 0010
 * (MINVALUE). `bare`: it lacks a secondary index (written by a backfill, waiting for its seal).
 */
export type LogPartition = { name: string; from: number | null; to: number; sealed: boolean; bare: boolean }

/**
 * What a partition is at: `sealed`, `written` (not sealed, with its indexes) or `bare` (without its secondary
 * indexes, until its seal: one that stays bare is a seal that keeps failing).
 */
export type LogPartitionState = 'sealed' | 'written' | 'bare'

export function logPartitionState(partition: LogPartition): LogPartitionState {
  return partition.sealed ? 'sealed' : partition.bare ? 'bare' : 'written'
}

/** A partition's B-tree indexes when it has them all: its primary key and `LOG_INDEX_KEYS`. */
const FULL_INDEX_COUNT = 1 + Object.keys(LOG_INDEX_KEYS).length

/**
 * Block ranges of a bare partition's BRIN index, in pages: a lookup of one block reads 32 pages (256 KiB)
 * rather than the default 128, for an index still only a few pages long.
 */
const BARE_BRIN_PAGES = 32

/** How long a partition swap or drop waits for the readers of `logs` before it gives up and tries later. */
const SWAP_LOCK_TIMEOUT_MS = 200

/** SQLSTATE of `lock_timeout` running out. */
const LOCK_NOT_AVAILABLE = '55P03'

/** Serialises sealing between processes (only the ingest leader seals, but leadership can move): "fgsl". */
const SEAL_LOCK_ID = 0x6667736c

const BOUND = /^FOR VALUES FROM \((MINVALUE|'?(-?\d+)'?)\) TO \('?(\d+)'?\)$/

/** Every partition of `logs`, oldest first. `db`: any session, or a transaction's statements (drizzle SQL only). */
export async function logPartitions(db: { query<row extends Record<string, unknown>>(statement: SQL): Promise<row[]> }): Promise<LogPartition[]> {
  const rows = await db.query<{ name: string; bound: string; comment: string | null; indexes: number; keyed: boolean }>(sql`
    select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound, obj_description(c.oid, 'pg_class') as comment,
      (select count(*) from pg_index x join pg_class ic on ic.oid = x.indexrelid join pg_am a on a.oid = ic.relam
        where x.indrelid = c.oid and a.amname = 'btree')::int as indexes,
      exists (select 1 from pg_index x where x.indrelid = c.oid and x.indisprimary) as keyed
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'logs'::regclass`)
  return rows
    .map(({ name, bound, comment, indexes, keyed }) => {
      const match = BOUND.exec(bound)
      if (match === null) throw new Error(`logs partition ${name}: unexpected bound "${bound}"`)
      return {
        name,
        from: match[2] === undefined ? null : Number(match[2]),
        to: Number(match[3]),
        sealed: comment === SEALED_COMMENT,
        bare: !keyed || Number(indexes) < FULL_INDEX_COUNT,
      }
    })
    .sort((left, right) => (left.from ?? Number.NEGATIVE_INFINITY) - (right.from ?? Number.NEGATIVE_INFINITY))
}

/**
 * The block ranges [from, to) to attach so that every block from `first` to `last` has a partition: aligned
 * to `size`, and cut short where an existing partition begins or ends (partitions made before, or with
 * another size, stay as they are).
 */
export function missingLogRanges(
  partitions: readonly LogPartition[],
  first: number,
  last: number,
  size = LOG_PARTITION_BLOCKS,
): { from: number; to: number }[] {
  const missing: { from: number; to: number }[] = []
  let block = first
  while (block <= last) {
    const covering = partitions.find((partition) => (partition.from === null || partition.from <= block) && block < partition.to)
    if (covering !== undefined) {
      block = covering.to
      continue
    }
    const aligned = block - (block % size)
    const from = Math.max(aligned, ...partitions.filter((partition) => partition.to <= block).map((partition) => partition.to))
    const to = Math.min(
      aligned + size,
      ...partitions.filter((partition) => partition.from !== null && partition.from > block).map((partition) => partition.from!),
    )
    missing.push({ from, to })
    block = to
  }
  return missing
}

/**
 * How full the seal packs each index's pages. A sealed partition never changes again (nothing is inserted,
 * updated or deleted until retention drops it whole), so the room B-trees keep by default for inserts (a
 * fillfactor of 90) is never used: packed, its indexes take a tenth less.
 */
const SEALED_FILLFACTOR = sql.raw('with (fillfactor = 100)')

/**
 * The statements that give `table` the secondary indexes of a partition of `logs`, named `<table>_<key>`
 * (`IF NOT EXISTS`: a partition that has some of them is given the others); `sealed`: packed full.
 */
function secondaryIndexes(table: string, { sealed = false }: { sealed?: boolean } = {}): SQL[] {
  return Object.entries(LOG_INDEX_KEYS).map(
    ([suffix, keys]) =>
      sql`create index if not exists ${sql.identifier(`${table}_${suffix}`)} on ${sql.identifier(table)} (${sql.raw(keys)}) ${sealed ? SEALED_FILLFACTOR : sql``}`,
  )
}

/**
 * The statement that gives `table`, a partition of `logs` (or one being built), its primary key, named
 * `<table>_pk`; `sealed`: packed full.
 */
function primaryKey(table: string, { sealed = false }: { sealed?: boolean } = {}): SQL {
  return sql`alter table ${sql.identifier(table)} add constraint ${sql.identifier(`${table}_pk`)} primary key (block_number, log_index) ${sealed ? SEALED_FILLFACTOR : sql``}`
}

/**
 * Attaches an empty partition for blocks [from, to): with its primary key and secondary indexes, or, when
 * `bare`, with the BRIN on block_number alone. ATTACH (unlike CREATE TABLE … PARTITION OF) takes only a SHARE
 * UPDATE EXCLUSIVE lock on `logs`: reads and writes of the other partitions go on meanwhile.
 */
async function attachEmptyPartition(db: DbSession, { from, to }: { from: number; to: number }, bare: boolean): Promise<void> {
  const table = `logs_${from}`
  await db.transaction(async (tx) => {
    await tx.execute(sql`create table ${sql.identifier(table)} (like logs)`)
    if (bare)
      await tx.execute(
        sql`create index ${sql.identifier(`${table}_block_brin`)} on ${sql.identifier(table)} using brin (block_number) with (pages_per_range = ${sql.raw(String(BARE_BRIN_PAGES))})`,
      )
    else for (const statement of [primaryKey(table), ...secondaryIndexes(table)]) await tx.execute(statement)
    await tx.execute(sql`alter table logs attach partition ${sql.identifier(table)} for values from (${sql.raw(String(from))}) to (${sql.raw(String(to))})`)
  })
}

/**
 * Attaches whatever partitions blocks `first` to `last` lack; answers the partitions as they are then. Those
 * that end at or below `bareBelow` are attached bare (the caller knows they will be sealed once written).
 */
export async function attachLogPartitions(
  db: DbSession,
  first: number,
  last: number,
  size = LOG_PARTITION_BLOCKS,
  bareBelow = Number.NEGATIVE_INFINITY,
): Promise<LogPartition[]> {
  const partitions = await logPartitions(db)
  const missing = missingLogRanges(partitions, first, last, size)
  if (missing.length === 0) return partitions
  for (const range of missing) await attachEmptyPartition(db, range, range.to <= bareBelow)
  return logPartitions(db)
}

/**
 * Builds the indexes a bare partition lacks, in bulk, and drops its BRIN, which the primary key replaces.
 * CREATE INDEX locks out writes to the partition (the ingester, the only writer, is the caller), not reads.
 */
async function indexBarePartition(db: DbSession, partition: LogPartition): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.execute(sql`set local statement_timeout = 0`)
    await tx.execute(sql`set local maintenance_work_mem = '512MB'`)
    const keyed = await tx.execute(sql`select 1 from pg_index where indrelid = to_regclass(${partition.name}) and indisprimary`)
    if (rowsOf(keyed).length === 0) await tx.execute(primaryKey(partition.name))
    for (const statement of secondaryIndexes(partition.name)) await tx.execute(statement)
    await tx.execute(sql`drop index if exists ${sql.identifier(`${partition.name}_block_brin`)}`)
  })
}

/**
 * The ingester's side: before a batch of blocks is written, the partitions it falls in (and the next
 * `aheadBlocks`) exist. Known partitions are remembered, so a batch that needs none costs no query.
 * `bareBelow`: partitions that end at or below it are made bare (a backfill far below the head: see above);
 * a bare partition the batch falls in that does not is given its indexes first.
 */
export function createLogPartitioner(db: DbSession, { size = LOG_PARTITION_BLOCKS, aheadBlocks = LOG_PARTITION_AHEAD_BLOCKS } = {}) {
  let known: LogPartition[] = []
  return {
    async ensure(first: number, last: number, { bareBelow = Number.NEGATIVE_INFINITY }: { bareBelow?: number } = {}): Promise<void> {
      if (missingLogRanges(known, first, last + aheadBlocks, size).length > 0) known = await attachLogPartitions(db, first, last + aheadBlocks, size, bareBelow)
      const written = (partition: LogPartition) => (partition.from === null || partition.from <= last) && first < partition.to
      const toIndex = known.filter((partition) => partition.bare && written(partition) && partition.to > bareBelow)
      if (toIndex.length === 0) return
      for (const partition of toIndex) await indexBarePartition(db, partition)
      known = await logPartitions(db)
    },
    /** Partitions can be dropped (retention) or swapped (sealing) by others: the next batch looks again. */
    forget() {
      known = []
    },
  }
}

export type SealOutcome = 'sealed' | 'busy' | 'gone'

/**
 * Seals one partition in a single transaction, without stopping reads of it or writes elsewhere:
 * - a SHARE lock keeps its rows as they are (a reorg that deep would wait) while readers go on;
 * - its rows are copied into a new table in the order of `logs_address_topic0_idx`, which then gets the same
 *   indexes, a CHECK of its range (so that ATTACH need not read it again) and its planner statistics;
 * - the swap (DETACH the old, ATTACH the new, DROP the old) needs `logs` alone for a moment: it waits at most
 *   SWAP_LOCK_TIMEOUT_MS for readers at a time, in a savepoint, and tries again until `swapAttempts` run out.
 * `busy`: another process is sealing, or readers never let go; `gone`: the partition was dropped or sealed meanwhile.
 */
export async function sealLogPartition(
  db: DbSession,
  partition: LogPartition,
  { swapAttempts = 30, retryMs = 500 }: { swapAttempts?: number; retryMs?: number } = {},
): Promise<SealOutcome> {
  if (partition.from === null) throw new Error(`logs partition ${partition.name} has no lower bound: it is not sealed`)
  const { from, to } = partition
  const old = sql.identifier(partition.name)
  const building = `${partition.name}_sealing`
  const fresh = sql.identifier(building)
  try {
    return await db.transaction(async (tx) => {
      const [lock] = rowsOf<{ locked: boolean }>(await tx.execute(sql`select pg_try_advisory_xact_lock(${SEAL_LOCK_ID}) as locked`))
      if (lock?.locked !== true) return 'busy'
      const now = (await logPartitions({ query: async (statement) => rowsOf(await tx.execute(statement)) })).find((each) => each.name === partition.name)
      if (now === undefined || now.sealed || now.from !== from || now.to !== to) return 'gone'
      // A rewrite of millions of rows: no statement timeout, and room to sort and build indexes in memory.
      await tx.execute(sql`set local statement_timeout = 0`)
      await tx.execute(sql`set local work_mem = '256MB'`)
      await tx.execute(sql`set local maintenance_work_mem = '512MB'`)
      await tx.execute(sql`lock table ${old} in share mode`)
      await tx.execute(sql`create table ${fresh} (like logs)`)
      await tx.execute(sql`insert into ${fresh} select * from ${old} order by ${sql.raw(LOG_INDEX_KEYS.address_topic0_idx)}, log_index`)
      await tx.execute(primaryKey(building, { sealed: true }))
      for (const statement of secondaryIndexes(building, { sealed: true })) await tx.execute(statement)
      await tx.execute(
        sql`alter table ${fresh} add constraint ${sql.identifier(`${building}_range`)} check (block_number >= ${sql.raw(String(from))} and block_number < ${sql.raw(String(to))})`,
      )
      // Its statistics, once: the ingester's refreshes skip sealed partitions, which never change again.
      await tx.execute(sql`analyze ${fresh}`)
      for (let attempt = 1; ; attempt++) {
        try {
          await tx.transaction(async (swap) => {
            await swap.execute(sql`set local lock_timeout = ${sql.raw(`'${SWAP_LOCK_TIMEOUT_MS}ms'`)}`)
            await swap.execute(sql`alter table logs detach partition ${old}`)
            await swap.execute(sql`alter table logs attach partition ${fresh} for values from (${sql.raw(String(from))}) to (${sql.raw(String(to))})`)
            await swap.execute(sql`set local lock_timeout = 0`)
          })
          break
        } catch (error) {
          if (sqlState(error) !== LOCK_NOT_AVAILABLE) throw error
          if (attempt >= swapAttempts) rollback('busy')
          await new Promise((resolve) => setTimeout(resolve, retryMs))
        }
      }
      await tx.execute(sql`drop table ${old}`)
      await tx.execute(sql`alter table ${fresh} rename to ${old}`)
      for (const suffix of ['pk', ...Object.keys(LOG_INDEX_KEYS)])
        await tx.execute(sql`alter index ${sql.identifier(`${building}_${suffix}`)} rename to ${sql.identifier(`${partition.name}_${suffix}`)}`)
      await tx.execute(sql`alter table ${old} rename constraint ${sql.identifier(`${building}_range`)} to ${sql.identifier(`${partition.name}_range`)}`)
      await tx.execute(sql`comment on table ${old} is ${sql.raw(`'${SEALED_COMMENT}'`)}`)
      return 'sealed'
    })
  } catch (error) {
    if (error instanceof Rollback) return error.outcome
    throw error
  }
}

/** Thrown inside a transaction to roll it back and answer `outcome`. */
class Rollback extends Error {
  constructor(readonly outcome: SealOutcome) {
    super(`rolled back: ${outcome}`)
  }
}

function rollback(outcome: SealOutcome): never {
  throw new Rollback(outcome)
}

/**
 * Detaches and drops a partition (retention). Waits at most SWAP_LOCK_TIMEOUT_MS for the readers of `logs`;
 * answers false when they held on (the caller tries again later).
 */
export async function dropLogPartition(db: DbSession, partition: LogPartition): Promise<boolean> {
  try {
    await db.transaction(async (tx) => {
      await tx.execute(sql`set local lock_timeout = ${sql.raw(`'${SWAP_LOCK_TIMEOUT_MS}ms'`)}`)
      await tx.execute(sql`alter table logs detach partition ${sql.identifier(partition.name)}`)
      await tx.execute(sql`drop table ${sql.identifier(partition.name)}`)
    })
    return true
  } catch (error) {
    if (sqlState(error) === LOCK_NOT_AVAILABLE) return false
    throw error
  }
}
