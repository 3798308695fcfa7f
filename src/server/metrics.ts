import { type IncomingMessage, ServerResponse } from 'node:http'
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client'
import { registryDecodeFailures } from '../attribution/registry.js'
import { userOperationDecodeFailures } from '../attribution/user-operations.js'
import type { ExecutorStatus } from '../pending/execute/index.js'
import type { LogPartitionState } from '../db/log-partitions.js'
import type { RedisStatus } from '../redis/index.js'
import { createRequestFigures } from './request-figures.js'

/** Request durations, in seconds: from a cached answer (sub-millisecond) to a capped eth_getLogs. */
const DURATION_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** What the gauges read at scrape time. */
export type MetricsSources = {
  /** Newest block of the index, of the upstream as the ingester last saw it, and whether this process ingests. */
  chain?: () => Promise<{ indexHead: number | null; upstreamHead: number | null; ingesting: boolean }>
  /** The pending view: where its receipts come from, hydration figures and divergences from sealed blocks. */
  pending?: () => PendingMetrics
  /** Reads below the index answered from the upstream, by method. */
  history?: () => Record<string, number>
  /** The Redis shared by the deployment's processes (`--redis-url`): up or not, and what was answered without it. */
  redis?: () => RedisStatus
  /** The JSON-RPC call memos (jsonrpc/memo.ts), by endpoint policy. */
  memo?: () => Record<string, MemoFigures>
  /** The answer cache shared by every endpoint (resolvers/cache.ts): what it holds now. */
  answerCache?: () => { entries: number; bytes: number }
  /** The partitions of `logs`, counted by state (db/log-partitions.ts `logPartitionState`). */
  logPartitions?: () => Promise<Record<LogPartitionState, number>>
}

export type MemoFigures = { hits: number; kept: number; entries: number; bytes: number }

export type PendingMetrics = {
  source: string
  hydration: { inFlight: number; completed: number; failures: number; missingReceipts: number; lagMsP50: number | null; lagMsP99: number | null }
  reconciledBlocks: number
  divergences: Record<string, number>
  /** `--pending-source execute` only: the executor's figures (src/pending/execute). */
  execution?: ExecutorStatus | null
}

/** A request's path: its URL without the query. */
export function pathOf(url: string | undefined): string {
  if (url === undefined) return '/'
  const query = url.indexOf('?')
  return query < 0 ? url : url.slice(0, query)
}

/** A route label with bounded cardinality: API keys and path parameters never become labels. */
export function routeLabel(path: string): string {
  if (path === '/' || path === '/rpc') return path
  if (path.startsWith('/rpc/')) return '/rpc/:apiKey'
  if (path.startsWith('/v1/agents/builder-codes')) return '/v1/agents/builder-codes'
  if (path.startsWith('/v1/')) return '/v1'
  if (['/graphql', '/healthz', '/readyz', '/metrics', '/dashboard'].includes(path)) return path
  return 'other'
}

/** Prometheus metrics of one process (`GET /metrics`), with Node's own process metrics. */
export function createMetrics(sources: MetricsSources = {}) {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry, prefix: 'flashgate_' })

  const requestFigures = createRequestFigures({ registry, buckets: DURATION_BUCKETS_SECONDS })
  const rateLimited = new Counter({
    name: 'flashgate_rate_limited_total',
    help: 'Requests refused for their rate (HTTP 429 or -32005 on a WebSocket), by endpoint policy',
    labelNames: ['policy'] as const,
    registers: [registry],
  })
  new Gauge({
    name: 'flashgate_attribution_user_operation_decode_failures_total',
    help: 'Calls to an EntryPoint whose handleOps calldata (or receipt events) did not decode: ignored for attribution, by what failed',
    labelNames: ['part'] as const,
    registers: [registry],
    collect() {
      for (const [part, count] of Object.entries(userOperationDecodeFailures)) this.set({ part }, count)
    },
  })
  new Gauge({
    name: 'flashgate_attribution_registry_decode_failures_total',
    help: 'Events at the builder-codes registry address that did not decode, or registered a code the registry could not mint: ignored',
    registers: [registry],
    collect() {
      this.set(registryDecodeFailures.events)
    },
  })
  const chain = sources.chain
  if (chain !== undefined) {
    // One read per scrape feeds all three gauges.
    let reading: ReturnType<typeof chain> | null = null
    const read = () => (reading ??= chain().finally(() => setImmediate(() => (reading = null))))
    new Gauge({
      name: 'flashgate_index_head_block',
      // The same figure on every worker of `serve --workers N`: aggregated, the machine's is the highest.
      aggregator: 'max',
      help: 'Newest block in the index',
      registers: [registry],
      async collect() {
        const { indexHead } = await read()
        if (indexHead === null) this.remove()
        else this.set(indexHead)
      },
    })
    new Gauge({
      name: 'flashgate_upstream_head_block',
      // The same figure on every worker of `serve --workers N`: aggregated, the machine's is the highest.
      aggregator: 'max',
      help: 'Newest block of the upstream node, as the ingester last saw it',
      registers: [registry],
      async collect() {
        // Unknown on a process that does not ingest: no sample rather than a 0 (or the last one, once the lock went).
        const { upstreamHead } = await read()
        if (upstreamHead === null) this.remove()
        else this.set(upstreamHead)
      },
    })
    new Gauge({
      name: 'flashgate_ingesting',
      // The same figure on every worker of `serve --workers N`: aggregated, the machine's is the highest.
      aggregator: 'max',
      help: '1 when this process holds the ingest lock',
      registers: [registry],
      async collect() {
        this.set((await read()).ingesting ? 1 : 0)
      },
    })
  }

  const partitions = sources.logPartitions
  if (partitions !== undefined)
    new Gauge({
      name: 'flashgate_logs_partitions',
      // The same figure on every worker of `serve --workers N`: aggregated, the machine's is the highest.
      aggregator: 'max',
      help: 'Partitions of the logs table, by state: sealed, written (not sealed yet, indexed) or bare (written by a backfill without its secondary indexes, until its seal)',
      labelNames: ['state'] as const,
      registers: [registry],
      async collect() {
        for (const [state, count] of Object.entries(await partitions())) this.set({ state }, count)
      },
    })

  const history = sources.history
  if (history !== undefined)
    new Gauge({
      name: 'flashgate_history_upstream_reads_total',
      help: 'Reads of blocks, transactions, receipts, logs or state below the first indexed block, answered from the upstream, by method',
      labelNames: ['method'] as const,
      registers: [registry],
      collect() {
        for (const [method, count] of Object.entries(history())) this.set({ method }, count)
      },
    })
  const memo = sources.memo
  if (memo !== undefined) {
    const memoGauge = (name: string, help: string, figure: keyof MemoFigures) =>
      new Gauge({
        name,
        help,
        labelNames: ['policy'] as const,
        registers: [registry],
        collect() {
          for (const [policy, figures] of Object.entries(memo())) this.set({ policy }, figures[figure])
        },
      })
    memoGauge(
      'flashgate_jsonrpc_memo_hits_total',
      'JSON-RPC calls answered from the call memo (results fixed by explicit indexed blocks), by endpoint policy',
      'hits',
    )
    memoGauge('flashgate_jsonrpc_memo_kept_total', 'Results kept in the call memo, by endpoint policy', 'kept')
    memoGauge('flashgate_jsonrpc_memo_entries', 'Results held in the call memo now, by endpoint policy', 'entries')
    memoGauge('flashgate_jsonrpc_memo_bytes', 'Memory the call memo holds now (JSON text and keys), by endpoint policy', 'bytes')
  }
  const answerCache = sources.answerCache
  if (answerCache !== undefined)
    for (const [figure, help] of [
      ['entries', 'Answers held in the answer cache now'],
      ['bytes', 'Memory the answer cache counts for what it holds now (bounded by --answer-cache-mb)'],
    ] as const)
      new Gauge({
        name: `flashgate_answer_cache_${figure}`,
        help,
        registers: [registry],
        collect() {
          this.set(answerCache()[figure])
        },
      })
  const redis = sources.redis
  if (redis !== undefined) {
    new Gauge({
      name: 'flashgate_redis_connected',
      help: '1 while the shared Redis answers; 0 while this process limits, revokes and counts nonces alone',
      registers: [registry],
      collect() {
        this.set(redis().connected ? 1 : 0)
      },
    })
    new Gauge({
      name: 'flashgate_redis_fallbacks_total',
      help: 'Operations answered by this process alone because Redis failed or was down, by operation',
      labelNames: ['operation'] as const,
      registers: [registry],
      collect() {
        for (const [operation, count] of Object.entries(redis().fallbacks)) this.set({ operation }, count)
      },
    })
  }
  const pending = sources.pending
  if (pending !== undefined) {
    const gauge = (name: string, help: string, value: (figures: PendingMetrics) => number | null, labelNames: string[] = []) =>
      new Gauge({
        name,
        help,
        labelNames,
        // The primary's pending state, the same on every worker of `serve --workers N`.
        aggregator: 'first',
        registers: [registry],
        collect() {
          // A figure not known (yet, or here) has no sample, rather than a 0.
          const figure = value(pending())
          if (figure === null) this.remove()
          else this.set(figure)
        },
      })
    new Gauge({
      name: 'flashgate_pending_source',
      aggregator: 'first',
      help: 'Where pre-confirmed receipts come from: 1 for the current source (feed, hydrate, frames, probing, execute)',
      labelNames: ['source'] as const,
      registers: [registry],
      collect() {
        const current = pending().source
        for (const source of ['feed', 'hydrate', 'frames', 'probing', 'execute']) this.set({ source }, source === current ? 1 : 0)
      },
    })
    gauge('flashgate_pending_hydrations_total', 'Flashblocks whose receipts were hydrated from the upstream', (figures) => figures.hydration.completed)
    gauge('flashgate_pending_hydration_failures_total', 'Hydration round trips that failed', (figures) => figures.hydration.failures)
    gauge('flashgate_pending_hydration_missing_receipts_total', 'Pre-confirmed receipts the upstream never had', (figures) => figures.hydration.missingReceipts)
    gauge('flashgate_pending_hydrations_in_flight', 'Hydration round trips under way', (figures) => figures.hydration.inFlight)
    gauge('flashgate_pending_hydration_lag_p50_ms', 'Frame to hydrated receipts, median of recent flashblocks (ms)', (figures) => figures.hydration.lagMsP50)
    gauge(
      'flashgate_pending_hydration_lag_p99_ms',
      'Frame to hydrated receipts, 99th percentile of recent flashblocks (ms)',
      (figures) => figures.hydration.lagMsP99,
    )
    gauge(
      'flashgate_pending_executed_transactions_total',
      'Pre-confirmed transactions flashgate executed itself (--pending-source execute)',
      (figures) => figures.execution?.executedTransactions ?? null,
    )
    gauge(
      'flashgate_pending_executed_deposits_total',
      'Of those, OP-Stack deposit transactions (the L1-attributes one opens every block of such a chain)',
      (figures) => figures.execution?.executedDeposits ?? null,
    )
    gauge(
      'flashgate_pending_execution_upstream_reads_total',
      'Accounts and storage slots the executor read from the upstream',
      (figures) => figures.execution?.upstreamReads ?? null,
    )
    gauge(
      'flashgate_pending_execution_cached_entries',
      'Accounts and storage slots of the parent state the executor holds',
      (figures) => figures.execution?.cachedEntries ?? null,
    )
    gauge(
      'flashgate_pending_execution_last_flashblock_ms',
      "The last flashblock's execution, reads included (ms)",
      (figures) => figures.execution?.lastFlashblockMs ?? null,
    )
    new Gauge({
      name: 'flashgate_pending_execution_blocks_total',
      aggregator: 'first',
      help: "Blocks the executor started, by how: on the state the block before left (carried), on the cache caught up with the sealed blocks' state diffs (canonical) or read afresh (fresh); and blocks whose execution stopped: failed, withdrawn (built on a diverged block)",
      labelNames: ['outcome'] as const,
      registers: [registry],
      collect() {
        const execution = pending().execution
        if (execution === undefined || execution === null) return
        const { carriedBlocks, freshBlocks, canonicalBlocks, failedBlocks, withdrawnBlocks } = execution
        const outcomes = { carried: carriedBlocks, fresh: freshBlocks, canonical: canonicalBlocks, failed: failedBlocks, withdrawn: withdrawnBlocks }
        for (const [outcome, count] of Object.entries(outcomes)) this.set({ outcome }, count)
      },
    })
    gauge('flashgate_pending_reconciled_blocks_total', 'Pre-confirmed blocks compared with their canonical block', (figures) => figures.reconciledBlocks)
    new Gauge({
      name: 'flashgate_pending_divergences_total',
      aggregator: 'first',
      help: 'Canonical blocks that differed from their pre-confirmation, by what differed (transactions, parent, receipt)',
      labelNames: ['kind'] as const,
      registers: [registry],
      collect() {
        for (const [kind, count] of Object.entries(pending().divergences)) this.set({ kind }, count)
      },
    })
  }

  return {
    /**
     * The class of the server's answers (`createServer({ ServerResponse })`): each counts itself, its route, its
     * status and its time since the request came, when it ends. Not a 'finish' listener per request: on Node 20
     * adding one costs about 8 µs a request, more than answering a cached call does (measured, issue 18).
     */
    Response: class MeasuredResponse<request extends IncomingMessage = IncomingMessage> extends ServerResponse<request> {
      private readonly startedAt = performance.now()
      private counted = false

      override end(...args: unknown[]): this {
        ;(super.end as (...args: unknown[]) => this)(...args)
        if (!this.counted) {
          this.counted = true
          requestFigures.record(routeLabel(pathOf(this.req.url)), this.statusCode, (performance.now() - this.startedAt) / 1000)
        }
        return this
      }
    },
    rateLimited(policy: string) {
      rateLimited.inc({ policy })
    },
    async scrape(): Promise<{ contentType: string; body: string }> {
      return { contentType: registry.contentType, body: await registry.metrics() }
    },
    /** The figures as data, for the primary of `serve --workers N` to aggregate (prom-client's AggregatorRegistry). */
    json: () => registry.getMetricsAsJSON(),
  }
}

export type Metrics = ReturnType<typeof createMetrics>
