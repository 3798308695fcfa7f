import { Agent, request } from 'node:http'
import { type Address, numberToHex, pad } from 'viem'
import { RECIPIENTS, RECIPIENT_ZIPF_EXPONENT, createRandom, createZipf, tailRecipient } from '../src/devnet/base-mix.js'
import { TRANSFER_TOPIC } from '../src/devnet/contracts.js'
import { SWAP_TOPIC } from '../src/devnet/pool.js'
import type { FollowLoadJob, FollowLoadReport, MethodFigures } from './follow-load.js'
import { nearestRank } from './quantile.js'

// Runs in a child process (follow-load.ts forks it): a mixed read load against a gateway that follows a
// moving chain, every request asked about the chain as it is now (recent blocks, the pending block).

/** What the load asks, and how often: a wallet's and a dapp's reads, an indexer's receipts, GraphQL. */
const MIX = [
  ['eth_getLogs (hot contract, last 1-3 blocks)', 0.1],
  ['eth_getLogs (account history, last 1,000 blocks)', 0.05],
  ['eth_getBlockReceipts (recent block)', 0.05],
  ['eth_getBalance latest', 0.15],
  ['eth_getBalance pending', 0.1],
  ['eth_getTransactionCount latest', 0.1],
  ['eth_getTransactionCount pending', 0.1],
  ['eth_getBlockByNumber pending', 0.1],
  ['eth_blockNumber', 0.1],
  ['graphql (wallet: head, pending account, transfers)', 0.15],
] as const
type Method = (typeof MIX)[number][0]

const HOT_LOG_BLOCKS = 3
const HISTORY_BLOCKS = 1_000
const RECENT_RECEIPT_BLOCKS = 20
const SENDER_ZIPF_EXPONENT = 0.9
const HEAD_POLL_MS = 250
const SCHEDULE_TICK_MS = 5
const REQUEST_TIMEOUT_MS = 30_000
const WINDOW_S = 60
const GRAPHQL_WALLET = `query Wallet($address: Address!, $filter: LogFilter!) {
  block { number timestamp transactionCount }
  account(address: $address, block: { tag: PENDING }) { balance transactionCount }
  logs(filter: $filter, first: 20) { nodes { transactionHash logIndex data } }
}`

type Sent = { method: Method; url: string; body: string }

process.once('message', (job: FollowLoadJob) => {
  run(job).then(
    (report) => process.send!(report, () => process.exit(0)),
    (error: unknown) => process.send!({ error: error instanceof Error ? error.message : String(error) }, () => process.exit(1)),
  )
})

async function run(job: FollowLoadJob): Promise<FollowLoadReport> {
  const agent = new Agent({ keepAlive: true, maxSockets: job.connections + 1 })
  const random = createRandom(job.seed)
  const recipientRank = createZipf(RECIPIENTS, RECIPIENT_ZIPF_EXPONENT)
  const senderRank = createZipf(job.senders.length, SENDER_ZIPF_EXPONENT)
  const hot = [
    ...job.contracts.pools.map((address) => ({ address, topic: SWAP_TOPIC })),
    ...job.contracts.tokens.map((address) => ({ address, topic: TRANSFER_TOPIC })),
  ]
  const pickMethod = (): Method => {
    let roll = random.next()
    for (const [method, share] of MIX) if ((roll -= share) < 0) return method
    return MIX[0][0]
  }
  const recipient = () => tailRecipient(job.profileSeed, recipientRank(random))
  const account = (): Address => (random.next() < 0.5 ? (job.senders[senderRank(random)] as Address) : recipient())
  let head = 0

  const rpc = (method: Method, name: string, params: unknown[]): Sent => ({
    method,
    url: job.rpcUrl,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: name, params }),
  })
  function next(): Sent {
    const method = pickMethod()
    switch (method) {
      case 'eth_getLogs (hot contract, last 1-3 blocks)': {
        const { address, topic } = hot[Math.floor(random.next() * hot.length)]!
        const blocks = random.int(1, HOT_LOG_BLOCKS)
        return rpc(method, 'eth_getLogs', [{ address, topics: [topic], fromBlock: numberToHex(Math.max(1, head - blocks + 1)), toBlock: numberToHex(head) }])
      }
      case 'eth_getLogs (account history, last 1,000 blocks)': {
        const token = job.contracts.tokens[Math.floor(random.next() * job.contracts.tokens.length)]!
        const topics = [TRANSFER_TOPIC, null, pad(recipient())]
        return rpc(method, 'eth_getLogs', [
          { address: token, topics, fromBlock: numberToHex(Math.max(1, head - HISTORY_BLOCKS + 1)), toBlock: numberToHex(head) },
        ])
      }
      case 'eth_getBlockReceipts (recent block)':
        return rpc(method, 'eth_getBlockReceipts', [numberToHex(Math.max(1, head - random.int(0, RECENT_RECEIPT_BLOCKS)))])
      case 'eth_getBalance latest':
      case 'eth_getBalance pending':
        return rpc(method, 'eth_getBalance', [account(), method.endsWith('pending') ? 'pending' : 'latest'])
      case 'eth_getTransactionCount latest':
      case 'eth_getTransactionCount pending':
        return rpc(method, 'eth_getTransactionCount', [account(), method.endsWith('pending') ? 'pending' : 'latest'])
      case 'eth_getBlockByNumber pending':
        return rpc(method, 'eth_getBlockByNumber', ['pending', false])
      case 'eth_blockNumber':
        return rpc(method, 'eth_blockNumber', [])
      case 'graphql (wallet: head, pending account, transfers)': {
        const address = account()
        const filter = {
          addresses: job.contracts.tokens,
          topics: [[TRANSFER_TOPIC], null, [pad(address)]],
          fromBlock: { number: String(Math.max(1, head - HISTORY_BLOCKS + 1)) },
        }
        return { method, url: job.graphqlUrl, body: JSON.stringify({ query: GRAPHQL_WALLET, variables: { address, filter } }) }
      }
    }
  }

  function post(url: string, body: string): Promise<{ status: number; body: Buffer }> {
    const target = new URL(url)
    return new Promise((resolve, reject) => {
      const call = request(
        {
          agent,
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (response) => {
          const chunks: Buffer[] = []
          response.on('data', (chunk: Buffer) => chunks.push(chunk))
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks) }))
          response.on('error', reject)
        },
      )
      call.setTimeout(REQUEST_TIMEOUT_MS, () => call.destroy(new Error('request timed out')))
      call.on('error', reject)
      call.end(body)
    })
  }

  const latencies = new Map<Method, number[]>(MIX.map(([method]) => [method, []]))
  const failures = new Map<Method, number>()
  const bytes = new Map<Method, number>()
  const windows: { requests: number; latencies: number[] }[] = []
  const failureSamples: string[] = []
  let started = 0
  let inFlight = 0
  let behind = 0

  async function one(): Promise<void> {
    const { method, url, body } = next()
    inFlight++
    const sentAt = performance.now()
    let failed = false
    try {
      const answer = await post(url, body)
      // Results are hex, numbers and names: `"error"` (JSON-RPC) or `"errors"` (GraphQL) is only ever a failure.
      failed = answer.status !== 200 || answer.body.includes('"error"') || answer.body.includes('"errors"')
      if (failed && failureSamples.length < 5) failureSamples.push(`${method}: ${answer.status} ${answer.body.subarray(0, 300).toString('utf8')}`)
      bytes.set(method, (bytes.get(method) ?? 0) + answer.body.length)
    } catch (error) {
      failed = true
      if (failureSamples.length < 5) failureSamples.push(`${method}: ${error instanceof Error ? error.message : String(error)}`)
    } finally {
      inFlight--
    }
    const latency = performance.now() - sentAt
    latencies.get(method)!.push(latency)
    if (failed) failures.set(method, (failures.get(method) ?? 0) + 1)
    const window = Math.floor((sentAt - started) / 1000 / WINDOW_S)
    windows[window] ??= { requests: 0, latencies: [] }
    windows[window]!.requests++
    windows[window]!.latencies.push(latency)
  }

  const pollHead = async () => {
    const answer = await post(job.rpcUrl, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }))
    head = Number(JSON.parse(answer.body.toString('utf8')).result)
  }
  await pollHead()
  const headTimer = setInterval(() => void pollHead().catch(() => {}), HEAD_POLL_MS)
  started = performance.now()
  const deadline = started + job.durationS * 1000
  const pending = new Set<Promise<void>>()
  const track = (promise: Promise<void>) => {
    pending.add(promise)
    void promise.finally(() => pending.delete(promise))
  }
  if (job.ratePerSecond === 0) {
    // Closed loop: `connections` requests in flight all the time.
    const loop = async () => {
      while (performance.now() < deadline) await one()
    }
    for (let connection = 0; connection < job.connections; connection++) track(loop())
  } else {
    // Open loop at the rate asked, at most `connections` in flight; what cannot be sent in time is counted as behind.
    let issued = 0
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const now = performance.now()
        if (now >= deadline) {
          clearInterval(timer)
          return resolve()
        }
        const due = Math.floor(((now - started) / 1000) * job.ratePerSecond) - issued
        for (let index = 0; index < due; index++) {
          issued++
          if (inFlight >= job.connections) behind++
          else track(one())
        }
      }, SCHEDULE_TICK_MS)
    })
  }
  while (pending.size > 0) await Promise.all([...pending])
  clearInterval(headTimer)
  agent.destroy()
  const seconds = (performance.now() - started) / 1000

  const methods: Record<string, MethodFigures> = {}
  for (const [method, values] of latencies) {
    methods[method] = {
      ...summarise(values, seconds),
      failures: failures.get(method) ?? 0,
      meanKiB: values.length === 0 ? 0 : (bytes.get(method) ?? 0) / values.length / 1024,
    }
  }
  const all = [...latencies.values()].flat()
  return {
    seconds,
    ratePerSecond: job.ratePerSecond,
    connections: job.connections,
    behind,
    total: {
      ...summarise(all, seconds),
      failures: [...failures.values()].reduce((sum, count) => sum + count, 0),
      meanKiB: [...bytes.values()].reduce((sum, count) => sum + count, 0) / Math.max(1, all.length) / 1024,
    },
    methods,
    perMinute: windows.map((window, minute) => ({
      minute,
      requestsPerSecond: window.requests / Math.min(WINDOW_S, seconds - minute * WINDOW_S),
      p99Ms: nearestRank(
        window.latencies.sort((a, b) => a - b),
        0.99,
      ),
    })),
    failureSamples,
  }
}

function summarise(values: number[], seconds: number): Omit<MethodFigures, 'failures' | 'meanKiB'> {
  const sorted = Float64Array.from(values).sort()
  const at = (fraction: number) => nearestRank(sorted, fraction)
  return {
    requests: sorted.length,
    requestsPerSecond: sorted.length / seconds,
    p50Ms: at(0.5),
    p90Ms: at(0.9),
    p99Ms: at(0.99),
    maxMs: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!,
  }
}
