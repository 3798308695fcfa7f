import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** Time a load worker gets beyond its run (start-up, draining) before it is killed. */
const WORKER_GRACE_MS = 60_000
const WORKER_PATH = fileURLToPath(new URL('./follow-load-worker.ts', import.meta.url))

export type FollowLoadJob = {
  /** A dedicated JSON-RPC endpoint (eth_getBlockReceipts is refused on the public one). */
  rpcUrl: string
  graphqlUrl: string
  durationS: number
  /** Requests a second, sent whatever the answers' pace (at most `connections` in flight); 0 for a closed loop. */
  ratePerSecond: number
  connections: number
  contracts: { tokens: string[]; pools: string[] }
  senders: string[]
  /** The devnet profile's seed: the long tail's addresses follow from it. */
  profileSeed: number
  seed: number
}

export type MethodFigures = {
  requests: number
  requestsPerSecond: number
  p50Ms: number
  p90Ms: number
  p99Ms: number
  maxMs: number
  /** HTTP errors, JSON-RPC errors, GraphQL errors, timeouts. */
  failures: number
  meanKiB: number
}

export type FollowLoadReport = {
  seconds: number
  ratePerSecond: number
  connections: number
  /** Open loop: requests due while every connection was busy, not sent (the gateway fell behind the rate). */
  behind: number
  total: MethodFigures
  methods: Record<string, MethodFigures>
  perMinute: { minute: number; requestsPerSecond: number; p99Ms: number }[]
  failureSamples: string[]
}

/** Runs the mixed read load in a child process; `onWorker` learns its pid (for CPU and memory). */
export function runFollowLoad(job: FollowLoadJob, onWorker: (child: ChildProcess) => void): Promise<FollowLoadReport> {
  return new Promise((resolve, reject) => {
    const child = fork(WORKER_PATH, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    onWorker(child)
    let settled = false
    const settle = (fn: () => void) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      fn()
    }
    const timer = setTimeout(
      () => {
        child.kill('SIGKILL')
        settle(() => reject(new Error(`follow load worker did not finish within ${job.durationS} s + ${WORKER_GRACE_MS} ms`)))
      },
      job.durationS * 1000 + WORKER_GRACE_MS,
    )
    child.once('message', (message: FollowLoadReport | { error: string }) =>
      settle(() => ('error' in message ? reject(new Error(`follow load worker: ${message.error}`)) : resolve(message))),
    )
    child.once('error', (error) => settle(() => reject(error)))
    child.once('exit', (code) => settle(() => reject(new Error(`follow load worker exited with code ${code} before reporting`))))
    child.send(job)
  })
}
