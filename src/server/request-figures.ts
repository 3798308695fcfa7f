import { Counter, type Registry } from 'prom-client'

/**
 * The per-request figures of `/metrics` (`flashgate_http_requests_total` by route and status, and
 * `flashgate_http_request_duration_seconds` by route), counted in plain numbers as requests finish and handed
 * to prom-client only when it is scraped.
 *
 * Why not prom-client's `inc` and `observe` per request: each call builds a label object, validates it and
 * hashes it into a string, about as much work as answering a cached call (issue 18). Here a request adds to
 * a counter and to one bucket of an array it finds by route; the exposition, the types and the aggregation
 * over the workers of `serve --workers N` (prom-client's AggregatorRegistry) are prom-client's as before.
 */
export function createRequestFigures({ registry, buckets }: { registry: Registry; buckets: readonly number[] }) {
  /** Requests finished since the last scrape, by route and status, with the prom-client series they go to. */
  const finished = new Map<string, { route: string; status: number; count: number; series: Counter.Internal | null }>()
  new Counter({
    name: 'flashgate_http_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['route', 'status'] as const,
    registers: [registry],
    collect() {
      for (const entry of finished.values()) {
        if (entry.count === 0) continue
        entry.series ??= this.labels({ route: entry.route, status: String(entry.status) })
        entry.series.inc(entry.count)
        entry.count = 0
      }
    },
  })

  /** Durations by route: a count per bucket (the last one is `+Inf`), their sum and their number, since the start. */
  const durations = new Map<string, { counts: Float64Array; sum: number; count: number }>()
  const name = 'flashgate_http_request_duration_seconds'
  const help = 'Time from request to the end of the answer, by route'
  // The same shape prom-client's Histogram gives its registry (`get()`), so that it is written and aggregated alike.
  const histogram = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get() {
      const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = []
      for (const [route, series] of durations) {
        let cumulative = 0
        buckets.forEach((bound, index) => {
          cumulative += series.counts[index]!
          values.push({ labels: { le: bound, route }, value: cumulative, metricName: `${name}_bucket` })
        })
        values.push({ labels: { le: '+Inf', route }, value: series.count, metricName: `${name}_bucket` })
        values.push({ labels: { route }, value: series.sum, metricName: `${name}_sum` })
        values.push({ labels: { route }, value: series.count, metricName: `${name}_count` })
      }
      return { name, help, type: 'histogram', values, aggregator: 'sum' }
    },
    reset() {
      durations.clear()
    },
  }
  registry.registerMetric(histogram as unknown as Counter)

  return {
    /** A request to `route` finished with `status` after `seconds`. */
    record(route: string, status: number, seconds: number) {
      const key = status === 200 ? route : `${route} ${status}`
      let entry = finished.get(key)
      if (entry === undefined) finished.set(key, (entry = { route, status, count: 0, series: null }))
      entry.count++
      let series = durations.get(route)
      if (series === undefined) durations.set(route, (series = { counts: new Float64Array(buckets.length + 1), sum: 0, count: 0 }))
      let bucket = 0
      while (bucket < buckets.length && seconds > buckets[bucket]!) bucket++
      series.counts[bucket]!++
      series.sum += seconds
      series.count++
    },
  }
}
