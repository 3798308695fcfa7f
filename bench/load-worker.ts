import { readFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import autocannon from 'autocannon'
import type { LoadJob, LoadReport } from './load.js'
import { nearestRank } from './quantile.js'

// Runs in a child process so that the load generator does not share the gateway's event loop.

/** Per-request timeout under load, in seconds (autocannon's unit). */
const REQUEST_TIMEOUT_S = 30
/** Leading bodies of a sequential job, sent untimed to warm the connection and the database buffers. */
const SEQUENTIAL_WARMUP = 20

process.once('message', (job: LoadJob) => {
  const bodies = readFileSync(job.bodiesFile, 'utf8').split('\n')
  const cpu = process.cpuUsage()
  const run = job.mode === 'throughput' ? throughput(job, bodies) : sequential(job, bodies)
  run.then(
    (report) => {
      const used = process.cpuUsage(cpu)
      process.send!({ ...report, cpuSeconds: (used.user + used.system) / 1e6, pid: process.pid } satisfies LoadReport, () => process.exit(0))
    },
    (error: unknown) => process.send!({ error: error instanceof Error ? error.message : String(error) }, () => process.exit(1)),
  )
})

async function throughput(job: LoadJob, bodies: string[]): Promise<LoadReport> {
  const latencies: number[] = []
  let rpcErrors = 0
  let next = 0
  const instance = autocannon({
    url: job.url,
    connections: job.connections,
    duration: job.durationS,
    timeout: REQUEST_TIMEOUT_S,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(job.acceptEncoding === undefined ? {} : { 'accept-encoding': job.acceptEncoding }) },
    requests: [
      {
        setupRequest: (request) => ({ ...request, body: bodies[next++ % bodies.length] }),
        // Results are hex and numbers only: `"error"` can only be a JSON-RPC error object.
        onResponse: (_status, body) => {
          if (body.includes('"error"')) rpcErrors++
        },
      },
    ],
  })
  // autocannon's own histogram has 1 ms resolution; keep every latency (ms, float) instead.
  instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTime: number) => latencies.push(responseTime))
  const result = await instance
  return {
    requests: latencies.length,
    seconds: result.duration,
    requestsPerSecond: latencies.length / result.duration,
    ...percentiles(latencies),
    failures: result.errors + result.timeouts + result.non2xx + rpcErrors,
  }
}

async function sequential(job: LoadJob, bodies: string[]): Promise<LoadReport> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const url = new URL(job.url)
  const post = (body: string) =>
    new Promise<string>((resolve, reject) => {
      const call = request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (response) => {
          const chunks: Buffer[] = []
          response.on('data', (chunk: Buffer) => chunks.push(chunk))
          response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
          response.on('error', reject)
        },
      )
      call.setTimeout(REQUEST_TIMEOUT_S * 1000, () => call.destroy(new Error('request timed out')))
      call.on('error', reject)
      call.end(body)
    })

  for (const body of bodies.slice(0, SEQUENTIAL_WARMUP)) await post(body)
  const latencies: number[] = []
  let failures = 0
  const started = performance.now()
  const deadline = started + job.durationS * 1000
  for (const body of bodies.slice(SEQUENTIAL_WARMUP)) {
    if (performance.now() > deadline) break
    const mark = performance.now()
    const answer = await post(body)
    latencies.push(performance.now() - mark)
    if (answer.includes('"error"')) failures++
  }
  const seconds = (performance.now() - started) / 1000
  agent.destroy()
  return { requests: latencies.length, seconds, requestsPerSecond: latencies.length / seconds, ...percentiles(latencies), failures }
}

function percentiles(latencies: number[]): Pick<LoadReport, 'p50Ms' | 'p90Ms' | 'p99Ms' | 'meanMs'> {
  const sorted = Float64Array.from(latencies).sort()
  const at = (fraction: number) => nearestRank(sorted, fraction)
  const mean = sorted.reduce((sum, value) => sum + value, 0) / sorted.length
  return { p50Ms: at(0.5), p90Ms: at(0.9), p99Ms: at(0.99), meanMs: mean }
}
