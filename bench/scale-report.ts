import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { LoadedCounts } from './scale-data.js'
import type { BlockTable } from './scale-layouts.js'
import type { LatencyFigures, QuerySeries, TableSize } from './scale-measure.js'

/** Issue 14's targets. */
export const SCALE_TARGETS = { headlineP50Ms: 5, bytesPerLog: 250 } as const

export type ScaleRun = {
  layout: string
  /** `logs`: only what eth_getLogs reads was loaded (`--scope logs`); bytes per log then cover those tables. */
  scope: 'all' | 'logs'
  targetLogs: number
  loaded: LoadedCounts
  /** Why loading was cut short (step deadline, disk), measured at what was loaded; `null` when it reached its size. */
  stopped: string | null
  /** Loading this step (from the previous size) and the whole history so far. */
  loadSeconds: number
  cumulativeLoadSeconds: number
  vacuumSeconds: number
  /** What the layout's `seal` rewrote after loading (layouts that have one), and how long it took. */
  sealed?: { relations: number; seconds: number }
  measureSeconds: number
  tables: Record<BlockTable, TableSize>
  totalBytes: number
  bytesPerLog: number
  queries: Partial<Record<QuerySeries, LatencyFigures>>
  /** `EXPLAIN (ANALYZE, BUFFERS)` of a headline and a topic-only query. */
  plans: { headline: string[]; topicOnly: string[] }
  /** 1-minute load average when the queries started: others share the 2 CPUs, and p99s show it. */
  loadAverageBeforeQueries: number
}

export type ScaleResults = {
  startedAt: string
  totalSeconds: number
  argv: string[]
  environment: Record<string, unknown>
  shape: Record<string, unknown>
  layouts: Record<string, string>
  runs: ScaleRun[]
  /** Steps not run, and why (disk, time). */
  skipped: { layout: string; targetLogs: number; reason: string }[]
}

export function writeScaleResults(path: string, results: ScaleResults): void {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, `${JSON.stringify(results, null, 2)}\n`)
}

const millions = (count: number) => `${(count / 1e6).toFixed(count < 1e7 ? 2 : 1)}M`
const gigabytes = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GiB`
const latency = (figures: LatencyFigures | undefined) => (figures === undefined ? '-' : `${figures.p50Ms.toFixed(2)} / ${figures.p99Ms.toFixed(1)}`)

/** One line per run: sizes, bytes per log by table, and p50 / p99 of each query series (ms). */
export function formatScaleTable(runs: ScaleRun[]): string {
  const header = [
    'layout',
    'logs',
    'total',
    'B/log',
    'logs',
    'txs',
    'blk_txs',
    'blk_rcpts',
    'acct',
    'blocks',
    'getLogs addr+t0',
    'topic-only',
    'block logs',
    'blockReceipts',
    'tx by hash',
    'receipt by hash',
    'acct hot',
    'acct tail',
    'load s',
  ]
  const rows = runs.map((run) => [
    run.layout,
    `${millions(run.loaded.logs)}${run.stopped === null ? '' : ' (stopped)'}${run.scope === 'logs' ? ' (logs only)' : ''}`,
    gigabytes(run.totalBytes),
    run.bytesPerLog.toFixed(0),
    run.tables.logs.bytesPerLog.toFixed(0),
    run.tables.transactions.bytesPerLog.toFixed(0),
    run.tables.block_transactions.bytesPerLog.toFixed(0),
    run.tables.block_receipts.bytesPerLog.toFixed(0),
    run.tables.account_changes.bytesPerLog.toFixed(0),
    run.tables.blocks.bytesPerLog.toFixed(0),
    latency(run.queries.headlineLogs),
    latency(run.queries.topicOnlyLogs),
    latency(run.queries.blockLogs),
    latency(run.queries.blockReceipts),
    latency(run.queries.transactionByHash),
    latency(run.queries.receiptByHash),
    latency(run.queries.accountsHot),
    latency(run.queries.accountsTail),
    run.cumulativeLoadSeconds.toFixed(0),
  ])
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)))
  const line = (cells: string[]) => cells.map((cell, column) => cell.padEnd(widths[column]!)).join('  ')
  return [
    `bytes per log (B/log) by table; latencies p50 / p99 in ms (targets: getLogs p50 < ${SCALE_TARGETS.headlineP50Ms} ms, ≤ ${SCALE_TARGETS.bytesPerLog} B/log)`,
    line(header),
    ...rows.map(line),
  ].join('\n')
}
