import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { coresUsed, type ProcessTable, processTree, readProcesses } from './cpu.js'
import { type LoadReport, runLoad } from './load.js'
import type { BenchOptions } from './options.js'
import type { BenchMethod } from './queries.js'
import type { ServingFigures } from './serving.js'

const BIN = fileURLToPath(new URL('../bin/flashgate.js', import.meta.url))
/** A serving process that does not answer `/readyz` within this did not start. */
const START_TIMEOUT_MS = 60_000
/** What the scaling is measured on: a cached answer (CPU in flashgate alone) and a database read. */
export const WORKER_METHODS = [
  { method: 'eth_getBalance', pool: 'hot' },
  { method: 'eth_getBlockReceipts', pool: 'cold' },
] as const satisfies readonly { method: BenchMethod; pool: 'hot' | 'cold' }[]
export const WORKER_COUNTS = [1, 2] as const

/**
 * Cores each part of the machine used during one run (CPU seconds over the load's duration): the load
 * generator, flashgate's processes (the primary and its workers), Postgres, and the rest (anvil, the bench).
 */
export type CoresUsed = { loadGenerator: number; flashgate: number; postgres: number; other: number; busiestOthers: [string, number][] }

export type WorkersFigures = { workers: number; method: BenchMethod; pool: 'hot' | 'cold'; report: LoadReport; cores: CoresUsed }[]

/**
 * `flashgate serve --role serve --workers N` as a process of its own on the bench's database, at each
 * count of WORKER_COUNTS, under the same load as the throughput table (issue 18: "report throughput at 1
 * and 2 workers"). The load generator runs on the same machine and takes a core of its own.
 */
export async function measureWorkers({
  databaseUrl,
  anvilUrl,
  apiKey,
  bodyFiles,
  options,
  log,
}: {
  databaseUrl: string
  anvilUrl: string
  /** A dedicated key in that database: the same endpoint and limits as the throughput table. */
  apiKey: string
  bodyFiles: ServingFigures['bodyFiles']
  options: BenchOptions
  log: (line: string) => void
}): Promise<WorkersFigures> {
  const figures: WorkersFigures = []
  for (const workers of WORKER_COUNTS) {
    const serving = await startServeProcess({ databaseUrl, anvilUrl, workers })
    const { url } = serving
    try {
      for (const { method, pool } of WORKER_METHODS) {
        const bodiesFile = bodyFiles[pool](method)
        const before = readProcesses()
        const report = await runLoad({
          mode: 'throughput',
          url: `${url}/rpc/${apiKey}`,
          bodiesFile,
          durationS: options.loadDurationS,
          connections: options.connections,
        })
        const cores = coresOf(before, readProcesses(), serving.pid, report)
        figures.push({ workers, method, pool, report, cores })
        log(
          `  --workers ${workers}: ${method} (${pool}) ${Math.round(report.requestsPerSecond)} req/s, p99 ${report.p99Ms.toFixed(1)} ms, ${report.failures} failures; ${describeCores(cores)}`,
        )
      }
    } finally {
      await serving.stop()
    }
  }
  return figures
}

/**
 * Where the cores went during a run. The load generator counts its own CPU (it may be gone by the second
 * reading); the others are read from /proc. Each is divided by the load's duration: flashgate and Postgres work
 * only while the load runs, and the load generator's start-up before it is not in its own count.
 */
function coresOf(before: ProcessTable, after: ProcessTable, servePid: number, report: LoadReport): CoresUsed {
  const flashgate = processTree(after, servePid)
  // The load generator may not have exited yet: read from /proc, its count would include its start-up.
  const { cores, others } = coresUsed(before, after, report.seconds, (pid, name) =>
    pid === report.pid ? 'load generator' : flashgate.has(pid) ? 'flashgate' : name === 'postgres' ? 'postgres' : null,
  )
  return {
    loadGenerator: (report.cpuSeconds ?? 0) / report.seconds,
    flashgate: cores.flashgate ?? 0,
    postgres: cores.postgres ?? 0,
    other: cores.other ?? 0,
    busiestOthers: others.slice(0, BUSIEST_OTHERS),
  }
}

/** The processes of `other` a report names. */
const BUSIEST_OTHERS = 3

export function describeCores({ loadGenerator, flashgate, postgres, other, busiestOthers }: CoresUsed): string {
  const cores = (value: number) => value.toFixed(2)
  const named = busiestOthers.filter(([, used]) => used >= 0.01).map(([name, used]) => `${name} ${cores(used)}`)
  return `cores used: load generator ${cores(loadGenerator)}, flashgate ${cores(flashgate)}, Postgres ${cores(postgres)}, other ${cores(other)}${named.length > 0 ? ` (${named.join(', ')})` : ''}`
}

/**
 * `flashgate serve --role serve --workers N` on the bench's database, as a process of its own (as it is
 * deployed, and as the floor and anvil run), once it answers `/readyz`.
 */
export async function startServeProcess({
  databaseUrl,
  anvilUrl,
  workers,
  answerCacheMb,
}: {
  databaseUrl: string
  anvilUrl: string
  workers: number
  /** `--answer-cache-mb`: 0 for a process whose every answer reads the database; flashgate's default if absent. */
  answerCacheMb?: number
}): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const port = 20_000 + Math.floor(Math.random() * 20_000)
  const args = ['serve', '--role', 'serve', '--workers', String(workers), '--port', String(port), '--database-url', databaseUrl]
  args.push('--upstream-rpc', anvilUrl, '--public-rate-limit', '0', '--log-level', 'warn')
  if (answerCacheMb !== undefined) args.push('--answer-cache-mb', String(answerCacheMb))
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'ignore', 'inherit'] })
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
  }
  const url = `http://127.0.0.1:${port}`
  try {
    await waitUntilReady(url)
  } catch (error) {
    await stop()
    throw error
  }
  return { url, pid: child.pid!, stop }
}

async function waitUntilReady(url: string) {
  for (const deadline = Date.now() + START_TIMEOUT_MS; ; ) {
    const ready = await fetch(`${url}/readyz`).then(
      (response) => response.ok,
      () => false,
    )
    if (ready) return
    if (Date.now() > deadline) throw new Error(`flashgate at ${url} was not ready within ${START_TIMEOUT_MS} ms`)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}
