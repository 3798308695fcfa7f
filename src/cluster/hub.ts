import type { Worker } from 'node:cluster'
import type { Logger } from 'pino'
import { AggregatorRegistry } from 'prom-client'
import { loggableError } from '../errors.js'
import type { Hash } from 'viem'
import type { FlashblockMessage } from '../pending/message.js'
import type { Hydrate, PendingState, UpstreamReceipt } from '../pending/state.js'
import type { ClusterOperation, ClusterOperations, PrimaryStatus, PrimaryToWorker, SealedBlock, WorkerToPrimary } from './protocol.js'
import { isClusterMessage } from './protocol.js'

/** One process's figures as `registry.getMetricsAsJSON()` gives them. */
type ProcessMetrics = object[]

/**
 * Figures of one process that are the machine's once aggregated, whatever prom-client's default says: a file
 * descriptor limit is the same for each process (summed, it would triple), and the machine started when its
 * first process did (prom-client leaves the start time out of an aggregate, so a restart could not be told).
 */
const MACHINE_AGGREGATORS: [suffix: string, aggregator: string][] = [
  ['process_max_fds', 'max'],
  ['process_start_time_seconds', 'min'],
]

function asMachineFigures(figures: ProcessMetrics): ProcessMetrics {
  return figures.map((metric) => {
    const name = (metric as { name?: string }).name ?? ''
    const machine = MACHINE_AGGREGATORS.find(([suffix]) => name.endsWith(suffix))
    return machine === undefined ? metric : { ...metric, aggregator: machine[1] }
  })
}

/** The counters (and histograms, counters by bucket) of these figures summed; gauges of a process that is gone mean nothing. */
async function countersOf(figures: ProcessMetrics[]): Promise<ProcessMetrics> {
  const summed = await AggregatorRegistry.aggregate(figures).getMetricsAsJSON()
  return summed.filter((metric) => String(metric.type) === 'counter' || String(metric.type) === 'histogram')
}

/** A worker that has not given its figures this long after `/metrics` asked is left out of that scrape. */
const METRICS_WAIT_MS = 2_000
/** The primary tells its workers how the ingester and the feed are doing this often (for `/readyz` and `/metrics`). */
const STATUS_INTERVAL_MS = 1_000
/** A flashblock's hydration is shared by the workers that ask for it this long after it settled. */
const HYDRATION_SHARED_MS = 30_000
/** Flashblocks kept for a worker that starts late (a replacement): ten blocks of ten. */
const MAX_REPLAY_MESSAGES = 100

type Handler<operation extends ClusterOperation> = (
  ...args: ClusterOperations[operation]['args']
) => Promise<ClusterOperations[operation]['result']> | ClusterOperations[operation]['result']

/**
 * The primary's side of `serve --workers N` (src/cluster/protocol.ts): answers the workers' requests with
 * the handlers the gateway registers, announces what its pending state applies so that every worker's
 * replica applies the same in the same order, and aggregates `/metrics` over the workers.
 */
export function createClusterHub({ logger, status, ownMetrics }: { logger: Logger; status: () => PrimaryStatus; ownMetrics: () => Promise<ProcessMetrics> }) {
  const attached = new Set<Worker>()
  const handlers = new Map<ClusterOperation, (...args: unknown[]) => unknown>()
  const metricsWaiting = new Map<number, (metrics: ProcessMetrics) => void>()
  let nextMetricsId = 0
  /** Each worker's figures as its last scrape gave them. */
  const lastFigures = new Map<Worker, ProcessMetrics>()
  /** The counters of workers that exited, summed: the machine's counters never go back when one dies. */
  let retired: ProcessMetrics = []
  let retiring: Promise<void> = Promise.resolve()
  let hydrating = false
  /** Whether the hydration's receipts carry balances (flashgate's own execution). */
  let hydratingBalances = false
  // The flashblocks of the blocks not sealed yet, in order, so that a worker that starts now builds the same view.
  let replay: { block: number | null; message: FlashblockMessage }[] = []
  let currentBlock: number | null = null

  function send(worker: Worker, message: PrimaryToWorker) {
    if (!worker.isConnected()) return
    const unreachable = (error: unknown) => logger.warn({ err: loggableError(error), worker: worker.id }, 'could not reach a worker')
    try {
      // A write that fails (the worker exited before this process heard its channel close) is reported to the
      // callback. Without one it is an 'error' event on the worker, uncaught, and the primary would exit.
      worker.send(message, undefined, (error: Error | null) => {
        if (error) unreachable(error)
      })
    } catch (error) {
      unreachable(error)
    }
  }

  function broadcast(message: PrimaryToWorker) {
    for (const worker of attached) send(worker, message)
  }

  // Only once a worker listens: until then the gateway whose status this is may still be starting (its
  // migrations, a Redis that does not answer), and `status()` cannot be asked.
  const statusTimer = setInterval(() => {
    if (attached.size > 0) broadcast({ fg: 'status', status: status() })
  }, STATUS_INTERVAL_MS)
  statusTimer.unref()

  async function answer(worker: Worker, id: number, operation: ClusterOperation, args: unknown[]) {
    const handler = operation === 'metrics' ? machineMetrics : handlers.get(operation)
    try {
      if (handler === undefined) throw new Error(`the primary does not handle ${operation}`)
      send(worker, { fg: 'reply', id, result: await handler(...args) })
    } catch (error) {
      send(worker, { fg: 'reply', id, error: error instanceof Error ? error.message : String(error) })
    }
  }

  /** Every worker's figures and the primary's own, summed (or as each gauge says), as one exposition. */
  async function machineMetrics(): Promise<ClusterOperations['metrics']['result']> {
    const replies = [...attached].map(
      (worker) =>
        new Promise<ProcessMetrics | null>((resolve) => {
          const id = nextMetricsId++
          const timer = setTimeout(() => {
            metricsWaiting.delete(id)
            resolve(null)
          }, METRICS_WAIT_MS)
          metricsWaiting.set(id, (metrics) => {
            clearTimeout(timer)
            if (attached.has(worker)) lastFigures.set(worker, metrics)
            resolve(metrics)
          })
          send(worker, { fg: 'metrics-request', id })
        }),
    )
    const figures = [await ownMetrics(), ...(await Promise.all(replies)).filter((metrics) => metrics !== null)]
    await retiring
    const registry = AggregatorRegistry.aggregate([...figures.map(asMachineFigures), retired])
    return { contentType: registry.contentType, body: await registry.metrics() }
  }

  function onMessage(worker: Worker, message: unknown) {
    if (!isClusterMessage(message)) return
    const received = message as WorkerToPrimary
    if (received.fg === 'request') void answer(worker, received.id, received.operation, received.args)
    else if (received.fg === 'metrics-reply') {
      metricsWaiting.get(received.id)?.(received.metrics as ProcessMetrics)
      metricsWaiting.delete(received.id)
    } else if (received.fg === 'listening') {
      // Listening means its link is up: from now on it hears everything, starting with what it missed.
      attached.add(worker)
      send(worker, { fg: 'status', status: status() })
      send(worker, { fg: 'hydrating', on: hydrating, balances: hydratingBalances })
      for (const { message: flashblock } of replay) send(worker, { fg: 'flashblock', message: flashblock })
    }
  }

  return {
    /** A forked worker: its requests are answered now; it hears announcements once it listens. */
    add(worker: Worker) {
      worker.on('message', (message: unknown) => onMessage(worker, message))
      // node:cluster's own messages to a worker (a connection handed over) may fail as it exits.
      worker.on('error', (error: Error) => logger.warn({ err: loggableError(error), worker: worker.id }, "a worker's channel failed"))
      worker.on('exit', () => {
        attached.delete(worker)
        const last = lastFigures.get(worker)
        lastFigures.delete(worker)
        if (last !== undefined)
          retiring = retiring
            .then(async () => {
              retired = await countersOf([retired, last])
            })
            .catch((error: unknown) => logger.warn({ err: loggableError(error), worker: worker.id }, "could not keep an exited worker's counters"))
      })
    },
    handle<operation extends Exclude<ClusterOperation, 'metrics'>>(operation: operation, handler: Handler<operation>) {
      handlers.set(operation, handler as (...args: unknown[]) => unknown)
    },
    get workers(): number {
      return attached.size
    },
    /**
     * The primary's pending state as the feed and the pending source see it: every flashblock applied, every
     * withdrawal and every change of receipt source is announced to the workers, and a flashblock's hydration
     * is done once for the machine (a worker asking for the same transactions shares the primary's).
     */
    sharePending(state: PendingState): { state: PendingState; hydrate: Hydrate } {
      let current: Hydrate | null = null
      const shared = new Map<string, Promise<UpstreamReceipt[]>>()
      const hydrateOnce = (inner: Hydrate): Hydrate =>
        Object.assign(
          (hashes: Hash[], options?: { live?: () => boolean }) => {
            const key = hashes.join()
            let receipts = shared.get(key)
            if (receipts === undefined) {
              receipts = inner(hashes, options)
              shared.set(key, receipts)
              const forget = () => setTimeout(() => shared.delete(key), HYDRATION_SHARED_MS).unref()
              receipts.then(forget, forget)
            }
            return receipts
          },
          { providesBalances: inner.providesBalances },
        )
      const relayed = new Proxy(state, {
        get(target, key) {
          if (key === 'apply')
            return (message: FlashblockMessage) => {
              if (message.index === 0 && message.base !== undefined) currentBlock = Number(message.base.block_number)
              replay.push({ block: currentBlock, message })
              if (replay.length > MAX_REPLAY_MESSAGES) replay = replay.slice(-MAX_REPLAY_MESSAGES)
              broadcast({ fg: 'flashblock', message })
              return target.apply(message)
            }
          if (key === 'withdraw')
            return (number: number) => {
              broadcast({ fg: 'pending-withdraw', number })
              target.withdraw(number)
            }
          if (key === 'setHydrate')
            return (next: Hydrate | null) => {
              current = next === null ? null : hydrateOnce(next)
              hydrating = next !== null
              hydratingBalances = next?.providesBalances === true
              broadcast({ fg: 'hydrating', on: hydrating, balances: hydratingBalances })
              target.setHydrate(current)
            }
          return Reflect.get(target, key, target)
        },
      })
      return {
        state: relayed,
        hydrate: (hashes, options) => (current === null ? Promise.resolve(hashes.map(() => null)) : current(hashes, options)),
      }
    },
    /** Blocks the ingester committed: each worker reconciles its pending view with them. */
    sealed(blocks: SealedBlock[]) {
      const newest = Math.max(...blocks.map((block) => block.number))
      replay = replay.filter((entry) => entry.block === null || entry.block > newest)
      broadcast({ fg: 'sealed', blocks })
    },
    /** The ingester rewound to `ancestor`: each worker's pending state drops what was built above it, as the primary's does. */
    rewound(ancestor: number) {
      // The flashblocks kept for a late worker are of blocks above the ancestor: abandoned.
      replay = []
      broadcast({ fg: 'pending-rewind', ancestor })
    },
    close() {
      clearInterval(statusTimer)
    },
  }
}

export type ClusterHub = ReturnType<typeof createClusterHub>
