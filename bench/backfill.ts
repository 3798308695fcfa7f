import type { Logger } from 'pino'
import { type Gateway, startGateway } from '../src/app.js'
import { serveConfigSchema } from '../src/config.js'
import { createDb } from '../src/db/index.js'
import { logPartitions, sealLogPartition } from '../src/db/log-partitions.js'
import { type BlockRows, toRows } from '../src/ingest/block-data.js'
import { createBlockFetcher } from '../src/ingest/fetch-block.js'
import { partitionsToSeal } from '../src/ingest/seal-logs.js'
import { createStore } from '../src/ingest/store.js'
import { createUpstream } from '../src/upstream/index.js'

/** Longest the gateway may take to index the whole generated chain. */
const BACKFILL_TIMEOUT_MS = 20 * 60_000
/** Blocks per `writeBlocks` call in the write-path measurement: the ingester's own batch size. */
const WRITE_BATCH_BLOCKS = 100
/** Blocks fetched at once while preparing a write batch (untimed). */
const FETCH_CONCURRENCY = 8
const PROGRESS_EVERY_BLOCKS = 1_000
const BACKFILL_PROGRESS_MS = 10_000
/** Longest the bench waits for the gateway to seal the partitions its backfill filled, and how often it looks. */
const SEALED_TIMEOUT_MS = 5 * 60_000
const SEALED_POLL_MS = 1_000

export type BackfillResult = {
  blocks: number
  logs: number
  seconds: number
  blocksPerSecond: number
  logsPerSecond: number
  /** How the index serves balances and nonces: `trace` (from prestateTracer diffs) or `read-through` (upstream). */
  accountSource: string
}

/**
 * Starts the gateway on an empty database and times it until it has indexed block `head`. Its answers are
 * measured on a dedicated endpoint (`servingUrl`, an API key without a rate limit): the public one refuses
 * `eth_getBlockReceipts` and limits each client address's rate.
 */
export async function measureBackfill({
  rpcUrl,
  databaseUrl,
  head,
  logs,
  logger,
  log,
  onGateway,
}: {
  rpcUrl: string
  databaseUrl: string
  head: number
  logs: number
  logger: Logger
  log: (line: string) => void
  /** Gets the gateway as soon as it runs, so that the caller can stop it even if the backfill fails. */
  onGateway: (gateway: Gateway) => void
}): Promise<{ gateway: Gateway; apiKey: string; servingUrl: string; result: BackfillResult }> {
  const config = serveConfigSchema.parse({
    port: 0,
    databaseUrl,
    upstreamRpc: rpcUrl,
    startBlock: '0',
    logLevel: 'silent',
  })
  const started = performance.now()
  const gateway = await startGateway({ config, logger })
  onGateway(gateway)
  const { key } = await gateway.resolvers.createApiKey({ name: 'bench', policy: 'dedicated', rateLimit: 0 })
  const progress = setInterval(() => {
    const seconds = (performance.now() - started) / 1000
    log(`  backfill: block ${gateway.ingester.status().head ?? '-'}/${head}, ${seconds.toFixed(0)} s`)
  }, BACKFILL_PROGRESS_MS)
  try {
    await gateway.ingester.waitForBlock(head, BACKFILL_TIMEOUT_MS)
  } finally {
    clearInterval(progress)
  }
  const seconds = (performance.now() - started) / 1000
  const view = await gateway.resolvers.chain.view()
  const blocks = head + 1
  return {
    gateway,
    apiKey: key,
    servingUrl: `${gateway.url}/rpc/${key}`,
    result: { blocks, logs, seconds, blocksPerSecond: blocks / seconds, logsPerSecond: logs / seconds, accountSource: view.accountSource },
  }
}

/**
 * Waits until the gateway has sealed every logs partition its backfill left behind (src/ingest/seal-logs.ts
 * rewrites each one, seconds of Postgres' time per million logs, looking every 30 s), so that the phases
 * after the backfill are measured on the layout a running gateway serves from, and not beside a seal.
 * Returns the seconds waited, or `null` when the partitions were still unsealed after `SEALED_TIMEOUT_MS`.
 */
export async function waitUntilSealed({ databaseUrl, head }: { databaseUrl: string; head: number }): Promise<number | null> {
  const db = await createDb({ databaseUrl })
  const started = performance.now()
  try {
    while (partitionsToSeal(await logPartitions(db), { head, firstBlock: 0 }).length > 0) {
      if (performance.now() - started > SEALED_TIMEOUT_MS) return null
      await new Promise((resolve) => setTimeout(resolve, SEALED_POLL_MS))
    }
    return (performance.now() - started) / 1000
  } finally {
    await db.close()
  }
}

export type WritePathResult = {
  blocks: number
  logs: number
  /** Time inside `store.writeBlocks` only. */
  writeSeconds: number
  logsPerSecond: number
  blocksPerSecond: number
  /** Untimed in the figure above, reported for context. */
  fetchSeconds: number
  toRowsSeconds: number
  /**
   * Partitions written bare, as the ingester writes them on Postgres far below the head (db/log-partitions.ts),
   * and the time their seals took afterwards, which builds the indexes they were written without (untimed in
   * the figure above: the ingest leader seals in the background, on a session of its own).
   */
  barePartitions: number
  sealSeconds: number
  /**
   * The same writes split by the kind of partition of `logs` each batch went to (by its first block): bare (the
   * primary key alone) or with its four secondary indexes (the partition the head is in). The bench's chain is
   * small, so the head's partition holds a fifth of its logs; a backfill of a long chain writes nearly all bare.
   */
  byPartition?: { bare: PartitionWrites; indexed: PartitionWrites }
}

export type PartitionWrites = { batches: number; logs: number; seconds: number; logsPerSecond: number }

/**
 * The ingester's write path alone: blocks are fetched from anvil and turned into rows outside the clock,
 * then `createStore().writeBlocks` is timed, batch by batch, into its own empty database, told the chain's
 * head as the ingester tells it its target. `bareBackfill`: as the ingester on Postgres, where its leader seals.
 */
export async function measureWritePath({
  rpcUrl,
  databaseUrl,
  head,
  bareBackfill,
  log,
}: {
  rpcUrl: string
  databaseUrl: string
  head: number
  bareBackfill: boolean
  log: (line: string) => void
}): Promise<WritePathResult> {
  const db = await createDb({ databaseUrl })
  try {
    const store = createStore({ db, bareBackfill })
    const fetcher = createBlockFetcher({ upstream: createUpstream({ rpcUrl }), capabilities: { blockReceipts: true, tracing: true } })
    let writeSeconds = 0
    let fetchSeconds = 0
    let toRowsSeconds = 0
    let logs = 0
    const batches: { first: number; logs: number; seconds: number }[] = []
    for (let from = 0; from <= head; from += WRITE_BATCH_BLOCKS) {
      const to = Math.min(from + WRITE_BATCH_BLOCKS - 1, head)
      let mark = performance.now()
      const blocks = await fetchRange(from, to, fetcher.fetchBlock)
      fetchSeconds += (performance.now() - mark) / 1000
      mark = performance.now()
      const rows: BlockRows[] = blocks.map((data) => toRows(data))
      toRowsSeconds += (performance.now() - mark) / 1000
      mark = performance.now()
      await store.writeBlocks(rows, {}, { target: head })
      const seconds = (performance.now() - mark) / 1000
      const batchLogs = rows.reduce((sum, block) => sum + block.logs.length, 0)
      writeSeconds += seconds
      logs += batchLogs
      batches.push({ first: from, logs: batchLogs, seconds })
      if ((to + 1) % PROGRESS_EVERY_BLOCKS === 0 || to === head)
        log(`  write path: ${to + 1}/${head + 1} blocks, ${logs.toLocaleString('en-US')} logs, ${writeSeconds.toFixed(1)} s writing`)
    }
    const bare = (await logPartitions(db)).filter((partition) => partition.bare)
    const isBare = (block: number) => bare.some((partition) => (partition.from ?? Number.NEGATIVE_INFINITY) <= block && block < partition.to)
    const split = (wanted: boolean): PartitionWrites => {
      const chosen = batches.filter((batch) => isBare(batch.first) === wanted)
      const chosenLogs = chosen.reduce((sum, batch) => sum + batch.logs, 0)
      const chosenSeconds = chosen.reduce((sum, batch) => sum + batch.seconds, 0)
      return { batches: chosen.length, logs: chosenLogs, seconds: chosenSeconds, logsPerSecond: chosenSeconds > 0 ? chosenLogs / chosenSeconds : 0 }
    }
    const byPartition = { bare: split(true), indexed: split(false) }
    const sealStarted = performance.now()
    for (const partition of bare) {
      const outcome = await sealLogPartition(db, partition)
      if (outcome !== 'sealed') throw new Error(`write path: sealing ${partition.name} answered ${outcome}`)
    }
    const sealSeconds = (performance.now() - sealStarted) / 1000
    if (bare.length > 0) log(`  write path: ${bare.length} bare partition(s) sealed in ${sealSeconds.toFixed(1)} s`)
    const blocks = head + 1
    return {
      blocks,
      logs,
      writeSeconds,
      logsPerSecond: logs / writeSeconds,
      blocksPerSecond: blocks / writeSeconds,
      fetchSeconds,
      toRowsSeconds,
      barePartitions: bare.length,
      sealSeconds,
      byPartition,
    }
  } finally {
    await db.close()
  }
}

async function fetchRange<block>(from: number, to: number, fetchBlock: (number: number) => Promise<block>): Promise<block[]> {
  const results: block[] = new Array(to - from + 1)
  let next = from
  const worker = async () => {
    while (next <= to) {
      const number = next++
      results[number - from] = await fetchBlock(number)
    }
  }
  await Promise.all(Array.from({ length: Math.min(FETCH_CONCURRENCY, to - from + 1) }, worker))
  return results
}
