import { type ChildProcess, fork } from 'node:child_process'
import { cpus, loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { DEFAULT_PROFILE_SEED } from '../src/devnet/profile.js'
import { createCleanup } from './cleanup.js'
import { createBenchDatabase, describePostgres } from './databases.js'
import type { ChildJob, ChildMessage, DevnetReady, GatewayReady } from './follow-child.js'
import { runFollowLoad } from './follow-load.js'
import { childPids, createProcessSampler } from './follow-processes.js'
import { startFollowProbes } from './follow-probes.js'
import { type FollowResults, formatFollowReport, writeFollowResults } from './follow-report.js'
import { DEFAULT_ADMIN_DATABASE_URL } from './options.js'
import { createRpcClient } from './rpc.js'

// `npm run bench -- --follow` (or `node --import tsx bench/follow.ts`): the devnet under the `base` load
// profile (~250 transactions, ~1,500 logs and ten flashblocks a block), a gateway on a fresh database
// following it with the Flashblocks feed, and a mixed read load against the gateway for `--duration`
// seconds. Reports ingest lag, pending frame → visible latency, read throughput and latency per method, and
// CPU and memory per process. Devnet, gateway and load generator run in processes of their own.

const DEFAULT_DURATION_S = 600
/** Reads a second (open loop: sent on schedule, whatever the answers' pace) and the most in flight at once. */
const DEFAULT_RATE = 200
const DEFAULT_CONNECTIONS = 16
const DEFAULT_LOAD_SEED = 14
/** Following without reads first, so the window starts with the gateway at the head. */
const WARM_UP_S = 10
const CATCH_UP_TIMEOUT_MS = 120_000
const SAMPLE_INTERVAL_MS = 1_000
const BACKEND_REFRESH_MS = 5_000
const CHILD_READY_TIMEOUT_MS = 120_000
const CHILD_STOP_TIMEOUT_MS = 20_000
/** Blocks of the window whose receipts are read back to count logs. */
const LOG_COUNT_SAMPLE_BLOCKS = 20
const RESULTS_PATH = fileURLToPath(new URL('./results/follow.json', import.meta.url))
const CHILD_PATH = fileURLToPath(new URL('./follow-child.ts', import.meta.url))
const USAGE = 'node --import tsx bench/follow.ts [--duration S] [--rate N|0] [--connections N] [--pglite] [--admin-database-url URL] [--seed N]'

export type FollowOptions = { durationS: number; rate: number; connections: number; pglite: boolean; adminDatabaseUrl: string; profileSeed: number }

export function parseFollowOptions(argv: string[]): FollowOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      follow: { type: 'boolean' },
      duration: { type: 'string' },
      rate: { type: 'string' },
      connections: { type: 'string' },
      pglite: { type: 'boolean', default: false },
      'admin-database-url': { type: 'string' },
      seed: { type: 'string' },
    },
  })
  const number = (name: string, value: string | undefined, fallback: number, { zero = false } = {}) => {
    if (value === undefined) return fallback
    const parsed = Number(value.replaceAll('_', ''))
    if (!Number.isInteger(parsed) || parsed < (zero ? 0 : 1))
      throw new Error(`--${name} must be a ${zero ? 'non-negative' : 'positive'} whole number (got ${JSON.stringify(value)})\n${USAGE}`)
    return parsed
  }
  return {
    durationS: number('duration', values.duration, DEFAULT_DURATION_S),
    rate: number('rate', values.rate, DEFAULT_RATE, { zero: true }),
    connections: number('connections', values.connections, DEFAULT_CONNECTIONS),
    pglite: values.pglite,
    adminDatabaseUrl: values['admin-database-url'] ?? process.env.BENCH_ADMIN_DATABASE_URL ?? DEFAULT_ADMIN_DATABASE_URL,
    profileSeed: number('seed', values.seed, DEFAULT_PROFILE_SEED),
  }
}

type Child = { process: ChildProcess; stop: () => Promise<void>; request: <T>(message: object, answer: string) => Promise<T> }

/** Forks follow-child.ts for a role and waits until it is ready. */
async function startChild<ready extends DevnetReady | GatewayReady>(job: ChildJob): Promise<Child & { ready: ready }> {
  const child = fork(CHILD_PATH, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const ready = await new Promise<ready>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${job.role} process not ready within ${CHILD_READY_TIMEOUT_MS} ms`)), CHILD_READY_TIMEOUT_MS)
    child.once('message', (message: ChildMessage) => {
      clearTimeout(timer)
      if ('error' in message) reject(new Error(`${job.role} process: ${message.error}`))
      else resolve(message as ready)
    })
    child.once('exit', (code) => reject(new Error(`${job.role} process exited with code ${code} before it was ready`)))
    child.send(job)
  }).catch((error: unknown) => {
    child.kill('SIGKILL')
    throw error
  })
  const request = <T>(message: object, answer: string) =>
    new Promise<T>((resolve) => {
      const listen = (reply: Record<string, unknown>) => {
        if (!(answer in reply)) return
        child.off('message', listen)
        resolve(reply[answer] as T)
      }
      child.on('message', listen)
      child.send(message)
    })
  let stopped: Promise<void> | undefined
  const stop = () =>
    (stopped ??= new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve()
      const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_STOP_TIMEOUT_MS)
      child.once('exit', () => {
        clearTimeout(timer)
        resolve()
      })
      child.send({ stop: true })
    }))
  return { process: child, ready, stop, request }
}

export async function runFollowBench(argv: string[]): Promise<number> {
  const options = parseFollowOptions(argv)
  const log = (line: string) => console.log(line)
  const started = performance.now()
  const stamp = (line: string) => log(`[${((performance.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}`)
  const cleanup = createCleanup(log)
  const loadAtStart = loadavg()[0]!
  let aborting = false
  const abort = (signal: string) => {
    if (aborting) return
    aborting = true
    log(`\nreceived ${signal}; cleaning up`)
    void cleanup.run().finally(() => process.exit(130))
  }
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => abort(signal))
  try {
    stamp('devnet: starting with the base profile (deploys, funds 400 senders, waits for the block that seals them)')
    const devnet = await startChild<DevnetReady>({ role: 'devnet', profileSeed: options.profileSeed })
    cleanup.defer('devnet', devnet.stop)
    const [anvilPid] = childPids(devnet.process.pid!, 'anvil')
    if (anvilPid === undefined) throw new Error('could not find the anvil process under the devnet process')

    const database = await createBenchDatabase(options)
    cleanup.defer(`drop ${database.label}`, database.drop)
    stamp(`gateway: following the devnet on ${database.label}`)
    const gateway = await startChild<GatewayReady>({
      role: 'gateway',
      upstreamRpc: devnet.ready.rpcUrl,
      flashblocksWs: devnet.ready.flashblocksUrl,
      databaseUrl: database.databaseUrl,
    })
    cleanup.defer('gateway', gateway.stop)
    const devnetRpc = createRpcClient(devnet.ready.rpcUrl)
    const gatewayRpc = createRpcClient(gateway.ready.dedicatedUrl)
    const deadline = Date.now() + CATCH_UP_TIMEOUT_MS
    while (Number(await gatewayRpc.call('eth_blockNumber')) < Number(await devnetRpc.call('eth_blockNumber')) - 1) {
      if (Date.now() > deadline) throw new Error(`the gateway did not catch up with the devnet within ${CATCH_UP_TIMEOUT_MS} ms`)
      await new Promise((resolve) => setTimeout(resolve, 200))
    }

    const probes = await startFollowProbes({
      devnetRpcUrl: devnet.ready.rpcUrl,
      flashblocksUrl: devnet.ready.flashblocksUrl,
      gatewayRpcUrl: gateway.ready.dedicatedUrl,
      gatewayWsUrl: `${gateway.ready.url.replace('http', 'ws')}/`,
      hotPool: devnet.ready.contracts.pools[0]!,
    })
    stamp(`warm-up: ${WARM_UP_S} s of following without reads`)
    await new Promise((resolve) => setTimeout(resolve, WARM_UP_S * 1000))

    const sampler = createProcessSampler()
    const backends = options.pglite ? null : postgres(database.databaseUrl, { max: 1, onnotice: () => {} })
    cleanup.defer('backend listing', async () => void (await backends?.end({ timeout: 5 })))
    let backendPids: number[] = []
    const refreshBackends = async () => {
      if (backends === null) return
      const rows = await backends<{ pid: number }[]>`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`
      backendPids = rows.map((row) => row.pid)
    }
    await refreshBackends()
    let loadWorker: ChildProcess | undefined
    const groups = () => ({
      gateway: [gateway.process.pid!],
      ...(backends === null ? {} : { 'postgres (its backends)': backendPids }),
      'devnet (sequencer, feed, profile)': [devnet.process.pid!],
      anvil: [anvilPid],
      'load generator': loadWorker?.pid === undefined ? [] : [loadWorker.pid],
      'bench (probes)': [process.pid],
    })
    const sampleTimer = setInterval(() => sampler.sample(groups()), SAMPLE_INTERVAL_MS)
    const backendTimer = setInterval(() => void refreshBackends().catch(() => {}), BACKEND_REFRESH_MS)
    const firstBlock = Number(await devnetRpc.call('eth_blockNumber'))
    const profileBefore = await devnet.request<{ sent: number; failed: number }>({ stats: true }, 'stats')
    stamp(`reads: ${options.rate === 0 ? 'closed loop' : `${options.rate} req/s`}, up to ${options.connections} in flight, for ${options.durationS} s`)
    probes.measure()
    sampler.sample(groups())
    const load = await runFollowLoad(
      {
        rpcUrl: gateway.ready.dedicatedUrl,
        graphqlUrl: `${gateway.ready.url}/graphql`,
        durationS: options.durationS,
        ratePerSecond: options.rate,
        connections: options.connections,
        contracts: devnet.ready.contracts,
        senders: devnet.ready.senders,
        profileSeed: options.profileSeed,
        seed: DEFAULT_LOAD_SEED,
      },
      (worker) => {
        loadWorker = worker
        cleanup.defer('load worker', () => void worker.kill('SIGKILL'))
      },
    )
    sampler.sample(groups())
    clearInterval(sampleTimer)
    clearInterval(backendTimer)
    const probeFigures = await probes.stop()
    const lastBlock = Number(await devnetRpc.call('eth_blockNumber'))
    const profileAfter = await devnet.request<{ sent: number; failed: number; attributed: number; plannedLogs: number }>({ stats: true }, 'stats')
    const gatewayStatus = await gateway.request<Record<string, unknown>>({ stats: true }, 'stats')
    const gatewayReadiness = await (await fetch(`${gateway.ready.url}/readyz`)).json()
    stamp('reading back the logs of sampled blocks')
    const logsPerBlock: number[] = []
    const step = Math.max(1, Math.floor((lastBlock - firstBlock) / LOG_COUNT_SAMPLE_BLOCKS))
    for (let number = firstBlock + 1; number <= lastBlock; number += step) {
      const receipts = await devnetRpc.call<{ logs: unknown[] }[]>('eth_getBlockReceipts', [`0x${number.toString(16)}`])
      logsPerBlock.push(receipts.reduce((sum, receipt) => sum + receipt.logs.length, 0))
    }
    const results: FollowResults = {
      startedAt: new Date(Date.now() - (performance.now() - started)).toISOString(),
      options,
      environment: {
        node: process.version,
        cpus: cpus().length,
        loadAverage: { atStart: loadAtStart, atEnd: loadavg()[0]! },
        database: options.pglite ? 'PGlite (in the gateway process)' : `Postgres ${(await describePostgres(options.adminDatabaseUrl)).server_version}`,
      },
      chain: {
        blocks: lastBlock - firstBlock,
        transactionsPerBlock: probeFigures.transactionsPerBlock,
        logsPerBlockSampled: logsPerBlock,
        profile: {
          sent: profileAfter.sent - profileBefore.sent,
          refused: profileAfter.failed - profileBefore.failed,
          attributedTotal: profileAfter.attributed,
        },
      },
      probes: probeFigures,
      load,
      processes: sampler.figures(),
      gatewayStatus,
      gatewayReadiness,
    }
    log('')
    log(formatFollowReport(results))
    writeFollowResults(RESULTS_PATH, results)
    log(`\nwrote ${RESULTS_PATH}`)
    return 0
  } catch (error) {
    if (!aborting) log(`\nfollow bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
    return 1
  } finally {
    await cleanup.run()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) process.exit(await runFollowBench(process.argv.slice(2)))
