// The parts of autocannon's programmatic API the bench and the load test use (the package ships no types).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events'

  type Request = {
    method?: string
    path?: string
    headers?: Record<string, string>
    body?: string
    setupRequest?: (request: Request, context: Record<string, unknown>) => Request
    onResponse?: (status: number, body: string, context: Record<string, unknown>) => void
  }
  type Histogram = { average: number; mean: number; p50: number; p99: number; total: number; max: number }
  export type Result = {
    requests: Histogram & { sent: number }
    statusCodeStats: Record<string, { count: number }>
    latency: Histogram
    duration: number
    errors: number
    timeouts: number
    non2xx: number
  }
  type Options = {
    url: string
    connections?: number
    duration?: number
    pipelining?: number
    timeout?: number
    method?: string
    headers?: Record<string, string>
    body?: string
    /** Requests per second over all connections (paced); unpaced when omitted. */
    overallRate?: number
    requests?: Request[]
  }
  type Instance = EventEmitter & Promise<Result> & { stop(): void }
  export default function autocannon(options: Options): Instance
}
