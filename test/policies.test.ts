import { createHash } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'drizzle-orm'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import WebSocket from 'ws'
import { logFilter } from '../src/codecs/index.js'
import { attachLogPartitions, dropLogPartition, LOG_PARTITION_BLOCKS, logPartitions } from '../src/db/log-partitions.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain, mineEmptyBlocks } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

// Small limits, so that every limit is cheap to reach; each test speaks from its own client address
// (X-Forwarded-For, trusted here) so that the public rate limit of one test does not spill into another.
const PUBLIC = { rate: 4, batch: 10, body: 4_096, range: 5, logs: 5 }
const DEDICATED = { batch: 50, body: 65_536, range: 50, logs: 1_000, batchResponse: 20_000 }

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let clients = 0
const freshClient = () => `10.0.${Math.floor(++clients / 250)}.${clients % 250}`

type Answer = { status: number; headers: Headers; body: any }

async function post(url: string, body: unknown, { from = freshClient() }: { from?: string } = {}): Promise<Answer> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': from },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: text === '' ? null : JSON.parse(text) }
}

const call = (method: string, params: unknown[] = [], id: number = 1) => ({ jsonrpc: '2.0', id, method, params })
const hex = (n: number) => `0x${n.toString(16)}`

beforeAll(async () => {
  anvil = await startAnvil()
  await generateChain(anvil.rpcUrl, { seed: 61, blocks: 30, txPerBlock: [2, 6] })
  await mineEmptyBlocks(anvil.rpcUrl, DEDICATED.range)
  database = await createTestDatabase()
  gateway = await startTestGateway({
    upstreamRpc: anvil.rpcUrl,
    databaseUrl: database.databaseUrl,
    trustProxy: true,
    publicRateLimit: PUBLIC.rate,
    publicMaxBatch: PUBLIC.batch,
    publicMaxBody: PUBLIC.body,
    publicMaxBlockRange: PUBLIC.range,
    publicMaxLogs: PUBLIC.logs,
    maxBatch: DEDICATED.batch,
    maxBatchResponse: DEDICATED.batchResponse,
    maxBody: DEDICATED.body,
    maxBlockRange: DEDICATED.range,
    maxLogs: DEDICATED.logs,
  })
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  await gateway?.stop()
  await database?.drop()
  await anvil?.stop()
})

describe('methods refused on the public endpoint', () => {
  test('eth_getBlockReceipts on the public endpoint: HTTP 403 with a -32004 error', async () => {
    for (const path of ['/', '/rpc']) {
      const answer = await post(`${gateway.url}${path}`, call('eth_getBlockReceipts', ['latest'], 7))
      expect(answer.status).toBe(403)
      expect(answer.body).toEqual({ jsonrpc: '2.0', id: 7, error: { code: -32004, message: 'method eth_getBlockReceipts is not available on this endpoint' } })
    }
  })

  test('inside a batch: a -32004 entry beside the other answers, HTTP 200', async () => {
    const answer = await post(gateway.url, [call('eth_blockNumber', [], 1), call('eth_getBlockReceipts', ['latest'], 2), call('eth_chainId', [], 3)])
    expect(answer.status).toBe(200)
    expect(answer.body.map((entry: any) => entry.id)).toEqual([1, 2, 3])
    expect(answer.body[0].result).toMatch(/^0x/)
    expect(answer.body[1]).toEqual({ jsonrpc: '2.0', id: 2, error: { code: -32004, message: 'method eth_getBlockReceipts is not available on this endpoint' } })
    expect(answer.body[2].result).toBe('0x7a69')
  })

  test('a dedicated endpoint serves it, as the node does, alone and in a batch', async () => {
    const head = await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber')
    const reference = await anvilCall(anvil.rpcUrl, 'eth_getBlockReceipts', [head])
    const single = await post(gateway.dedicatedUrl, call('eth_getBlockReceipts', [head]))
    expect(single.status).toBe(200)
    expect(single.body.result).toEqual(reference)
    const batch = await post(gateway.dedicatedUrl, [call('eth_getBlockReceipts', [head], 1), call('eth_getBlockReceipts', ['0x1'], 2)])
    expect(batch.body[0].result).toEqual(reference)
    expect(batch.body[1].result).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getBlockReceipts', ['0x1']))
  })
})

describe('API keys', () => {
  test('an unknown key: HTTP 401 with a JSON-RPC error body, and nothing runs', async () => {
    for (const key of ['fg_nope', 'x'.repeat(200), '%zz', '']) {
      const answer = await post(`${gateway.url}/rpc/${key}`, call('eth_blockNumber'))
      expect(answer.status).toBe(401)
      // The request's id comes back, as on any other JSON-RPC error.
      expect(answer.body).toEqual({ jsonrpc: '2.0', id: 1, error: { code: -32000, message: 'unknown or revoked API key' } })
    }
  })

  test('a revoked key is refused within seconds; other keys keep working', async () => {
    const { key } = await gateway.resolvers.createApiKey({ name: 'to-revoke', policy: 'dedicated', rateLimit: 0 })
    const url = `${gateway.url}/rpc/${key}`
    expect((await post(url, call('eth_blockNumber'))).status).toBe(200)
    expect(await gateway.resolvers.revokeApiKey('to-revoke')).toMatchObject({ name: 'to-revoke', revokedAt: expect.any(Date) })
    await expect.poll(async () => (await post(url, call('eth_blockNumber'))).status, { timeout: 10_000, interval: 200 }).toBe(401)
    expect((await post(gateway.dedicatedUrl, call('eth_blockNumber'))).status).toBe(200)
  })

  test('keys are stored as SHA-256 digests, never in plain text', async () => {
    const { key, record } = await gateway.resolvers.createApiKey({ name: 'hashed', policy: 'dedicated', rateLimit: 10 })
    const [row] = await gateway.db.query<{ key_hash: Uint8Array; prefix: string; everything: string }>(
      sql`select key_hash, prefix, row_to_json(api_keys)::text as everything from api_keys where id = ${record.id}`,
    )
    expect(Buffer.from(row!.key_hash).equals(createHash('sha256').update(key).digest())).toBe(true)
    expect(row!.everything).not.toContain(key.slice(10))
    expect(key.startsWith(row!.prefix)).toBe(true)
  })

  test('a key with the public policy gets the public limits under its own rate', async () => {
    const { key } = await gateway.resolvers.createApiKey({ name: 'public-key', policy: 'public', rateLimit: 0 })
    const url = `${gateway.url}/rpc/${key}`
    expect((await post(url, call('eth_getBlockReceipts', ['latest']))).status).toBe(403)
    // No rate limit on this key: far more than the public burst from one address goes through.
    const answers = await Promise.all(Array.from({ length: 3 * PUBLIC.rate }, () => post(url, call('eth_blockNumber'), { from: '10.9.9.9' })))
    expect(answers.every((answer) => answer.status === 200)).toBe(true)
  })
})

describe('rate limits', () => {
  test('over the public rate from one address: HTTP 429, -32005 and Retry-After; another address is unaffected', async () => {
    const from = freshClient()
    const started = Date.now()
    const answers = await Promise.all(Array.from({ length: 10 * PUBLIC.rate }, (_, i) => post(gateway.url, call('eth_blockNumber', [], i), { from })))
    const elapsedSeconds = (Date.now() - started) / 1000
    const accepted = answers.filter((answer) => answer.status === 200)
    const refused = answers.filter((answer) => answer.status === 429)
    expect(accepted.length + refused.length).toBe(answers.length)
    // The burst, plus what refilled while the requests were in flight.
    expect(accepted.length).toBeGreaterThanOrEqual(PUBLIC.rate)
    expect(accepted.length).toBeLessThanOrEqual(PUBLIC.rate + Math.ceil(elapsedSeconds * PUBLIC.rate) + 1)
    for (const answer of refused) {
      expect(answer.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32005, message: expect.stringMatching(/rate limit exceeded/) } })
      expect(answer.body.id).toEqual(expect.any(Number))
      expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    }
    expect((await post(gateway.url, call('eth_blockNumber'))).status).toBe(200)
  })

  test('a batch costs one request per call: a full batch empties the bucket and the next request waits', async () => {
    const from = freshClient()
    const batch = Array.from({ length: PUBLIC.batch }, (_, i) => call('eth_chainId', [], i))
    expect((await post(gateway.url, batch, { from })).status).toBe(200)
    const next = await post(gateway.url, call('eth_chainId'), { from })
    expect(next.status).toBe(429)
    // The debt of the batch (10 calls against a bucket of 4) takes ceil((1 + 6) / 4) = 2 s to repay.
    expect(Number(next.headers.get('retry-after'))).toBe(2)
  })

  test("a dedicated key is limited at its own rate, whatever the client's address", async () => {
    const { key } = await gateway.resolvers.createApiKey({ name: 'slow-key', policy: 'dedicated', rateLimit: 2 })
    const url = `${gateway.url}/rpc/${key}`
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(url, call('eth_blockNumber'))))
    expect(answers.filter((answer) => answer.status === 429).length).toBeGreaterThanOrEqual(4)
    // The test's own key has no limit.
    const unlimited = await Promise.all(Array.from({ length: 40 }, () => post(gateway.dedicatedUrl, call('eth_blockNumber'))))
    expect(unlimited.every((answer) => answer.status === 200)).toBe(true)
  })

  test('GraphQL is limited per address at the public rate', async () => {
    const from = freshClient()
    const answers = await Promise.all(
      Array.from({ length: 3 * PUBLIC.rate }, () =>
        fetch(`${gateway.url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': from },
          body: JSON.stringify({ query: '{ block { number } }' }),
        }),
      ),
    )
    const refused = answers.filter((answer) => answer.status === 429)
    expect(refused.length).toBeGreaterThan(0)
    expect(await refused[0]!.json()).toEqual({ errors: [{ message: expect.stringMatching(/rate limit exceeded/), extensions: { code: 'RATE_LIMITED' } }] })
    expect(Number(refused[0]!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  })
})

describe('size limits', () => {
  test('a batch over the policy size: -32600 batch too large; the dedicated limit is higher', async () => {
    const batch = (n: number) => Array.from({ length: n }, (_, i) => call('eth_chainId', [], i))
    const over = await post(gateway.url, batch(PUBLIC.batch + 1))
    expect(over.body).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32600, message: `batch too large: at most ${PUBLIC.batch} requests` } })
    expect((await post(gateway.dedicatedUrl, batch(PUBLIC.batch + 1))).body).toHaveLength(PUBLIC.batch + 1)
    expect((await post(gateway.dedicatedUrl, batch(DEDICATED.batch + 1))).body.error.message).toBe(`batch too large: at most ${DEDICATED.batch} requests`)
  })

  test("a batch's answers past the policy's bytes: the calls not yet started get -32003 response too large, as geth's", async () => {
    // One answer's size as the server writes it (the bytes after `"result":` in a single call's answer).
    const filter = { fromBlock: '0x1', toBlock: '0x1e' }
    const single = await fetch(gateway.dedicatedUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(call('eth_getLogs', [filter])),
    })
    const text = await single.text()
    const size = Buffer.byteLength(text) - Buffer.byteLength('{"jsonrpc":"2.0","id":1,"result":}')
    const expected = JSON.parse(text).result
    expect(expected.length).toBeGreaterThan(0)
    // The answers that fit, then the one that crosses the bound; the calls running beside it (at most 8 in all)
    // finish and keep their answers, and every call not yet started is refused.
    const answeredCount = Math.floor(DEDICATED.batchResponse / size) + 1
    const running = 8
    const calls = answeredCount + running + 12
    const batch = Array.from({ length: calls }, (_, i) => call('eth_getLogs', [filter], i))
    batch.splice(calls - 1, 0, { jsonrpc: '2.0', method: 'eth_getLogs', params: [filter] } as never)
    const answer = await post(gateway.dedicatedUrl, batch)
    expect(answer.status).toBe(200)
    expect(answer.body.map((entry: { id: number }) => entry.id)).toEqual([...Array(calls).keys()])
    const answered = answer.body.filter((entry: { result?: unknown }) => entry.result !== undefined)
    const refused = answer.body.filter((entry: { error?: unknown }) => entry.error !== undefined)
    expect(answered.length).toBeGreaterThanOrEqual(answeredCount)
    expect(answered.length).toBeLessThan(answeredCount + running)
    for (const entry of answered) expect(entry.result).toEqual(expected)
    expect(refused).toHaveLength(calls - answered.length)
    for (const entry of refused) expect(entry.error).toEqual({ code: -32003, message: 'response too large' })
    // A batch whose last answer is the one crossing the bound is answered whole.
    const under = await post(
      gateway.dedicatedUrl,
      Array.from({ length: answeredCount }, (_, i) => call('eth_getLogs', [filter], i)),
    )
    expect(under.body.every((entry: { result?: unknown }) => entry.result !== undefined)).toBe(true)
  })

  test("errors count against a batch's bytes too: calls whose node answers are reverts of kilobytes are refused past the bound", async () => {
    // Code that reverts with 4,000 zero bytes: the node's error carries them as data (8 KB of hex each).
    const revertBytes = 4_000
    const reverting = `0x61${revertBytes.toString(16).padStart(4, '0')}6000fd`
    const target = `0x${'ab'.repeat(20)}`
    const revert = (id: number) => call('eth_call', [{ to: target }, 'latest', { [target]: { code: reverting } }], id)
    const single = await post(gateway.dedicatedUrl, revert(1))
    expect(single.body.error.data).toBe(`0x${'00'.repeat(revertBytes)}`)
    const errorSize = JSON.stringify(single.body.error).length
    const calls = Math.ceil(DEDICATED.batchResponse / errorSize) + 8 + 12
    expect(calls).toBeLessThanOrEqual(DEDICATED.batch)
    const answer = await post(
      gateway.dedicatedUrl,
      Array.from({ length: calls }, (_, i) => revert(i)),
    )
    expect(answer.status).toBe(200)
    const refused = answer.body.filter((entry: { error: { code: number } }) => entry.error.code === -32003)
    const reverted = answer.body.filter((entry: { error: { code: number } }) => entry.error.code !== -32003)
    expect(refused.length).toBeGreaterThanOrEqual(12)
    // At most the bound's worth and the calls that were running when it was crossed.
    expect(reverted.length * errorSize).toBeLessThanOrEqual(DEDICATED.batchResponse + 8 * errorSize)
    for (const entry of reverted) expect(entry.error).toEqual(single.body.error)
  })

  test('a body over the policy size: HTTP 413 with a JSON-RPC error; the dedicated limit is higher', async () => {
    const body = JSON.stringify({ ...call('eth_chainId'), padding: 'x'.repeat(PUBLIC.body) })
    const over = await post(gateway.url, body)
    expect(over.status).toBe(413)
    expect(over.body).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32600, message: `request body exceeds ${PUBLIC.body} bytes` } })
    expect((await post(gateway.dedicatedUrl, body)).body).toEqual({ jsonrpc: '2.0', id: 1, result: '0x7a69' })
    expect((await post(gateway.dedicatedUrl, JSON.stringify({ ...call('eth_chainId'), padding: 'x'.repeat(DEDICATED.body) }))).status).toBe(413)
  })

  test('eth_getLogs block range: the public cap names a range that fits; the dedicated cap is wider', async () => {
    const filter = { fromBlock: '0x1', toBlock: hex(1 + PUBLIC.range) }
    const refused = await post(gateway.url, call('eth_getLogs', [filter]))
    expect(refused.body.error).toEqual({
      code: -32602,
      message: `block range too large: at most ${PUBLIC.range} blocks per query. Try with this block range [0x1, ${hex(PUBLIC.range)}].`,
      data: { from: '0x1', to: hex(PUBLIC.range), limit: PUBLIC.range },
    })
    expect((await post(gateway.dedicatedUrl, call('eth_getLogs', [filter]))).body.result).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getLogs', [filter]))
    const tooWide = await post(gateway.dedicatedUrl, call('eth_getLogs', [{ fromBlock: '0x0', toBlock: hex(DEDICATED.range) }]))
    expect(tooWide.body.error.message).toMatch(`at most ${DEDICATED.range} blocks per query`)
  })

  test('eth_getLogs result cap: the public cap refuses what the dedicated one answers', async () => {
    // A window of the public range size holding more logs than the public cap.
    const all = await anvilCall<{ blockNumber: string }[]>(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }])
    const perBlock = new Map<number, number>()
    for (const log of all) perBlock.set(Number(log.blockNumber), (perBlock.get(Number(log.blockNumber)) ?? 0) + 1)
    const start = [...perBlock.keys()].find((block) => {
      let count = 0
      for (let n = block; n < block + PUBLIC.range; n++) count += perBlock.get(n) ?? 0
      return count > PUBLIC.logs
    })!
    const filter = { fromBlock: hex(start), toBlock: hex(start + PUBLIC.range - 1) }
    const refused = await post(gateway.url, call('eth_getLogs', [filter]))
    expect(refused.body.error).toMatchObject({ code: -32602, message: expect.stringMatching(`query returned more than ${PUBLIC.logs} results`) })
    const answered = await post(gateway.dedicatedUrl, call('eth_getLogs', [filter]))
    expect(answered.body.result).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getLogs', [filter]))
    // The answer cache does not let the public endpoint around its cap either.
    expect((await post(gateway.url, call('eth_getLogs', [filter]))).body.error.code).toBe(-32602)
  })

  test('a log query no index answers exactly is priced first and refused over the cost limit, with a smaller range', async () => {
    const limits = { ...gateway.resolvers.limits, maxQueryCost: 1 }
    const logs = await anvilCall<{ address: string; topics: string[] }[]>(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }])
    const withTopics = logs.find((log) => log.topics.length >= 2)!
    const topicOnly = logFilter.parse({ fromBlock: '0x1', toBlock: '0x20', topics: [null, withTopics.topics[1]] })
    await expect(gateway.resolvers.getLogs({ filter: topicOnly, limits })).rejects.toThrow(
      /^query would scan too many logs \(estimated cost \d+, at most 1\); filter by address and topic0, or ask for fewer blocks\. Try with this block range \[0x1, 0x[0-9a-f]+\]\.$/,
    )
    // An address with topic0 is answered by its index: never priced, answered as the node does.
    const exact = { fromBlock: '0x1', toBlock: '0x20', address: withTopics.address, topics: [withTopics.topics[0]] }
    expect(await gateway.resolvers.getLogs({ filter: logFilter.parse(exact), limits })).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getLogs', [exact]))
    // The default limit lets this small chain's scans through.
    expect(await gateway.resolvers.getLogs({ filter: topicOnly, limits: { ...limits, maxQueryCost: 250_000 } })).toEqual(
      await anvilCall(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x20', topics: [null, withTopics.topics[1]] }]),
    )
  })

  test('GraphQL logs follow the public block-range cap', async () => {
    const response = await fetch(`${gateway.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': freshClient() },
      body: JSON.stringify({ query: `{ logs(filter: { fromBlock: { number: 1 }, toBlock: { number: ${2 + PUBLIC.range} } }) { nodes { logIndex } } }` }),
    })
    const body = (await response.json()) as any
    expect(body.errors[0]).toMatchObject({ message: expect.stringMatching(`at most ${PUBLIC.range} blocks per query`), extensions: { code: 'LIMIT_EXCEEDED' } })
  })
})

test('GET /metrics counts answers by route and refusals by policy, and never names a key', async () => {
  const text = await (await fetch(`${gateway.url}/metrics`)).text()
  expect(text).toMatch(/^flashgate_http_requests_total\{route="\/rpc\/:apiKey",status="401"\} \d+$/m)
  expect(text).toMatch(/^flashgate_http_requests_total\{route="\/",status="403"\} \d+$/m)
  expect(text).toMatch(/^flashgate_rate_limited_total\{policy="public"\} [1-9]\d*$/m)
  expect(text).toMatch(/^flashgate_index_head_block \d+$/m)
  expect(text).toMatch(/^flashgate_process_resident_memory_bytes \d+$/m)
  expect(text).not.toContain(gateway.dedicatedUrl.split('/rpc/')[1])
})

test('GET /metrics counts the partitions of logs by state, a bare one (a backfill\u2019s, until its seal) among them', async () => {
  const count = (text: string, state: string) => Number(text.match(new RegExp(`^flashgate_logs_partitions\\{state="${state}"\\} (\\d+)$`, 'm'))?.[1] ?? -1)
  const before = await (await fetch(`${gateway.url}/metrics`)).text()
  expect(count(before, 'written')).toBeGreaterThan(0)
  expect(count(before, 'sealed')).toBe(0)
  expect(count(before, 'bare')).toBe(0)
  // A partition far above the chain, attached bare as a backfill far below the head attaches one.
  const far = 1_000_000_000
  await attachLogPartitions(gateway.db, far, far, LOG_PARTITION_BLOCKS, Number.POSITIVE_INFINITY)
  try {
    const after = await (await fetch(`${gateway.url}/metrics`)).text()
    expect(count(after, 'bare')).toBe(1)
    expect(count(after, 'written')).toBe(count(before, 'written'))
  } finally {
    await dropLogPartition(gateway.db, (await logPartitions(gateway.db)).find((partition) => partition.from === far)!)
  }
})

test('GET /metrics counts each answer once, with its time, as it ends', async () => {
  const figure = (text: string, pattern: RegExp) => Number(text.match(pattern)?.[1] ?? 0)
  const scrape = async () => {
    const text = await (await fetch(`${gateway.url}/metrics`)).text()
    return {
      answered: figure(text, /^flashgate_http_requests_total\{route="\/healthz",status="200"\} (\d+)$/m),
      timed: figure(text, /^flashgate_http_request_duration_seconds_count\{route="\/healthz"\} (\d+)$/m),
      slow: figure(text, /^flashgate_http_request_duration_seconds_bucket\{le="\+Inf",route="\/healthz"\} (\d+)$/m),
    }
  }
  const before = await scrape()
  for (let call = 0; call < 7; call++) expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
  const after = await scrape()
  expect(after.answered - before.answered).toBe(7)
  expect(after.timed - before.timed).toBe(7)
  expect(after.slow - before.slow).toBe(7)
})

describe('WebSocket endpoints', () => {
  function open(url: string): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url.replace('http', 'ws'), { headers: { 'x-forwarded-for': freshClient() } })
      socket.once('open', () => resolve(socket))
      socket.once('unexpected-response', (_request, response) => reject(new Error(`HTTP ${response.statusCode}`)))
      socket.once('error', reject)
    })
  }
  function ask(socket: WebSocket, message: unknown): Promise<any> {
    return new Promise((resolve) => {
      socket.once('message', (data) => resolve(JSON.parse(data.toString())))
      socket.send(JSON.stringify(message))
    })
  }

  test('the public socket refuses eth_getBlockReceipts and a dedicated one serves it', async () => {
    const publicSocket = await open(gateway.url)
    expect((await ask(publicSocket, call('eth_getBlockReceipts', ['latest']))).error.code).toBe(-32004)
    publicSocket.close()
    const dedicated = await open(gateway.dedicatedUrl)
    expect((await ask(dedicated, call('eth_getBlockReceipts', ['0x1']))).result).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getBlockReceipts', ['0x1']))
    dedicated.close()
  })

  test('a connection holds at most 100 subscriptions', async () => {
    const socket = await open(gateway.dedicatedUrl)
    const ids: string[] = []
    for (let i = 0; i < 100; i++) ids.push((await ask(socket, call('eth_subscribe', ['newHeads'], i))).result)
    expect(new Set(ids).size).toBe(100)
    expect((await ask(socket, call('eth_subscribe', ['newHeads'], 100))).error).toEqual({
      code: -32602,
      message: 'too many subscriptions on this connection: at most 100; unsubscribe first',
    })
    expect((await ask(socket, call('eth_unsubscribe', [ids[0]], 101))).result).toBe(true)
    expect((await ask(socket, call('eth_subscribe', ['newHeads'], 102))).result).toMatch(/^0x[1-9a-f][0-9a-f]{0,31}$/)
    socket.close()
  })

  test('an unknown key cannot open a socket: HTTP 401', async () => {
    await expect(open(`${gateway.url}/rpc/fg_unknown`)).rejects.toThrow('HTTP 401')
  })

  test('messages on a public socket count against the rate limit', async () => {
    const socket = await open(gateway.url)
    const answers = []
    for (let i = 0; i < 2 * PUBLIC.rate + 2; i++) answers.push(await ask(socket, call('eth_chainId', [], i)))
    const refused = answers.filter((answer) => answer.error?.code === -32005)
    expect(refused.length).toBeGreaterThan(0)
    socket.close()
    await sleep(10)
  })
})
