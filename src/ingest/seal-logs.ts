import { sql } from 'drizzle-orm'
import type { Logger } from 'pino'
import { type Db, SYNC_KEYS, schema } from '../db/index.js'
import { LOG_PARTITION_BLOCKS, type LogPartition, logPartitions, sealLogPartition } from '../db/log-partitions.js'
import { loggableError } from '../errors.js'
import { type BackgroundLoop, startBackgroundLoop } from './background.js'

/** How often the sealer looks for a partition to seal. */
const SEAL_INTERVAL_MS = 30_000
/**
 * How far below the head a partition must end before it is sealed: deeper than any reorg seen on an OP
 * Stack chain, so that a sealed partition is, in practice, never written again (if it were, the writer
 * would only wait for the seal to finish).
 */
export const SEAL_MARGIN_BLOCKS = 300

/** The partitions of `logs` that end at or below this block are sealed once the index's head is `head`. */
export function sealableBelow(head: number, marginBlocks = SEAL_MARGIN_BLOCKS): number {
  return head - marginBlocks + 1
}

export type LogSealer = { stop(): Promise<void>; status(): { sealed: number; lastError: string | null } }

/**
 * The partitions of `logs` that are ready to seal: the head has left them by `marginBlocks`, retention is
 * not about to drop them, they are not sealed yet, and they are no wider than a partition the ingester makes
 * (the partition of logs indexed before migration 0010 is left as it is: rewriting it could take hours).
 */
export function partitionsToSeal(
  partitions: readonly LogPartition[],
  {
    head,
    firstBlock,
    marginBlocks = SEAL_MARGIN_BLOCKS,
    maxBlocks = LOG_PARTITION_BLOCKS,
  }: { head: number; firstBlock: number | null; marginBlocks?: number; maxBlocks?: number },
): LogPartition[] {
  return partitions.filter(
    (partition) =>
      !partition.sealed &&
      partition.from !== null &&
      partition.to - partition.from <= maxBlocks &&
      partition.to <= sealableBelow(head, marginBlocks) &&
      (firstBlock === null || partition.to > firstBlock),
  )
}

/**
 * Seals the partitions the head has left (db/log-partitions.ts), oldest first, one at a time, on the ingest
 * leader only. Postgres only: PGlite runs one statement at a time, so a rewrite would stall every reader.
 */
export function startLogSealer({
  db,
  leads,
  logger,
  intervalMs = SEAL_INTERVAL_MS,
  marginBlocks = SEAL_MARGIN_BLOCKS,
}: {
  db: Db
  leads(): boolean
  logger: Logger
  intervalMs?: number
  marginBlocks?: number
}): LogSealer {
  let sealed = 0
  let lastError: string | null = null

  async function round({ running }: BackgroundLoop) {
    const [state] = await db.query<{ head: string | null; first: string | null }>(sql`
      select (select max(${schema.blocks.number}) from ${schema.blocks})::text as head,
             (select ${schema.syncState.value} #>> '{}' from ${schema.syncState} where ${schema.syncState.key} = ${SYNC_KEYS.firstBlock}) as first`)
    if (state?.head == null) return
    const head = Number(state.head)
    const firstBlock = state.first == null ? null : Number(state.first)
    for (const partition of partitionsToSeal(await logPartitions(db), { head, firstBlock, marginBlocks })) {
      if (!running() || !leads()) return
      const started = performance.now()
      const outcome = await sealLogPartition(db, partition)
      const seconds = Number(((performance.now() - started) / 1000).toFixed(1))
      if (outcome === 'sealed') sealed++
      logger.info({ partition: partition.name, fromBlock: partition.from, toBlock: partition.to - 1, outcome, seconds }, 'logs partition sealed')
      if (outcome === 'busy') return
    }
  }

  const loop = startBackgroundLoop({
    intervalMs,
    leads,
    round,
    failed(error) {
      lastError = error instanceof Error ? error.message : String(error)
      logger.warn({ err: loggableError(error) }, 'sealing logs partitions failed; trying again later')
    },
  })

  return {
    stop: () => loop.stop(),
    status: () => ({ sealed, lastError }),
  }
}
