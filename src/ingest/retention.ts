import { sql } from 'drizzle-orm'
import type { Logger } from 'pino'
import { type Db, SYNC_KEYS, schema } from '../db/index.js'
import { dropLogPartition, logPartitions } from '../db/log-partitions.js'
import { loggableError } from '../errors.js'
import { type BackgroundLoop, startBackgroundLoop } from './background.js'
import { blockTables } from './block-tables.js'

/** How often the pruner looks at the head. */
const PRUNE_INTERVAL_MS = 2_000
/** Blocks deleted per transaction: short transactions, so that ingest and reads never wait long on them. */
const PRUNE_CHUNK_BLOCKS = 500
/**
 * Between announcing the new first block and deleting below it: longer than any read that started with the
 * old first block can last (a serving process trusts its view of the chain for 100 ms, and a statement is
 * cancelled after 10 s; src/resolvers/chain.ts, src/db/index.ts). A read therefore either saw the new first
 * block (and answers below it from history or refuses, as `--history` says) or finishes before the delete.
 */
export const PRUNE_GRACE_MS = 12_000

export type Retention = { stop(): Promise<void>; status(): { firstBlock: number | null; prunedBlocks: number; droppedPartitions: number } }

/**
 * `--retain-blocks N`: keeps the newest N blocks and deletes older history in the background, in two steps
 * per cut: the first block in `sync_state` moves up at once (readers stop asking below it), and the rows
 * below it go after PRUNE_GRACE_MS: the partitions of logs wholly below the cut dropped, then the rest a
 * chunk of blocks per transaction, oldest first, blocks last. Account changes keep each account's newest
 * change below the cut, so that state at every retained height is still answered from the index. Builder-code attributions are kept whole: they are the analytics' history.
 * Only the process that holds the ingest lock prunes.
 */
export function startRetention({
  db,
  retainBlocks,
  leads,
  logger,
  graceMs = PRUNE_GRACE_MS,
  intervalMs = PRUNE_INTERVAL_MS,
}: {
  db: Db
  retainBlocks: number
  leads(): boolean
  logger: Logger
  graceMs?: number
  intervalMs?: number
}): Retention {
  let firstBlock: number | null = null
  let prunedBlocks = 0
  let droppedPartitions = 0

  // Rows below this block may be deleted: its announcement is older than the grace period.
  let safeBelow = Number.NEGATIVE_INFINITY

  async function round({ running, pause }: BackgroundLoop) {
    const [state] = await db.query<{ head: string | null; oldest: string | null; first: string | null }>(sql`
      select (select max(${schema.blocks.number}) from ${schema.blocks})::text as head,
             (select min(${schema.blocks.number}) from ${schema.blocks})::text as oldest,
             (select ${schema.syncState.value} #>> '{}' from ${schema.syncState} where ${schema.syncState.key} = ${SYNC_KEYS.firstBlock}) as first`)
    if (state?.head == null || state.oldest == null || state.first == null) return
    const head = Number(state.head)
    let first = Number(state.first)
    const cut = head - retainBlocks + 1
    if (cut > first) {
      await db.query(sql`update ${schema.syncState} set ${sql.identifier('value')} = ${JSON.stringify(cut)}::jsonb,
        ${sql.identifier('updated_at')} = (extract(epoch from now()) * 1000)::bigint where ${schema.syncState.key} = ${SYNC_KEYS.firstBlock}`)
      logger.info({ firstBlock: cut, head }, 'retention: first block moved up; older rows go after the grace period')
      first = cut
    }
    firstBlock = first
    // Rows left below the first block: from this round's cut, or from a cut announced before a restart.
    const oldest = Number(state.oldest)
    if (oldest >= first) return
    if (safeBelow < first) {
      await pause(graceMs)
      if (!running()) return
      safeBelow = first
    }
    // Whole partitions of logs below the cut go at once (db/log-partitions.ts); what is left, row by row.
    for (const partition of await logPartitions(db)) {
      if (partition.to > first || !running() || !leads()) continue
      if (await dropLogPartition(db, partition)) {
        droppedPartitions++
        logger.info({ partition: partition.name, toBlock: partition.to - 1 }, 'retention: logs partition dropped')
      }
    }
    for (let start = oldest; start < first && running() && leads(); start += PRUNE_CHUNK_BLOCKS) {
      const end = Math.min(first, start + PRUNE_CHUNK_BLOCKS)
      await deleteBlocks(start, end, first)
      prunedBlocks += end - start
    }
  }

  /** Deletes blocks [start, end) and what hangs off them, in one transaction; `cut` is the first block kept. */
  async function deleteBlocks(start: number, end: number, cut: number) {
    await db.transaction(async (tx) => {
      // The block headers last (COPY order reversed), as a reorg deletes.
      for (const [, { table, blockNumber, pruning }] of [...blockTables].reverse()) {
        if (pruning === 'range') await tx.execute(sql`delete from ${table} where ${blockNumber} >= ${start} and ${blockNumber} < ${end}`)
        // An account's change below the cut goes only when a newer one, also below the cut, supersedes it:
        // in these blocks; and below them, the change an earlier cut kept as the account's newest, once one
        // in these blocks supersedes it (else each cut would leave one more such row per account).
        else if (pruning === 'superseded') {
          await tx.execute(sql`delete from ${table} as old
            where old.block_number >= ${start} and old.block_number < ${end}
              and exists (select 1 from ${table} as newer
                          where newer.address = old.address and newer.block_number > old.block_number and newer.block_number < ${cut})`)
          await tx.execute(sql`delete from ${table} as old
            where old.block_number < ${start}
              and old.address in (select newer.address from ${table} as newer where newer.block_number >= ${start} and newer.block_number < ${end})`)
        }
      }
    })
  }

  const loop = startBackgroundLoop({
    intervalMs,
    leads,
    round,
    failed: (error) => logger.warn({ err: loggableError(error) }, 'retention: pruning failed; trying again'),
  })

  return {
    stop: () => loop.stop(),
    status: () => ({ firstBlock, prunedBlocks, droppedPartitions }),
  }
}
