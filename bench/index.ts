import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { pino } from 'pino'
import type { Gateway } from '../src/app.js'
import { startAnvil } from '../src/devnet/anvil.js'
import { runAttributionBench } from './attribution.js'
import { measureBackfill, measureWritePath, waitUntilSealed } from './backfill.js'
import { generateChain } from './chain.js'
import { createCleanup } from './cleanup.js'
import { checkpoint, createBenchDatabase, describePostgres } from './databases.js'
import { killLoadWorkers } from './load.js'
import { describeStorage, explainAddressTopicQuery } from './logs-plan.js'
import { parseBenchOptions } from './options.js'
import { type BenchResults, formatReport, writeResults } from './report.js'
import { createRpcClient } from './rpc.js'
import { measurePendingApart } from './pending.js'
import { measureServing } from './serving.js'
import { startFloorServer } from './floor.js'
import { measureWorkers, startServeProcess, type WorkersFigures } from './workers.js'

/**
 * anvil drops historical states beyond a few thousand blocks (old `eth_getBalance` and traces then fail);
 * keep them all, on disk, so that both targets can answer for every block of the chain.
 */
const ANVIL_PERSISTED_STATES = 1_000_000
/** A 1-minute load average above this at the start means other work shares the CPUs with the bench. */
const BUSY_LOAD_AVERAGE = 0.5
/** Full runs; a `--quick` smoke run writes beside it, so it never replaces the full figures. */
const RESULTS_PATH = fileURLToPath(new URL('./results/latest.json', import.meta.url))
const QUICK_RESULTS_PATH = fileURLToPath(new URL('./results/latest-quick.json', import.meta.url))

const log = (line: string) => console.log(line)

/** CPUs this idle (a share of their time) count as settled; waited for at most `SETTLE_MAX_MS`. */
const SETTLED_IDLE_SHARE = 0.9
const SETTLE_SAMPLE_MS = 1_000
const SETTLE_MAX_MS = 30_000

/** The CPUs' idle share over one sample, from the kernel's counters. */
async function idleShare(): Promise<number> {
  const total = (times: ReturnType<typeof cpus>) =>
    times.reduce((sum, cpu) => ({ idle: sum.idle + cpu.times.idle, all: sum.all + Object.values(cpu.times).reduce((a, b) => a + b, 0) }), { idle: 0, all: 0 })
  const before = total(cpus())
  await new Promise((resolve) => setTimeout(resolve, SETTLE_SAMPLE_MS))
  const after = total(cpus())
  return (after.idle - before.idle) / Math.max(1, after.all - before.all)
}

/** Waits until the CPUs are mostly idle, or `SETTLE_MAX_MS`; says how long it waited and how idle they were. */
async function settleCpus(): Promise<{ waitedMs: number; idle: number }> {
  const started = performance.now()
  let idle = await idleShare()
  while (idle < SETTLED_IDLE_SHARE && performance.now() - started < SETTLE_MAX_MS) idle = await idleShare()
  return { waitedMs: Math.round(performance.now() - started), idle }
}

async function main(): Promise<number> {
  const options = parseBenchOptions(process.argv.slice(2))
  const startedAt = new Date()
  const started = performance.now()
  const stamp = (line: string) => log(`[${((performance.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}`)
  const cleanup = createCleanup(log)
  let aborting = false
  const abort = (reason: string, code: number) => {
    if (aborting) return
    aborting = true
    log(`\n${reason}; cleaning up`)
    void cleanup.run().finally(() => process.exit(code))
  }
  // `on`, not `once`: src/devnet/anvil.ts re-raises a signal that no one else listens to, killing us mid-cleanup.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => abort(`received ${signal}`, 130))
  setTimeout(() => abort(`bench exceeded its ${options.deadlineMs / 60_000} min deadline`, 1), options.deadlineMs).unref()
  const logger = pino({ level: process.env.BENCH_LOG_LEVEL ?? 'warn' }, pino.destination(2))
  /** Each Postgres phase starts with what the one before wrote flushed (bench/databases.ts checkpoint). */
  const quiet = async (databaseUrl: string) => {
    if (!(await checkpoint(databaseUrl))) log('  note: CHECKPOINT refused (not a superuser): a checkpoint may run during the next figures')
  }
  const loadAtStart = loadavg()[0]!
  if (loadAtStart > BUSY_LOAD_AVERAGE) log(`note: load average ${loadAtStart.toFixed(2)} at start: other processes share the CPUs`)

  try {
    const workDir = mkdtempSync(join(tmpdir(), 'flashgate-bench-'))
    cleanup.defer('work directory', () => rmSync(workDir, { recursive: true, force: true }))
    cleanup.defer('load workers', killLoadWorkers)

    stamp(`anvil: generating a chain of ${options.logs.toLocaleString('en-US')} logs`)
    const anvil = await startAnvil({
      noMining: true,
      extraArgs: ['--order', 'fifo', '--max-persisted-states', String(ANVIL_PERSISTED_STATES), '--cache-path', join(workDir, 'anvil-states')],
    })
    cleanup.defer('anvil', anvil.stop)
    const anvilVersion = await createRpcClient(anvil.rpcUrl).call<string>('web3_clientVersion')
    const chain = await generateChain({ rpcUrl: anvil.rpcUrl, targetLogs: options.logs, seed: options.seed, log })
    stamp(`chain: ${chain.head + 1} blocks, ${chain.logs.toLocaleString('en-US')} logs, ${chain.transactions} txs in ${chain.seconds.toFixed(1)} s`)

    const gatewayDatabase = await createBenchDatabase(options)
    cleanup.defer(`drop ${gatewayDatabase.label}`, gatewayDatabase.drop)
    stamp(`backfill: gateway on ${gatewayDatabase.label}`)
    let gateway: Gateway | undefined
    const backfill = await measureBackfill({
      rpcUrl: anvil.rpcUrl,
      databaseUrl: gatewayDatabase.databaseUrl,
      head: chain.head,
      logs: chain.logs,
      logger,
      log,
      onGateway: (running) => {
        gateway = running
        cleanup.defer('gateway', running.stop)
      },
    })
    gateway = gateway!
    stamp(`backfill: ${backfill.result.seconds.toFixed(1)} s, ${Math.round(backfill.result.logsPerSecond)} logs/s`)
    if (!options.pglite) {
      const waited = await waitUntilSealed({ databaseUrl: gatewayDatabase.databaseUrl, head: chain.head })
      stamp(
        waited === null
          ? 'sealing: partitions still unsealed after 5 min; measuring anyway'
          : `sealing: the backfill's partitions sealed (waited ${waited.toFixed(1)} s)`,
      )
      await quiet(gatewayDatabase.databaseUrl)
    }

    // The gateway keeps following anvil, which mines nothing more: its ingester idles from here on.
    const writeDatabase = await createBenchDatabase(options)
    cleanup.defer(`drop ${writeDatabase.label}`, writeDatabase.drop)
    stamp(`write path: writeBlocks into ${writeDatabase.label}`)
    const writePath = await measureWritePath({
      rpcUrl: anvil.rpcUrl,
      databaseUrl: writeDatabase.databaseUrl,
      head: chain.head,
      bareBackfill: !options.pglite,
      log,
    })
    await writeDatabase.drop()
    stamp(`write path: ${Math.round(writePath.logsPerSecond)} logs/s`)
    if (!options.pglite) await quiet(gatewayDatabase.databaseUrl)

    // A second, serving-only gateway on the same database with no answer cache: every answer comes from
    // Postgres. It runs as `flashgate serve` in a process of its own, as anvil and the floor do and as
    // flashgate is deployed, not in this process beside the bench and the ingesting gateway. PGlite is one
    // process's database, so only the Postgres run has it.
    const uncached = options.pglite
      ? null
      : await startServeProcess({ databaseUrl: gatewayDatabase.databaseUrl, anvilUrl: anvil.rpcUrl, workers: 1, answerCacheMb: 0 })
    if (uncached !== null) cleanup.defer('uncached serving process', uncached.stop)

    stamp('serving: flashgate vs anvil vs the floor (a bare Node server)')
    const floor = await startFloorServer()
    cleanup.defer('floor server', floor.stop)
    const uncachedUrl = uncached === null ? null : `${uncached.url}/rpc/${backfill.apiKey}`
    // The cached figures, set against the floor, come from `flashgate serve` in a process of its own, as the
    // floor and anvil run and as flashgate is deployed: the gateway in this process shares its heap with the
    // bench. PGlite is one process's database, so there the gateway in this process answers them.
    const cachedServer = options.pglite ? null : await startServeProcess({ databaseUrl: gatewayDatabase.databaseUrl, anvilUrl: anvil.rpcUrl, workers: 1 })
    if (cachedServer !== null) cleanup.defer('cached serving process', cachedServer.stop)
    const serving = await measureServing({
      gatewayUrl: backfill.servingUrl,
      cachedUrl: cachedServer === null ? backfill.servingUrl : `${cachedServer.url}/rpc/${backfill.apiKey}`,
      uncachedUrl,
      anvilUrl: anvil.rpcUrl,
      floor,
      chain,
      options,
      workDir,
      log,
    })
    floor.stop()
    await cachedServer?.stop()
    // Stopped before the pending measurement, which wants a quiet machine.
    await uncached?.stop()

    // `serve --workers N` needs a database several processes share: Postgres only.
    let workers: WorkersFigures | null = null
    if (!options.pglite) {
      stamp('workers: flashgate serve --workers 1 and 2 (processes of their own)')
      workers = await measureWorkers({
        databaseUrl: gatewayDatabase.databaseUrl,
        anvilUrl: anvil.rpcUrl,
        apiKey: backfill.apiKey,
        bodyFiles: serving.bodyFiles,
        options,
        log,
      })
    }

    // What the phases before started (worker processes draining, Postgres checkpointing the write path) winds
    // down first: the pending figures are flashgate's, not theirs.
    const settled = await settleCpus()
    stamp(`pending: flashblocks feed and devnet (CPUs ${Math.round(settled.idle * 100)}% idle after waiting ${(settled.waitedMs / 1000).toFixed(1)} s)`)
    const pending = await measurePendingApart(log)

    const postgresSettings = options.pglite ? null : await describePostgres(options.adminDatabaseUrl)
    const storage = await describeStorage(gateway.db)
    const headlinePlan = await explainAddressTopicQuery(gateway.db, serving.headlineSample)
    const results: BenchResults = {
      startedAt: startedAt.toISOString(),
      totalSeconds: (performance.now() - started) / 1000,
      options,
      environment: {
        node: `node ${process.version}`,
        cpus: cpus().length,
        loadAverage: { atStart: loadAtStart, atEnd: loadavg()[0]! },
        anvil: anvilVersion,
        database: postgresSettings === null ? 'PGlite' : `Postgres ${postgresSettings.server_version}`,
        postgresSettings,
        cpusBeforePending: settled,
      },
      chain: { ...chain, tokens: chain.tokens.length, accounts: chain.senders.length + chain.users.length },
      backfill: backfill.result,
      writePath,
      verification: serving.verification,
      throughput: serving.throughput,
      workers,
      headline: serving.headline,
      storage: { ...storage, headlinePlan },
      pending,
    }
    log('')
    log(formatReport(results))
    log(`\nquery plan of one headline query:\n  ${headlinePlan.join('\n  ')}`)
    const resultsPath = options.quick ? QUICK_RESULTS_PATH : RESULTS_PATH
    writeResults(resultsPath, results)
    log(`\nwrote ${resultsPath}`)
    stamp('attribution: registration throughput and indexing cost (bench/attribution.ts)')
    await runAttributionBench(options)
    return 0
  } catch (error) {
    // Once aborting, failures are the cleanup pulling things from under the run: not worth a stack trace.
    if (!aborting) log(`\nbench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
    return 1
  } finally {
    await cleanup.run()
  }
}

/** `--scale`, `--follow`, `--execute` and `--ponder` are benches of their own (bench/scale.ts, follow.ts, execute.ts, ponder.ts), loaded only when asked for. */
async function dispatch(argv: string[]): Promise<number> {
  const rest = (flag: string) => argv.filter((argument) => argument !== flag)
  if (argv.includes('--scale')) return (await import('./scale.js')).runScaleBench(rest('--scale'))
  if (argv.includes('--follow')) return (await import('./follow.js')).runFollowBench(rest('--follow'))
  if (argv.includes('--execute')) return (await import('./execute.js')).runExecuteBench(rest('--execute'))
  if (argv.includes('--ponder')) return (await import('./ponder.js')).runPonderBench(rest('--ponder'))
  return main()
}

process.exit(await dispatch(process.argv.slice(2)))
