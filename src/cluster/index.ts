/**
 * `flashgate serve --workers N`: N serving workers on one port (node:cluster hands each new connection to
 * the next worker), under a primary that holds what there must be one of per machine: the ingester, the
 * Flashblocks connection and the pending state it feeds, the rate-limit buckets and the forwarded nonces
 * (src/cluster/protocol.ts). A worker that dies is replaced; SIGTERM drains every worker, then the primary.
 */
import cluster, { type Worker } from 'node:cluster'
import { availableParallelism } from 'node:os'
import type { Logger } from 'pino'
import { type Gateway, startGateway } from '../app.js'
import { ConfigError, type ServeConfig } from '../config.js'
import { isPostgresUrl } from '../db/index.js'
import { createMetrics } from '../server/metrics.js'
import { createClusterHub } from './hub.js'
import { createClusterLink } from './link.js'
import { isClusterMessage } from './protocol.js'

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

/** In a forked worker: the gateway as a serving worker, announced to the primary once it listens. */
export async function startClusterWorker({ config, logger }: { config: ServeConfig; logger: Logger }): Promise<Gateway> {
  const link = createClusterLink({ workerId: cluster.worker!.id })
  const workerLogger = logger.child({ worker: cluster.worker!.id })
  const gateway = await startGateway({ config, logger: workerLogger, cluster: { kind: 'worker', link } })
  // A primary killed outright closes the IPC channel, and node:cluster ends its workers at once (they do
  // not linger with their database connections and no feed): test/workers.test.ts checks it.
  link.post({ fg: 'listening', port: gateway.port })
  return gateway
}

/** In the primary: the gateway without HTTP, then `workers` forked workers; resolves once they all listen. */
export async function startClusterPrimary({ config, logger, workers }: { config: ServeConfig; logger: Logger; workers: number }) {
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
    hub.add(worker)
    worker.on('exit', (code, signal) => {
      if (stopping) return
      const lived = Date.now() - startedAt
      logger.error({ worker: worker.id, code, signal, livedMs: lived }, 'a serving worker exited')
      if (lived >= MIN_WORKER_LIFETIME_MS) fork().catch((error: unknown) => logger.error({ err: error }, 'could not replace a serving worker'))
    })
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`worker ${worker.id} did not start within ${WORKER_START_TIMEOUT_MS} ms`)), WORKER_START_TIMEOUT_MS)
      worker.on('message', (message: unknown) => {
        if (isClusterMessage(message) && message.fg === 'listening') {
          listeningPort ??= (message as unknown as { port: number }).port
          clearTimeout(timer)
          resolve(worker)
        }
      })
      worker.once('exit', (code) => {
        clearTimeout(timer)
        reject(new Error(`worker ${worker.id} exited with code ${code} while starting`))
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
