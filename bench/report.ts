import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { BackfillResult, WritePathResult } from './backfill.js'
import { WARM_UP_S } from './load.js'
import type { BenchChain } from './chain.js'
import type { BenchOptions } from './options.js'
import type { PendingFigures } from './pending.js'
import type { HeadlineFigures, ServingFigures } from './serving.js'
import { describeCores, type WorkersFigures } from './workers.js'

/** The issues' targets (issue 2 and issue 3, "Checked by"). */
export const TARGETS = {
  headlineP50Ms: 5,
  writeLogsPerSecond: 50_000,
  requestsPerSecondRatio: 1,
  flashblockToVisibleP99Ms: 10,
  sendToVisibleP99Ms: 250,
} as const

/** Issue 18's targets ("Speed"). */
export const SPEED_TARGETS = {
  /** Cached answers per second as a share of the floor's, same bodies, same run. */
  cachedOfFloor: 0.8,
  /** Cached answers per second against anvil's, every method. */
  cachedOfAnvil: 1,
  /** `eth_getBlockReceipts` with `--answer-cache-mb 0` against anvil. */
  uncachedReceiptsOfAnvil: 2,
  flashblockToVisibleP99Ms: 10,
  writeLogsPerSecond: 200_000,
} as const

export type BenchResults = {
  startedAt: string
  totalSeconds: number
  options: BenchOptions
  environment: Record<string, unknown>
  chain: Omit<BenchChain, 'tokens' | 'senders' | 'users'> & { tokens: number; accounts: number }
  backfill: BackfillResult
  writePath: WritePathResult
  verification: ServingFigures['verification']
  throughput: ServingFigures['throughput']
  /** `serve --workers 1` and `2` as processes of their own; `null` on PGlite. */
  workers: WorkersFigures | null
  headline: HeadlineFigures
  storage: { tables: Record<string, string>; logsAnalyzed: boolean; headlinePlan: string[] }
  pending: PendingFigures
}

const integer = (value: number) => Math.round(value).toLocaleString('en-US')
const ms = (value: number) => (value < 10 ? value.toFixed(2) : value.toFixed(1))
const ratio = (value: number) => `${value.toFixed(2)}×`
const verdict = (met: boolean) => (met ? 'met' : 'MISSED')

function table(rows: string[][], rightAligned: (column: number) => boolean): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows
    .map((row) => row.map((cell, column) => (rightAligned(column) ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join('  '))
    .join('\n')
}

export function formatReport(results: BenchResults): string {
  const { chain, backfill, writePath, headline } = results
  const lines: string[] = []
  lines.push(`flashgate bench: ${integer(chain.logs)} logs in ${integer(chain.head + 1)} blocks on ${results.environment.database}`)
  const load = results.environment.loadAverage as { atStart: number; atEnd: number }
  lines.push(
    `  ${results.environment.node}, ${results.environment.cpus} CPUs (load average ${load.atStart.toFixed(2)} at start), ${results.environment.anvil}; total run ${results.totalSeconds.toFixed(0)} s`,
  )
  lines.push('')
  lines.push(
    table(
      [
        ['phase', 'blocks', 'logs', 'seconds', 'blocks/s', 'logs/s', 'target'],
        [
          'chain generation (anvil)',
          integer(chain.head + 1),
          integer(chain.logs),
          chain.seconds.toFixed(1),
          integer((chain.head + 1) / chain.seconds),
          integer(chain.logs / chain.seconds),
          '',
        ],
        [
          'backfill, end to end',
          integer(backfill.blocks),
          integer(backfill.logs),
          backfill.seconds.toFixed(1),
          integer(backfill.blocksPerSecond),
          integer(backfill.logsPerSecond),
          '',
        ],
        [
          'write path (writeBlocks)',
          integer(writePath.blocks),
          integer(writePath.logs),
          writePath.writeSeconds.toFixed(1),
          integer(writePath.blocksPerSecond),
          integer(writePath.logsPerSecond),
          `≥ ${integer(TARGETS.writeLogsPerSecond)} logs/s: ${verdict(writePath.logsPerSecond >= TARGETS.writeLogsPerSecond)}`,
        ],
      ],
      (column) => column > 0 && column < 6,
    ),
  )
  lines.push(
    `  (write path excludes fetching, ${writePath.fetchSeconds.toFixed(1)} s, and toRows, ${writePath.toRowsSeconds.toFixed(1)} s; accounts served from: ${backfill.accountSource})`,
  )
  // Older results (before bare partitions) have neither figure.
  if ((writePath.barePartitions ?? 0) > 0)
    lines.push(
      `  (${writePath.barePartitions} of its partitions written bare, far below the head; their seals, which build the indexes, took ${writePath.sealSeconds.toFixed(1)} s after it, in the background when the ingester writes)`,
    )
  // Older results have no split.
  if (writePath.byPartition !== undefined) {
    const { bare, indexed } = writePath.byPartition
    const share = (part: { logs: number }) => `${((100 * part.logs) / Math.max(1, writePath.logs)).toFixed(0)}%`
    lines.push(
      `  (by partition of logs: bare ${integer(bare.logsPerSecond)} logs/s for ${share(bare)} of the logs in ${bare.seconds.toFixed(1)} s; with its indexes (the head's) ${integer(indexed.logsPerSecond)} logs/s for ${share(indexed)} in ${indexed.seconds.toFixed(1)} s)`,
    )
  }
  lines.push('')
  const rows = [
    [
      'method',
      'flashgate req/s',
      'p50 ms',
      'p99 ms',
      'anvil req/s',
      'p50 ms',
      'p99 ms',
      'req/s fg/anvil',
      'p50 fg/anvil',
      'fg cached req/s',
      'floor req/s',
      'cached/floor',
      'fg no cache req/s',
      'no cache/anvil',
      'failures',
    ],
  ]
  for (const [method, { flashgate, anvil, flashgateCached, flashgateUncached: uncached, floor }] of Object.entries(results.throughput)) {
    rows.push([
      method,
      integer(flashgate.requestsPerSecond),
      ms(flashgate.p50Ms),
      ms(flashgate.p99Ms),
      integer(anvil.requestsPerSecond),
      ms(anvil.p50Ms),
      ms(anvil.p99Ms),
      ratio(flashgate.requestsPerSecond / anvil.requestsPerSecond),
      ratio(flashgate.p50Ms / anvil.p50Ms),
      integer(flashgateCached.requestsPerSecond),
      integer(floor.requestsPerSecond),
      ratio(flashgateCached.requestsPerSecond / floor.requestsPerSecond),
      uncached === null ? '-' : integer(uncached.requestsPerSecond),
      uncached === null ? '-' : ratio(uncached.requestsPerSecond / anvil.requestsPerSecond),
      [flashgate, anvil, flashgateCached, ...(uncached === null ? [] : [uncached])].map((report) => report.failures).join('/'),
    ])
  }
  lines.push(
    `throughput: autocannon, ${results.options.connections} connections, ${results.options.loadDurationS} s per method and target, distinct requests (target: req/s ratio ≥ 1);`,
  )
  lines.push(
    `  "fg cached": flashgate cycling 100 requests, answered from its answer cache after the first pass (on Postgres, \`flashgate serve\` in a process of its own, as the floor);`,
  )
  lines.push(`  "fg no cache": a second flashgate on the same database with --answer-cache-mb 0, the same distinct requests (Postgres only);`)
  lines.push(`  "floor": a bare Node HTTP server (bench/floor-server.ts) writing the same answers to the cached bodies from a table;`)
  lines.push(
    `  fg cached and the floor, and fg no cache and anvil, are measured in alternation (each first warmed up ${WARM_UP_S} s untimed, then 3 rounds of half the duration each, the order reversed each round), each the median round`,
  )
  lines.push(table(rows, (column) => column > 0))
  for (const [key, client] of [
    ['asFetchSends', "Node's fetch (viem) sends them, with Accept-Encoding: gzip, deflate"],
    ['asEthersSends', 'ethers v6 (and Go) send them, with Accept-Encoding: gzip'],
  ] as const) {
    const measured = Object.entries(results.throughput).filter(([, figures]) => figures[key])
    if (measured.length === 0) continue
    lines.push(`  the same distinct requests sent as ${client}:`)
    for (const [method, figures] of measured) {
      const { anvil, flashgateUncached } = figures[key]!
      lines.push(
        `    ${method}: fg no cache ${integer(flashgateUncached.requestsPerSecond)} req/s (p50 ${ms(flashgateUncached.p50Ms)} ms), anvil ${integer(anvil.requestsPerSecond)} req/s (p50 ${ms(anvil.p50Ms)} ms): ${ratio(flashgateUncached.requestsPerSecond / anvil.requestsPerSecond)}, failures ${flashgateUncached.failures}/${anvil.failures}`,
      )
    }
  }
  if (results.workers !== null) {
    lines.push('')
    lines.push(
      'workers: flashgate serve --role serve --workers N, a process of its own on the same database; the load generator takes a core of this machine too',
    )
    const byMethod = new Map<string, Map<number, number>>()
    for (const { workers, method, pool, report } of results.workers) {
      const key = `${method} (${pool === 'hot' ? 'cached' : 'distinct'})`
      if (!byMethod.has(key)) byMethod.set(key, new Map())
      byMethod.get(key)!.set(workers, report.requestsPerSecond)
    }
    const counts = [...new Set(results.workers.map((figure) => figure.workers))]
    lines.push(
      table(
        [
          ['method', ...counts.map((count) => `${count} worker${count === 1 ? '' : 's'} req/s`), `${counts.at(-1)}/${counts[0]}`],
          ...[...byMethod].map(([key, figures]) => [
            key,
            ...counts.map((count) => integer(figures.get(count) ?? 0)),
            ratio((figures.get(counts.at(-1)!) ?? 0) / (figures.get(counts[0]!) ?? 1)),
          ]),
        ],
        (column) => column > 0,
      ),
    )
    // Which part of the machine was the limit: on 2 cores the load generator takes most of one.
    for (const { workers, method, pool, cores } of results.workers)
      lines.push(`  --workers ${workers}, ${method} (${pool === 'hot' ? 'cached' : 'distinct'}): ${describeCores(cores)}`)
  }
  lines.push('')
  lines.push(
    `headline: eth_getLogs address + topic0 over ${integer(headline.rangeBlocks)} blocks, one in flight, ${headline.flashgate.requests} distinct queries (uncached), ${headline.averageLogs.toFixed(0)} logs per answer on average`,
  )
  lines.push(
    table(
      [
        ['target', 'p50 ms', 'p90 ms', 'p99 ms', 'mean ms', 'queries/s'],
        ...(['flashgate', 'anvil'] as const).map((name) => {
          const report = headline[name]
          return [name, ms(report.p50Ms), ms(report.p90Ms), ms(report.p99Ms), ms(report.meanMs), integer(report.requestsPerSecond)]
        }),
        [
          'flashgate/anvil',
          ratio(headline.flashgate.p50Ms / headline.anvil.p50Ms),
          ratio(headline.flashgate.p90Ms / headline.anvil.p90Ms),
          ratio(headline.flashgate.p99Ms / headline.anvil.p99Ms),
          ratio(headline.flashgate.meanMs / headline.anvil.meanMs),
          '',
        ],
      ],
      (column) => column > 0,
    ),
  )
  lines.push(`  target p50 < ${TARGETS.headlineP50Ms} ms with ${integer(chain.logs)} logs stored: ${verdict(headline.flashgate.p50Ms < TARGETS.headlineP50Ms)}`)
  const { feedToVisible, largeFeedToVisible, sendToVisible, hydration, syncSend, transactionsPerFlashblock, warmUpFlashblocks } = results.pending
  lines.push('')
  lines.push(
    `pending: flashblock frame → pending view (${transactionsPerFlashblock} tx per flashblock): p50 ${ms(feedToVisible.p50Ms)} ms, p99 ${ms(feedToVisible.p99Ms)} ms, target p99 < ${TARGETS.flashblockToVisibleP99Ms} ms: ${verdict(feedToVisible.p99Ms < TARGETS.flashblockToVisibleP99Ms)}${feedToVisible.cold === undefined ? '' : ` (timed after ${warmUpFlashblocks} frames; those, cold: p50 ${ms(feedToVisible.cold.p50Ms)} ms, p99 ${ms(feedToVisible.cold.p99Ms)} ms)`}${feedToVisible.gcPauses === undefined ? '' : `; ${feedToVisible.gcPauses.count} GC pauses in the process meanwhile (longest ${ms(feedToVisible.gcPauses.maxMs)} ms), inside ${feedToVisible.samplesWithGc} samples`}`,
  )
  if (largeFeedToVisible !== undefined)
    lines.push(
      `pending: the same with ${largeFeedToVisible.transactionsPerFlashblock} tx per flashblock (a busy Base flashblock), split between ${largeFeedToVisible.decodeThreads} decoding threads: p50 ${ms(largeFeedToVisible.p50Ms)} ms, p99 ${ms(largeFeedToVisible.p99Ms)} ms`,
    )
  lines.push(
    `pending: eth_sendRawTransaction on the devnet → visible through flashgate: p50 ${ms(sendToVisible.p50Ms)} ms, p99 ${ms(sendToVisible.p99Ms)} ms, target p99 < ${TARGETS.sendToVisibleP99Ms} ms: ${verdict(sendToVisible.p99Ms < TARGETS.sendToVisibleP99Ms)}`,
  )
  lines.push(
    `pending (today's frames, hydrated from the devnet): applied → receipts visible p50 ${ms(hydration.visible.p50Ms)} ms, p99 ${ms(hydration.visible.p99Ms)} ms; upstream round trips p99 ${ms(hydration.upstream.p99Ms)} ms; flashgate's own p99 ${ms(hydration.overhead.p99Ms)} ms, target < ${TARGETS.flashblockToVisibleP99Ms} ms: ${verdict(hydration.overhead.p99Ms < TARGETS.flashblockToVisibleP99Ms)}`,
  )
  lines.push(
    `pending: hydration by a batch of eth_getTransactionReceipt p50 ${ms(hydration.batchRoundTrip.p50Ms)} ms, p99 ${ms(hydration.batchRoundTrip.p99Ms)} ms; by eth_getBlockReceipts("pending") p50 ${ms(hydration.blockReceiptsRoundTrip.p50Ms)} ms, p99 ${ms(hydration.blockReceiptsRoundTrip.p99Ms)} ms`,
  )
  lines.push(
    `pending: eth_sendRawTransactionSync through flashgate → receipt: p50 ${ms(syncSend.p50Ms)} ms, p99 ${ms(syncSend.p99Ms)} ms (${syncSend.preConfirmed}/${syncSend.samples} pre-confirmed), target p99 < ${TARGETS.sendToVisibleP99Ms} ms: ${verdict(syncSend.p99Ms < TARGETS.sendToVisibleP99Ms)}`,
  )
  lines.push('')
  lines.push(speedSummary(results))
  const differences = Object.entries(results.verification).filter(([, outcome]) => outcome.differenceCount > 0)
  lines.push('')
  lines.push(
    differences.length === 0
      ? `verification: ${Object.values(results.verification).reduce((sum, outcome) => sum + outcome.compared, 0)} sampled answers equal between flashgate and anvil`
      : `verification: DIFFERENCES ${differences.map(([name, outcome]) => `${name} ${outcome.differenceCount}/${outcome.compared}`).join(', ')} (see latest.json)`,
  )
  return lines.join('\n')
}

/** Issue 18's targets, each met or missed, from this run's figures. */
function speedSummary(results: BenchResults): string {
  const rows: string[][] = [['speed target (issue 18)', 'measured', 'target', '']]
  for (const [method, { flashgateCached, floor, anvil }] of Object.entries(results.throughput)) {
    const ofFloor = flashgateCached.requestsPerSecond / floor.requestsPerSecond
    rows.push([`${method} cached / floor`, ratio(ofFloor), `≥ ${ratio(SPEED_TARGETS.cachedOfFloor)}`, verdict(ofFloor >= SPEED_TARGETS.cachedOfFloor)])
    const ofAnvil = flashgateCached.requestsPerSecond / anvil.requestsPerSecond
    rows.push([`${method} cached / anvil`, ratio(ofAnvil), `≥ ${ratio(SPEED_TARGETS.cachedOfAnvil)}`, verdict(ofAnvil >= SPEED_TARGETS.cachedOfAnvil)])
  }
  const receipts = results.throughput.eth_getBlockReceipts
  if (receipts?.flashgateUncached) {
    const ofAnvil = receipts.flashgateUncached.requestsPerSecond / receipts.anvil.requestsPerSecond
    rows.push([
      'eth_getBlockReceipts no cache / anvil',
      ratio(ofAnvil),
      `≥ ${ratio(SPEED_TARGETS.uncachedReceiptsOfAnvil)}`,
      verdict(ofAnvil >= SPEED_TARGETS.uncachedReceiptsOfAnvil),
    ])
  }
  // Beside it, the same requests as Node's fetch (viem) and ethers send them, accepting compressed answers.
  for (const [key, client] of [
    ['asFetchSends', 'fetch'],
    ['asEthersSends', 'ethers'],
  ] as const) {
    const figures = receipts?.[key]
    if (!figures) continue
    const ofAnvil = figures.flashgateUncached.requestsPerSecond / figures.anvil.requestsPerSecond
    rows.push([
      `eth_getBlockReceipts no cache / anvil, as ${client} sends`,
      ratio(ofAnvil),
      `≥ ${ratio(SPEED_TARGETS.uncachedReceiptsOfAnvil)}`,
      verdict(ofAnvil >= SPEED_TARGETS.uncachedReceiptsOfAnvil),
    ])
  }
  const p99 = results.pending.feedToVisible.p99Ms
  rows.push([
    'flashblock frame → visible p99',
    `${ms(p99)} ms`,
    `< ${SPEED_TARGETS.flashblockToVisibleP99Ms} ms`,
    verdict(p99 < SPEED_TARGETS.flashblockToVisibleP99Ms),
  ])
  const written = results.writePath.logsPerSecond
  rows.push([
    'write path',
    `${integer(written)} logs/s`,
    `≥ ${integer(SPEED_TARGETS.writeLogsPerSecond)} logs/s`,
    verdict(written >= SPEED_TARGETS.writeLogsPerSecond),
  ])
  return table(rows, (column) => column === 1 || column === 2)
}

export function writeResults(path: string, results: BenchResults) {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, `${JSON.stringify(results, null, 2)}\n`)
}
