import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { createRequestFigures } from './request-figures.js'

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** The same figures kept by prom-client's own Counter and Histogram: what `/metrics` said before. */
function referenceFigures() {
  const registry = new Registry()
  const requests = new Counter({
    name: 'flashgate_http_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['route', 'status'],
    registers: [registry],
  })
  const durations = new Histogram({
    name: 'flashgate_http_request_duration_seconds',
    help: 'Time from request to the end of the answer, by route',
    labelNames: ['route'],
    buckets: BUCKETS,
    registers: [registry],
  })
  return {
    registry,
    record(route: string, status: number, seconds: number) {
      requests.inc({ route, status: String(status) })
      durations.observe({ route }, seconds)
    },
  }
}

/** Requests of several routes and statuses, with durations on, between and beyond the bucket bounds. */
function requestsOf(seed: number): [string, number, number][] {
  const routes = ['/', '/rpc/:apiKey', '/graphql']
  const statuses = [200, 200, 200, 429, 401]
  const durations = [0, 0.0001, 0.0005, 0.0007, 0.001, 0.003, 0.01, 0.2, 1, 2.5, 9.99, 10, 12]
  return Array.from({ length: 400 }, (_, index) => {
    const at = index * 7 + seed
    return [routes[at % routes.length]!, statuses[(at >> 2) % statuses.length]!, durations[(at >> 1) % durations.length]!]
  })
}

describe('request figures', () => {
  it('expose exactly what prom-client would have for the same requests', async () => {
    const registry = new Registry()
    const figures = createRequestFigures({ registry, buckets: BUCKETS })
    const reference = referenceFigures()
    for (const [route, status, seconds] of requestsOf(1)) {
      figures.record(route, status, seconds)
      reference.record(route, status, seconds)
    }
    expect(await registry.metrics()).toBe(await reference.registry.metrics())
    // Counted once: a second scrape, with more requests between, still agrees.
    for (const [route, status, seconds] of requestsOf(2).slice(0, 50)) {
      figures.record(route, status, seconds)
      reference.record(route, status, seconds)
    }
    expect(await registry.metrics()).toBe(await reference.registry.metrics())
  })

  it('aggregate over the workers of serve --workers N as prom-client figures do', async () => {
    const workers = [1, 2].map((seed) => {
      const registry = new Registry()
      const figures = createRequestFigures({ registry, buckets: BUCKETS })
      const reference = referenceFigures()
      for (const [route, status, seconds] of requestsOf(seed)) {
        figures.record(route, status, seconds)
        reference.record(route, status, seconds)
      }
      return { registry, reference: reference.registry }
    })
    const ours = AggregatorRegistry.aggregate(await Promise.all(workers.map(({ registry }) => registry.getMetricsAsJSON())))
    const theirs = AggregatorRegistry.aggregate(await Promise.all(workers.map(({ reference }) => reference.getMetricsAsJSON())))
    expect(await ours.metrics()).toBe(await theirs.metrics())
    expect(await ours.metrics()).toMatch(/^flashgate_http_request_duration_seconds_count\{route="\/"\} \d+$/m)
  })
})
