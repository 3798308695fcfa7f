import type { IncomingMessage, ServerResponse } from 'node:http'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'

/** Request durations, in seconds: from a cached answer (sub-millisecond) to a capped eth_getLogs. */
const DURATION_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** What the gauges read at scrape time. */
export type MetricsSources = {
  /** Newest block of the index, of the upstream as the ingester last saw it, and whether this process ingests. */
  chain?: () => Promise<{ indexHead: number | null; upstreamHead: number | null; ingesting: boolean }>
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

  const requests = new Counter({
    name: 'flashgate_http_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['route', 'status'] as const,
    registers: [registry],
  })
  const durations = new Histogram({
    name: 'flashgate_http_request_duration_seconds',
    help: 'Time from request to the end of the answer, by route',
    labelNames: ['route'] as const,
    buckets: DURATION_BUCKETS_SECONDS,
    registers: [registry],
  })
  const rateLimited = new Counter({
    name: 'flashgate_rate_limited_total',
    help: 'Requests refused for their rate (HTTP 429 or -32005 on a WebSocket), by endpoint policy',
    labelNames: ['policy'] as const,
    registers: [registry],
  })
  const chain = sources.chain
  if (chain !== undefined) {
    // One read per scrape feeds all three gauges.
    let reading: ReturnType<typeof chain> | null = null
    const read = () => (reading ??= chain().finally(() => setImmediate(() => (reading = null))))
    new Gauge({
      name: 'flashgate_index_head_block',
      help: 'Newest block in the index',
      registers: [registry],
      async collect() {
        const { indexHead } = await read()
        if (indexHead !== null) this.set(indexHead)
      },
    })
    new Gauge({
      name: 'flashgate_upstream_head_block',
      help: 'Newest block of the upstream node, as the ingester last saw it',
      registers: [registry],
      async collect() {
        const { upstreamHead } = await read()
        if (upstreamHead !== null) this.set(upstreamHead)
      },
    })
    new Gauge({
      name: 'flashgate_ingesting',
      help: '1 when this process holds the ingest lock',
      registers: [registry],
      async collect() {
        this.set((await read()).ingesting ? 1 : 0)
      },
    })
  }

  return {
    /** Counts the request when its answer has gone out. */
    observe(request: IncomingMessage, response: ServerResponse) {
      const started = process.hrtime.bigint()
      const route = routeLabel((request.url ?? '/').split('?')[0]!)
      response.once('finish', () => {
        requests.inc({ route, status: String(response.statusCode) })
        durations.observe({ route }, Number(process.hrtime.bigint() - started) / 1e9)
      })
    },
    rateLimited(policy: string) {
      rateLimited.inc({ policy })
    },
    async scrape(): Promise<{ contentType: string; body: string }> {
      return { contentType: registry.contentType, body: await registry.metrics() }
    },
  }
}

export type Metrics = ReturnType<typeof createMetrics>
