/**
 * `flashgate serve --workers N`: N serving workers on one port (node:cluster hands each new connection to
 * the next worker), under a primary that holds what there must be one of per machine: the ingester, the
 * Flashblocks connection and the pending state it feeds, the rate-limit buckets and the forwarded nonces
 * (src/cluster/protocol.ts). A worker that dies is replaced; SIGTERM drains every worker, then the primary.
 */
import cluster, { type Worker } from 'node:cluster'
import { createServer } from 'node:net'
import { availableParallelism } from 'node:os'
import type { Logger } from 'pino'
import { type Gateway, startGateway } from '../app.js'
import { ConfigError, type ServeConfig } from '../config.js'
import { isPostgresUrl } from '../db/index.js'
import { createMetrics } from '../server/metrics.js'
import { createClusterHub } from './hub.js'
import { createClusterLink } from './link.js'
import { isClusterMessage, type StartFailure, type WorkerToPrimary } from './protocol.js'

/** A worker not listening this long after it was forked has failed to start. */
const WORKER_START_TIMEOUT_MS = 60_000
/** Workers get this long to drain on shutdown (their own grace is 10 s), then they are killed. */
const WORKER_STOP_TIMEOUT_MS = 15_000
/** A worker dying sooner than this after it started is not replaced again (it would crash-loop). */
const MIN_WORKER_LIFETIME_MS = 5_000

/**
 * How many serving workers: `--workers`, else one per core where they can share the database (Postgres)
 * and one process otherwise (PGlite is one process; `--role ingest` serves no APIs).
 */
export function workerCount(config: ServeConfig): number {
  const shareable = isPostgresUrl(config.databaseUrl) && config.role !== 'ingest'
  if (config.workers === undefined) return shareable ? availableParallelism() : 1
  if (config.workers > 1 && !isPostgresUrl(config.databaseUrl))
    throw new ConfigError('invalid configuration: --workers above 1 needs a Postgres database (PGlite is one process)')
  if (config.workers > 1 && config.role === 'ingest')
    throw new ConfigError('invalid configuration: --workers is for serving processes; --role ingest serves no APIs')
  return config.workers
}

export const isClusterWorker = () => cluster.isWorker

/** Sends why this worker could not start to the primary (waiting until it is sent), then exits 1. */
async function reportStartFailure(error: unknown): Promise<never> {
  const { message, stack, code, port } = error as { message?: unknown; stack?: unknown; code?: unknown; port?: unknown }
  const failure: StartFailure = {
    message: typeof message === 'string' ? message : String(error),
    ...(typeof stack === 'string' && { stack }),
    ...(typeof code === 'string' && { code }),
    ...(typeof port === 'number' && { port }),
  }
  const report: WorkerToPrimary = { fg: 'start-failed', failure }
  await new Promise<void>((resolve) => {
    try {
      // The callback also hears a channel already closed: the primary is gone, and there is no one to tell.
      process.send!(report, undefined, undefined, () => resolve())
    } catch {
      resolve()
    }
  })
  process.exit(1)
}

/** A worker's start failure as the error it was, `code` and `port` included (src/cli/usage-error.ts reads them). */
function startFailureError({ message, stack, code, port }: StartFailure): Error {
  const error = Object.assign(new Error(message), { code, port })
  if (stack !== undefined) error.stack = stack
  return error
}

/**
 * Binds the workers' port and lets it go again, before anything starts: a port in use is refused at once and
 * in one line, as a single process refuses it, rather than by each worker in turn once the primary ingests
 * (node:cluster binds it for the workers only when they listen). A port taken between this check and the
 * workers' start is still reported once: each worker tells the primary (`reportStartFailure`).
 */
async function checkPortFree({ port, host }: ServeConfig): Promise<void> {
  if (port === 0) return
  const probe = createServer()
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject)
    probe.listen(port, host, resolve)
  })
  await new Promise<void>((resolve) => probe.close(() => resolve()))
}

/**
 * In a forked worker: the gateway as a serving worker, announced to the primary once it listens. A worker
 * that cannot start tells the primary why and exits 1 without a word of its own, so that the failure is
 * reported once, as a single process reports it (README: every CLI failure is one line on stderr).
 */
export async function startClusterWorker({ config, logger }: { config: ServeConfig; logger: Logger }): Promise<Gateway> {
  const link = createClusterLink({ workerId: cluster.worker!.id })
  const workerLogger = logger.child({ worker: cluster.worker!.id })
  const gateway = await startGateway({ config, logger: workerLogger, cluster: { kind: 'worker', link } }).catch(reportStartFailure)
  // A primary killed outright closes the IPC channel, and node:cluster ends its workers at once (they do
  // not linger with their database connections and no feed): test/workers.test.ts checks it.
  link.post({ fg: 'listening', port: gateway.port })
  return gateway
}

/** In the primary: the gateway without HTTP, then `workers` forked workers; resolves once they all listen. */
export async function startClusterPrimary({ config, logger, workers }: { config: ServeConfig; logger: Logger; workers: number }) {
  await checkPortFree(config)
  cluster.setupPrimary({ serialization: 'advanced' })
  const ownMetrics = createMetrics()
  let gateway: Gateway | null = null
  const hub = createClusterHub({
    logger: logger.child({ module: 'cluster' }),
    status: () => gateway!.primaryStatus(),
    ownMetrics: () => ownMetrics.json(),
  })
  gateway = await startGateway({ config, logger, cluster: { kind: 'primary', hub } })
  let stopping = false

  let listeningPort: number | null = null

  function fork(): Promise<Worker> {
    const worker = cluster.fork()
    const startedAt = Date.now()
    let listening = false
    hub.add(worker)
    worker.on('exit', (code, signal) => {
      // A worker that never listened is reported by the promise below (and not replaced: it would fail again).
      if (stopping || !listening) return
      const lived = Date.now() - startedAt
      logger.error({ worker: worker.id, code, signal, livedMs: lived }, 'a serving worker exited')
      if (lived >= MIN_WORKER_LIFETIME_MS) fork().catch((error: unknown) => logger.error({ err: error }, 'could not replace a serving worker'))
    })
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`worker ${worker.id} did not start within ${WORKER_START_TIMEOUT_MS} ms`)), WORKER_START_TIMEOUT_MS)
      worker.on('message', (message: unknown) => {
        if (!isClusterMessage(message)) return
        const received = message as WorkerToPrimary
        if (received.fg === 'listening') {
          listening = true
          listeningPort ??= received.port
          clearTimeout(timer)
          resolve(worker)
        } else if (received.fg === 'start-failed') {
          clearTimeout(timer)
          reject(startFailureError(received.failure))
        }
      })
      worker.once('exit', (code) => {
        clearTimeout(timer)
        // A worker that could not start said why before it exited, and that message may not be delivered yet:
        // the channel closes only after delivering it, so the bare exit code is given only when none came.
        const exited = () => reject(new Error(`worker ${worker.id} exited with code ${code} while starting`))
        if (worker.isConnected()) worker.once('disconnect', exited)
        else exited()
      })
    })
  }

  async function stop() {
    stopping = true
    const running = Object.values(cluster.workers ?? {}).filter((worker): worker is Worker => worker !== undefined && !worker.isDead())
    await Promise.all(
      running.map(
        (worker) =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(() => worker.kill('SIGKILL'), WORKER_STOP_TIMEOUT_MS)
            worker.once('exit', () => {
              clearTimeout(timer)
              resolve()
            })
            // Each worker drains its connections and stops, as a single process does on SIGTERM.
            worker.process.kill('SIGTERM')
          }),
      ),
    )
    hub.close()
    await gateway!.stop()
  }

  try {
    await Promise.all(Array.from({ length: workers }, () => fork()))
  } catch (error) {
    await stop()
    throw error
  }
  // The port the workers share (the one asked for, or the one the first worker got for `--port 0`).
  const port = listeningPort ?? config.port
  return { gateway, url: `http://${config.host}:${port}`, port, stop, workers }
}
