import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { FollowOptions } from './follow.js'
import type { FollowLoadReport } from './follow-load.js'
import type { ProcessFigures } from './follow-processes.js'
import { type ProbeFigures, type Summary, summarise } from './follow-probes.js'

export type FollowResults = {
  startedAt: string
  options: FollowOptions
  environment: { node: string; cpus: number; loadAverage: { atStart: number; atEnd: number }; database: string }
  chain: {
    blocks: number
    transactionsPerBlock: Summary
    logsPerBlockSampled: number[]
    profile: { sent: number; refused: number; attributedTotal: number }
  }
  probes: ProbeFigures
  load: FollowLoadReport
  processes: Record<string, ProcessFigures>
  gatewayStatus: Record<string, unknown>
  /** The gateway's /readyz at the end: ingest and pending (hydration lag) as it reports them. */
  gatewayReadiness: unknown
}

const integer = (value: number) => (Number.isNaN(value) ? '-' : Math.round(value).toLocaleString('en-US'))
const ms = (value: number) => (Number.isNaN(value) ? '-' : value < 10 ? value.toFixed(2) : value.toFixed(1))
const spread = (summary: Summary, unit: string, format = ms) =>
  `p50 ${format(summary.p50)}${unit}, p99 ${format(summary.p99)}${unit}, max ${format(summary.max)}${unit} (${integer(summary.samples)} samples)`

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows.map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ')).join('\n')
}

export function formatFollowReport(results: FollowResults): string {
  const { chain, probes, load, processes, environment, options } = results
  const logs = summarise(chain.logsPerBlockSampled)
  const lines: string[] = []
  lines.push(`flashgate follow bench: the base profile for ${options.durationS} s on ${environment.database}`)
  lines.push(
    `  node ${environment.node}, ${environment.cpus} CPUs, load average ${environment.loadAverage.atStart.toFixed(2)} at start, ${environment.loadAverage.atEnd.toFixed(2)} at end`,
  )
  lines.push(
    `chain: ${integer(chain.blocks)} blocks in the window, ${integer(chain.transactionsPerBlock.mean)} transactions a block (p50 ${integer(chain.transactionsPerBlock.p50)}), ` +
      `${integer(logs.mean)} logs a block (${logs.samples} blocks read back); the profile sent ${integer(chain.profile.sent)} transactions, ${chain.profile.refused} refused`,
  )
  lines.push('')
  lines.push(`ingest lag, devnet head − gateway head, sampled every 250 ms: ${spread(probes.ingestLagBlocks, ' blocks', integer)}`)
  lines.push(`ingest lag, sealing flashblock → gateway newHeads: ${spread(probes.ingestLagMs, ' ms')}`)
  lines.push(`  of which the devnet: one block's ingest calls (block, receipts, prestate trace) ${spread(probes.upstreamBlockFetchMs, ' ms')}`)
  lines.push(`pending, flashblock frame → its transactions announced (newFlashblockTransactions): ${spread(probes.frameToTransactionsVisibleMs, ' ms')}`)
  lines.push(`pending, flashblock frame → its receipts hydrated (first pendingLogs swap log): ${spread(probes.frameToLogsVisibleMs, ' ms')}`)
  const pending = (
    results.gatewayReadiness as {
      pending?: { mode?: string; source?: string; hydrationLagMs?: { p50: number; p99: number }; hydrationFailures?: number }
    } | null
  )?.pending
  if (pending?.hydrationLagMs)
    lines.push(
      `  the gateway's own view (/readyz): pending ${pending.mode}/${pending.source}, hydration lag p50 ${ms(pending.hydrationLagMs.p50)} ms, p99 ${ms(pending.hydrationLagMs.p99)} ms, ${pending.hydrationFailures ?? 0} hydration failures`,
    )
  lines.push(
    `  ${integer(probes.framesWithTransactions)} flashblocks with transactions, ${probes.framesNotAnnounced} not announced in full, ${probes.notificationsBeforeFrame} notifications before the bench had the frame`,
  )
  lines.push('')
  const mode =
    load.ratePerSecond === 0
      ? `closed loop, ${load.connections} in flight`
      : `${load.ratePerSecond} req/s asked, at most ${load.connections} in flight, ${integer(load.behind)} not sent for want of a free connection`
  lines.push(`reads (${mode}): ${integer(load.total.requestsPerSecond)} req/s over ${load.seconds.toFixed(0)} s, ${load.total.failures} failures`)
  const rows = [['method', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'KiB/answer', 'failures']]
  for (const [method, figures] of [...Object.entries(load.methods), ['all', load.total] as const]) {
    rows.push([
      method,
      figures.requestsPerSecond.toFixed(1),
      ms(figures.p50Ms),
      ms(figures.p90Ms),
      ms(figures.p99Ms),
      ms(figures.maxMs),
      figures.meanKiB.toFixed(1),
      String(figures.failures),
    ])
  }
  lines.push(table(rows))
  if (load.perMinute.length > 1)
    lines.push(`  per minute, req/s and p99 ms: ${load.perMinute.map((window) => `${integer(window.requestsPerSecond)}/${ms(window.p99Ms)}`).join(' ')}`)
  for (const sample of load.failureSamples) lines.push(`  failure: ${sample}`)
  lines.push('')
  const processRows = [['process', 'CPU % of a core', 'CPU s', 'RSS mean MiB', 'RSS max MiB']]
  for (const [name, figures] of Object.entries(processes)) {
    processRows.push([name, figures.cpuPercent.toFixed(1), figures.cpuSeconds.toFixed(1), figures.rssMeanMiB.toFixed(0), figures.rssMaxMiB.toFixed(0)])
  }
  lines.push(table(processRows))
  lines.push("  (CPU summed over each group's processes; RSS without shared memory, so Postgres' shared buffers are not counted once per backend)")
  return lines.join('\n')
}

export function writeFollowResults(path: string, results: FollowResults) {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, `${JSON.stringify(results, null, 2)}\n`)
}
