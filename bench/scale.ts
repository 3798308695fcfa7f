import { statfsSync } from 'node:fs'
import { cpus, loadavg, totalmem } from 'node:os'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { createDb, type Db } from '../src/db/index.js'
import { createCleanup } from './cleanup.js'
import { keptClusterHint, type ScaleCluster, startScaleCluster } from './scale-cluster.js'
import { BLOCK_TIME_S, createScaleLoader, FIRST_BLOCK, POPULATION, type LoadScope, type ScaleLoader, TRANSACTIONS_PER_BLOCK } from './scale-data.js'
import { LAYOUTS, type ScaleLayout } from './scale-layouts.js'
import { explainLogQueries, HEADLINE_RANGE_BLOCKS, measureQueries, measureSizes, QUERY_SERIES, TOPIC_ONLY_RANGE_BLOCKS } from './scale-measure.js'
import { formatScaleTable, type ScaleResults, type ScaleRun, writeScaleResults } from './scale-report.js'

/**
 * `npm run bench -- --scale`: flashgate's tables at 10M, 50M and 100M logs of synthetic Base-shaped history
 * (scale-data.ts), on a throwaway Postgres of its own (scale-cluster.ts). At each size, after `VACUUM ANALYZE`:
 * table and index sizes, bytes per log, and the latencies of the real resolvers (scale-measure.ts). Each
 * layout (scale-layouts.ts) grows in a database of its own, with the same rows, one layout after the other.
 * A size the disk cannot hold is skipped, saying so; `--scope logs` loads only what `eth_getLogs` reads, for
 * the sizes whose whole history would not fit.
 */

const DEFAULT_SIZES = [10_000_000, 50_000_000, 100_000_000]
const DEFAULT_QUERIES = 200
const DEFAULT_SEED = 14
/** A step (growing one layout to the next size) is cut short after this long and measured as it is. */
const DEFAULT_MAX_STEP_MINUTES = 60
/** Free disk kept for everyone else on the machine (and Postgres' WAL): a step that would eat into it is skipped. */
const DISK_RESERVE_BYTES = 10 * 2 ** 30
/** A step that finds less free disk than this (others write to it too) stops loading and is measured as it is. */
const DISK_FLOOR_BYTES = 6 * 2 ** 30
/** Bytes per log assumed before a layout's first measurement (by `--scope`), and the margin on a measured figure. */
const FIRST_BYTES_PER_LOG_GUESS: Record<LoadScope, number> = { all: 1_200, logs: 550 }
const GROWTH_MARGIN = 1.15
/** Resolver connections; statements may take long at 100M logs, but not forever. */
const RESOLVER_POOL_SIZE = 4
const RESOLVER_STATEMENT_TIMEOUT_MS = 120_000
const PROGRESS_EVERY_CHUNKS = 20
const RESULTS_PATH = fileURLToPath(new URL('./results/scale.json', import.meta.url))

const USAGE = `npm run bench -- --scale [--sizes 10M,50M,100M] [--layout current[,${Object.keys(LAYOUTS)
  .filter((name) => name !== 'current')
  .join(',')}]] [--scope all|logs] [--keep] [--queries N] [--max-step-minutes M] [--results PATH]`

type ScaleOptions = {
  sizes: number[]
  layouts: ScaleLayout[]
  scope: LoadScope
  keep: boolean
  queries: number
  seed: number
  maxStepMinutes: number
  resultsPath: string
}

function parseSize(text: string): number {
  const match = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(text.trim())
  if (match === null) throw new Error(`--sizes: "${text}" is not a count like 10M or 500k\n${USAGE}`)
  const unit = { '': 1, k: 1e3, K: 1e3, m: 1e6, M: 1e6 }[match[2]!]!
  return Math.round(Number(match[1]) * unit)
}

function parseScaleOptions(argv: string[]): ScaleOptions {
  const { values } = parseArgs({
    args: argv.filter((argument) => argument !== '--scale'),
    options: {
      sizes: { type: 'string' },
      layout: { type: 'string', default: 'current' },
      scope: { type: 'string', default: 'all' },
      keep: { type: 'boolean', default: false },
      queries: { type: 'string', default: String(DEFAULT_QUERIES) },
      seed: { type: 'string', default: String(DEFAULT_SEED) },
      'max-step-minutes': { type: 'string', default: String(DEFAULT_MAX_STEP_MINUTES) },
      results: { type: 'string', default: RESULTS_PATH },
    },
  })
  const sizes = values.sizes === undefined ? DEFAULT_SIZES : values.sizes.split(',').map(parseSize)
  const layouts = values.layout.split(',').map((name) => {
    const layout = LAYOUTS[name.trim()]
    if (layout === undefined) throw new Error(`--layout: unknown layout "${name}" (known: ${Object.keys(LAYOUTS).join(', ')})\n${USAGE}`)
    return layout
  })
  if (values.scope !== 'all' && values.scope !== 'logs') throw new Error(`--scope: "${values.scope}" is neither all nor logs\n${USAGE}`)
  return {
    scope: values.scope,
    sizes: [...sizes].sort((left, right) => left - right),
    layouts,
    keep: values.keep,
    queries: Number(values.queries),
    seed: Number(values.seed),
    maxStepMinutes: Number(values['max-step-minutes']),
    resultsPath: values.results,
  }
}

/** One layout's database as it grows. */
type Grower = {
  layout: ScaleLayout
  directory: string
  db: Db
  sql: postgres.Sql
  loader: ScaleLoader
  loadSeconds: number
  last: ScaleRun | null
  done: boolean
}

function freeDiskBytes(path: string): number {
  const stats = statfsSync(path)
  return stats.bavail * stats.bsize
}

/** Why growing `grower` to `target` logs would leave too little disk, or `null` when it fits. */
function diskShortfall(grower: Grower, target: number, scope: LoadScope): string | null {
  const bytesPerLog = grower.last?.bytesPerLog ?? FIRST_BYTES_PER_LOG_GUESS[scope]
  const neededBytes = (target - grower.loader.counts().logs) * bytesPerLog * GROWTH_MARGIN
  const freeBytes = freeDiskBytes(grower.directory)
  if (freeBytes - neededBytes >= DISK_RESERVE_BYTES) return null
  const gibibytes = (bytes: number) => (bytes / 2 ** 30).toFixed(0)
  return `needs ~${gibibytes(neededBytes)} GiB more at ${bytesPerLog.toFixed(0)} B/log; ${gibibytes(freeBytes)} GiB free and ${gibibytes(DISK_RESERVE_BYTES)} GiB kept for others`
}

export async function runScaleBench(argv: string[]): Promise<number> {
  const options = parseScaleOptions(argv)
  const log = (line: string) => console.log(line)
  const started = performance.now()
  const stamp = (line: string) => log(`[${((performance.now() - started) / 1000).toFixed(0).padStart(5)} s] ${line}`)
  const cleanup = createCleanup(log)
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      log(`\nreceived ${signal}; cleaning up`)
      void cleanup.run().finally(() => process.exit(130))
    })

  const results: ScaleResults = {
    startedAt: new Date().toISOString(),
    totalSeconds: 0,
    argv,
    environment: { cpus: cpus().length, memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version, loadAverageAtStart: loadavg()[0] },
    shape: {
      blockTimeS: BLOCK_TIME_S,
      transactionsPerBlock: TRANSACTIONS_PER_BLOCK,
      firstBlock: FIRST_BLOCK,
      population: POPULATION,
      headlineRangeBlocks: HEADLINE_RANGE_BLOCKS,
      topicOnlyRangeBlocks: TOPIC_ONLY_RANGE_BLOCKS,
      queriesPerSeries: options.queries,
      scope: options.scope,
      answerCache: 'off (every call reads the database)',
    },
    layouts: Object.fromEntries(options.layouts.map((layout) => [layout.name, layout.summary])),
    runs: [],
    skipped: [],
  }
  const save = () => {
    results.totalSeconds = Math.round((performance.now() - started) / 1000)
    writeScaleResults(options.resultsPath, results)
  }

  let cluster: ScaleCluster | null = null
  try {
    stamp('starting a throwaway Postgres cluster')
    cluster = await startScaleCluster()
    const startedCluster = cluster
    cleanup.defer('cluster', () => startedCluster.close({ keep: options.keep }))
    results.environment.postgres = await cluster.settings()
    stamp(`cluster in ${cluster.directory} (${(freeDiskBytes(cluster.directory) / 2 ** 30).toFixed(0)} GiB free)`)

    // One layout at a time, through every size, its database dropped before the next: the disk holds one
    // layout's history, not all of them.
    for (const layout of options.layouts) {
      const databaseName = `scale_${layout.name.replace(/\W/g, '_')}`
      const databaseUrl = await startedCluster.createDatabase(databaseName)
      const db = await createDb({ databaseUrl, poolSize: RESOLVER_POOL_SIZE, statementTimeoutMs: RESOLVER_STATEMENT_TIMEOUT_MS })
      const sql = postgres(databaseUrl, { max: 2, onnotice: () => {}, connection: { application_name: 'flashgate-scale-load' } })
      const closeConnections = async () => {
        await db.close()
        await sql.end({ timeout: 5 })
      }
      cleanup.defer(`${layout.name} connections`, closeConnections)
      if (layout.setup !== '') await sql.unsafe(layout.setup)
      const grower: Grower = {
        layout,
        directory: startedCluster.directory,
        db,
        sql,
        loader: await createScaleLoader({ sql, db, layout, scope: options.scope }),
        loadSeconds: 0,
        last: null,
        done: false,
      }
      for (const target of options.sizes) {
        const skip = (reason: string) => {
          stamp(`${layout.name} @ ${target.toLocaleString('en-US')} logs: skipped (${reason})`)
          results.skipped.push({ layout: layout.name, targetLogs: target, reason })
          save()
        }
        if (grower.done) {
          skip('an earlier step of this layout was cut short')
          continue
        }
        const shortfall = diskShortfall(grower, target, options.scope)
        if (shortfall !== null) {
          skip(shortfall)
          continue
        }
        results.runs.push(await growAndMeasure(grower, target, options, stamp))
        save()
        log(formatScaleTable(results.runs))
      }
      await closeConnections()
      if (!options.keep) await startedCluster.dropDatabase(databaseName)
    }
    save()
    stamp(`results written to ${options.resultsPath}`)
    log(formatScaleTable(results.runs))
    if (options.keep) log(`kept: ${cluster.directory}; start it again with\n  ${keptClusterHint(cluster.directory, cluster.port)}`)
    return 0
  } catch (error) {
    log(`scale bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
    return 1
  } finally {
    await cleanup.run()
  }
}

/** Grows one layout's database to `target` logs (or until the step deadline), then vacuums and measures it. */
async function growAndMeasure(grower: Grower, target: number, options: ScaleOptions, stamp: (line: string) => void): Promise<ScaleRun> {
  const { layout, loader, sql, db } = grower
  const deadline = performance.now() + options.maxStepMinutes * 60_000
  const stepStarted = performance.now()
  const logsBefore = loader.counts().logs
  stamp(`${layout.name}: loading to ${target.toLocaleString('en-US')} logs`)
  let chunks = 0
  let stopped: string | null = null
  while (loader.counts().logs < target) {
    if (performance.now() > deadline) {
      stopped = `step deadline (${options.maxStepMinutes} min) reached`
      break
    }
    if (freeDiskBytes(grower.directory) < DISK_FLOOR_BYTES) {
      stopped = `less than ${DISK_FLOOR_BYTES / 2 ** 30} GiB of disk left`
      break
    }
    await loader.loadChunk()
    if (++chunks % PROGRESS_EVERY_CHUNKS === 0) {
      const seconds = (performance.now() - stepStarted) / 1000
      const counts = loader.counts()
      stamp(
        `${layout.name}: ${(counts.logs / 1e6).toFixed(1)}M logs, ${counts.blocks} blocks (${Math.round((counts.logs - logsBefore) / seconds).toLocaleString('en-US')} logs/s)`,
      )
    }
  }
  const loadSeconds = (performance.now() - stepStarted) / 1000
  grower.loadSeconds += loadSeconds
  grower.done = stopped !== null
  const counts = loader.counts()
  stamp(
    `${layout.name}: ${counts.logs.toLocaleString('en-US')} logs in ${loadSeconds.toFixed(0)} s${stopped === null ? '' : ` (stopped: ${stopped})`}; VACUUM ANALYZE`,
  )

  const sealStarted = performance.now()
  const sealedRelations = (await layout.seal?.({ sql, db }, loader.nextBlock() - 1)) ?? 0
  const sealSeconds = (performance.now() - sealStarted) / 1000
  if (sealedRelations > 0) stamp(`${layout.name}: ${sealedRelations} sealed in ${sealSeconds.toFixed(0)} s`)

  const vacuumStarted = performance.now()
  await sql.unsafe('vacuum (analyze)')
  await sql.unsafe('checkpoint')
  const vacuumSeconds = (performance.now() - vacuumStarted) / 1000

  const measureStarted = performance.now()
  const loadAverage = loadavg()[0]!
  const tables = await measureSizes(sql, layout, counts.logs)
  const totalBytes = Object.values(tables).reduce((sum, size) => sum + size.totalBytes, 0)
  const head = loader.nextBlock() - 1
  stamp(`${layout.name}: ${(totalBytes / 2 ** 30).toFixed(1)} GiB, ${(totalBytes / counts.logs).toFixed(0)} B/log; measuring queries`)
  // `--scope logs` holds only what eth_getLogs reads. One seed for every size and layout: the same ranks and
  // accounts are asked for, so figures differ by the data, not by the draws.
  const series = options.scope === 'all' ? QUERY_SERIES : (['headlineLogs', 'topicOnlyLogs', 'blockLogs'] as const)
  const queries = await measureQueries({ db, sql, firstBlock: FIRST_BLOCK, head, queries: options.queries, seed: options.seed, series })
  const plans = await explainLogQueries(sql, head, FIRST_BLOCK)
  const run: ScaleRun = {
    layout: layout.name,
    scope: options.scope,
    targetLogs: target,
    loaded: counts,
    stopped,
    loadSeconds: Math.round(loadSeconds),
    cumulativeLoadSeconds: Math.round(grower.loadSeconds),
    vacuumSeconds: Math.round(vacuumSeconds),
    ...(layout.seal && { sealed: { relations: sealedRelations, seconds: Math.round(sealSeconds) } }),
    measureSeconds: Math.round((performance.now() - measureStarted) / 1000),
    tables,
    totalBytes,
    bytesPerLog: totalBytes / counts.logs,
    queries,
    plans,
    loadAverageBeforeQueries: Math.round(loadAverage * 100) / 100,
  }
  grower.last = run
  return run
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.exit(await runScaleBench(process.argv.slice(2)))
}
