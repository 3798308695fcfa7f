import { type ChildProcess, fork } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Time a worker gets beyond its job's own duration (start-up, tsx, draining) before it is killed. */
const WORKER_GRACE_MS = 60_000
const WORKER_PATH = fileURLToPath(new URL('./load-worker.ts', import.meta.url))

export type LoadJob = {
  mode: 'throughput' | 'sequential'
  url: string
  /** Request bodies, one per line (see `writeBodies`); sent in order, wrapping around. */
  bodiesFile: string
  /** throughput: autocannon's duration; sequential: a cap on the time spent on `bodies`. */
  durationS: number
  connections: number
  /**
   * `Accept-Encoding` to send, as a real client does (Node's fetch, hence viem: `gzip, deflate`); none when
   * absent. Compressed answers are counted as they come, not decoded: an error answer is too small to be
   * compressed (src/http/compress.ts), so the check for `"error"` still finds every one.
   */
  acceptEncoding?: string
}

export type LoadReport = {
  requests: number
  seconds: number
  requestsPerSecond: number
  p50Ms: number
  p90Ms: number
  p99Ms: number
  meanMs: number
  /** Connection errors, timeouts, non-2xx and JSON-RPC error answers: must be 0 for a valid figure. */
  failures: number
  /** CPU seconds the load generator itself used (user + system) while it ran: how much of a core it took. */
  cpuSeconds?: number
  /** The load generator's process, which the machine's CPU readings leave to its own count (`cpuSeconds`). */
  pid?: number
}

const liveWorkers = new Set<ChildProcess>()

/** Writes JSON-RPC bodies for a load job, one per line (JSON never contains a raw newline). */
export function writeBodies(directory: string, name: string, bodies: string[]): string {
  const path = join(directory, `${name}.jsonl`)
  writeFileSync(path, bodies.join('\n'))
  return path
}

/** Kills any load worker still running (on abort). */
export function killLoadWorkers() {
  for (const child of liveWorkers) child.kill('SIGKILL')
  liveWorkers.clear()
}

/** Runs one load job in a child process (autocannon, or a one-in-flight loop) and returns its figures. */
export function runLoad(job: LoadJob): Promise<LoadReport> {
  return new Promise((resolve, reject) => {
    const child = fork(WORKER_PATH, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    liveWorkers.add(child)
    let settled = false
    const settle = (fn: () => void) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      liveWorkers.delete(child)
      fn()
    }
    const timer = setTimeout(
      () => {
        child.kill('SIGKILL')
        settle(() => reject(new Error(`load worker did not finish within ${job.durationS} s + ${WORKER_GRACE_MS} ms`)))
      },
      job.durationS * 1000 + WORKER_GRACE_MS,
    )
    child.once('message', (message: LoadReport | { error: string }) =>
      settle(() => ('error' in message ? reject(new Error(`load worker: ${message.error}`)) : resolve(message))),
    )
    child.once('error', (error) => settle(() => reject(error)))
    child.once('exit', (code) => settle(() => reject(new Error(`load worker exited with code ${code} before reporting`))))
    child.send(job)
  })
}

export type InterleavedReport = LoadReport & {
  /** Each round's requests per second, in the order run; the figure above is the median round's. */
  roundsRequestsPerSecond: number[]
}

/**
 * Untimed load each job of a pair gets before its timed rounds. Without it the first round of a server
 * measures its warm-up: V8 compiling its hot paths and its caches filling. flashgate's rounds rose round
 * after round (cached eth_getTransactionCount: 26,062, 30,371, 33,691 req/s) while the floor's, a few lines
 * of code, were flat from the first (38,500, 37,532, 40,833).
 */
export const WARM_UP_S = 2

/**
 * Jobs measured against each other on a shared machine: each first warmed up (`WARM_UP_S`, untimed), then run
 * in alternation, `rounds` times, each time in the reverse order of the time before (A B, B A, A B …), and
 * each reported by its median round. Run one after the other, a pair sees different noise (the machine's
 * load moves by 20–50% within a bench run, and a target's work winds down after its run); alternated, both
 * see the same.
 */
export async function runInterleaved<name extends string>(jobs: Record<name, LoadJob>, rounds: number): Promise<Record<name, InterleavedReport>> {
  const names = Object.keys(jobs) as name[]
  for (const key of names) await runLoad({ ...jobs[key], durationS: WARM_UP_S })
  const reports = Object.fromEntries(names.map((key) => [key, [] as LoadReport[]])) as Record<name, LoadReport[]>
  for (let round = 0; round < rounds; round++) {
    for (const key of round % 2 === 0 ? names : names.slice().reverse()) reports[key].push(await runLoad(jobs[key]))
  }
  const median = (runs: LoadReport[]): InterleavedReport => {
    const sorted = runs.slice().sort((a, b) => a.requestsPerSecond - b.requestsPerSecond)
    const middle = sorted[Math.floor(sorted.length / 2)]!
    // Failures of any round count: a figure is valid only if every round's answers were.
    const failures = runs.reduce((sum, run) => sum + run.failures, 0)
    return { ...middle, failures, roundsRequestsPerSecond: runs.map((run) => run.requestsPerSecond) }
  }
  return Object.fromEntries(names.map((key) => [key, median(reports[key])])) as Record<name, InterleavedReport>
}
