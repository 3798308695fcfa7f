import { request as httpRequest } from 'node:http'
import { brotliDecompressSync, deflateRawSync, gunzipSync, inflateSync } from 'node:zlib'
import { sql } from 'drizzle-orm'
import { SYNC_KEYS, schema } from '../src/db/index.js'
import { upgradeStorage } from '../src/db/upgrade.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'

type RawAnswer = { status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }

/** One request over a fresh connection, the body as it came on the wire (not decompressed). */
function raw(url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers, agent: false }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks) }))
      response.on('error', reject)
    })
    request.on('error', reject)
    request.end(options.body)
  })
}

function decode(answer: RawAnswer): string {
  const coding = answer.headers['content-encoding']
  if (coding === 'br') return brotliDecompressSync(answer.body).toString()
  if (coding === 'gzip') return gunzipSync(answer.body).toString()
  if (coding === 'deflate') return inflateSync(answer.body).toString()
  return answer.body.toString()
}

const json = { 'content-type': 'application/json' }
const call = (method: string, params: unknown[] = [], id: unknown = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params })

describe('HTTP answers: compression, CORS and refusals with bodies', () => {
  let anvil: Anvil
  let database: TestDatabase
  let gateway: TestGateway
  /** The block with the most logs, and its receipts as the gateway answers them uncompressed. */
  let busiest: { number: string; logs: number; receipts: string }

  beforeAll(async () => {
    anvil = await startAnvil()
    const chain = await generateChain(anvil.rpcUrl, { seed: 13, blocks: 3, txPerBlock: [60, 80] })
    database = await createTestDatabase()
    gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, publicMaxBody: 64 * 1024 })
    await gateway.ingester.waitForBlock(Number(chain.headNumber))
    busiest = { number: '0x0', logs: -1, receipts: '' }
    for (let number = 1n; number <= chain.headNumber; number++) {
      const answer = await raw(gateway.dedicatedUrl, { method: 'POST', headers: json, body: call('eth_getBlockReceipts', [`0x${number.toString(16)}`]) })
      const parsed = JSON.parse(answer.body.toString())
      if (!Array.isArray(parsed.result)) throw new Error(`eth_getBlockReceipts(${number}): ${answer.body.toString().slice(0, 300)}`)
      const receipts = parsed.result as { logs: unknown[] }[]
      const logs = receipts.reduce((sum, receipt) => sum + receipt.logs.length, 0)
      if (logs > busiest.logs) busiest = { number: `0x${number.toString(16)}`, logs, receipts: answer.body.toString() }
    }
  }, 120_000)

  afterAll(async () => {
    await gateway?.stop()
    await anvil?.stop()
    await database?.drop()
  })

  test('eth_getBlockReceipts of a block with many logs comes compressed with br or gzip as negotiated, and decodes to the same answer', async () => {
    const body = call('eth_getBlockReceipts', [busiest.number])
    // The public endpoint refuses whole-block receipts; the dedicated one serves them.
    const plain = await raw(gateway.dedicatedUrl, { method: 'POST', headers: json, body })
    expect(plain.headers['content-encoding']).toBeUndefined()
    expect(plain.headers.vary).toContain('Accept-Encoding')
    const sizes: Record<string, number> = { identity: plain.body.length }
    for (const [accept, coding] of [
      ['gzip, deflate, br', 'deflate'],
      ['deflate', 'deflate'],
      ['br, gzip', 'gzip'],
      ['br', 'br'],
      ['deflate;q=0.5, br', 'br'],
      ['gzip', 'gzip'],
      ['br;q=0.5, gzip;q=1', 'gzip'],
      ['br;q=0, gzip;q=0', undefined],
      ['*', 'deflate'],
    ] as const) {
      const answer = await raw(gateway.dedicatedUrl, { method: 'POST', headers: { ...json, 'accept-encoding': accept }, body })
      expect(answer.headers['content-encoding'], accept).toBe(coding)
      expect(answer.headers.vary).toContain('Accept-Encoding')
      expect(Number(answer.headers['content-length'])).toBe(answer.body.length)
      expect(decode(answer)).toBe(plain.body.toString())
      if (coding !== undefined) sizes[coding] = answer.body.length
    }
    const ratio = (coding: string) => `${sizes[coding]} (${(sizes.identity! / sizes[coding]!).toFixed(1)}×)`
    console.log(
      `eth_getBlockReceipts(${busiest.number}): ${busiest.logs} logs, ${sizes.identity} bytes; br ${ratio('br')}, gzip ${ratio('gzip')}, stored deflate ${ratio('deflate')}`,
    )
    expect(sizes.br!).toBeLessThan(sizes.identity! / 4)
  })

  test("a block's stored DEFLATE goes as it is to a deflate or gzip client, alone or in a batch, and rows stored finished are upgraded and answer", async () => {
    const number = Number(busiest.number)
    const storedStream = async () => {
      const [row] = await gateway.db.query<{ deflated: Uint8Array; plainLength: number | null }>(
        sql`select deflated, plain_length as "plainLength" from ${schema.blockReceipts} where block_number = ${number}`,
      )
      return { deflated: Buffer.from(row!.deflated), plainLength: row!.plainLength }
    }
    const stored = await storedStream()
    expect(stored.plainLength).toBe(
      JSON.parse(busiest.receipts).result.length === 0 ? 2 : Buffer.byteLength(JSON.stringify(JSON.parse(busiest.receipts).result)),
    )
    const deflate = { ...json, 'accept-encoding': 'deflate' }
    const single = await raw(gateway.dedicatedUrl, { method: 'POST', headers: deflate, body: call('eth_getBlockReceipts', [busiest.number], 7) })
    expect(single.headers['content-encoding']).toBe('deflate')
    // The stored bytes are in the answer as they are: nothing was compressed for this request.
    expect(single.body.includes(stored.deflated)).toBe(true)
    expect(JSON.parse(decode(single))).toEqual({ ...JSON.parse(busiest.receipts), id: 7 })
    const batchBody = JSON.stringify([
      { jsonrpc: '2.0', id: 'a', method: 'eth_chainId', params: [] },
      { jsonrpc: '2.0', id: 'b', method: 'eth_getBlockReceipts', params: [busiest.number] },
      { jsonrpc: '2.0', id: 'c', method: 'eth_getBlockReceipts', params: [busiest.number] },
    ])
    const batch = await raw(gateway.dedicatedUrl, { method: 'POST', headers: deflate, body: batchBody })
    expect(batch.headers['content-encoding']).toBe('deflate')
    const plainBatch = await raw(gateway.dedicatedUrl, { method: 'POST', headers: json, body: batchBody })
    expect(decode(batch)).toBe(plainBatch.body.toString())
    // A client accepting only gzip (ethers, Go's net/http) gets the same stored bytes in a gzip member, its
    // CRC-32 combined from the one stored with them (gunzip checks it), alone and in a batch.
    const gzip = { ...json, 'accept-encoding': 'gzip' }
    const gzipped = await raw(gateway.dedicatedUrl, { method: 'POST', headers: gzip, body: call('eth_getBlockReceipts', [busiest.number], 7) })
    expect(gzipped.headers['content-encoding']).toBe('gzip')
    expect(gzipped.body.includes(stored.deflated)).toBe(true)
    expect(JSON.parse(decode(gzipped))).toEqual({ ...JSON.parse(busiest.receipts), id: 7 })
    const gzippedBatch = await raw(gateway.dedicatedUrl, { method: 'POST', headers: gzip, body: batchBody })
    expect(gzippedBatch.headers['content-encoding']).toBe('gzip')
    expect(gzippedBatch.body.includes(stored.deflated)).toBe(true)
    expect(decode(gzippedBatch)).toBe(plainBatch.body.toString())
    // A row stored before its CRC-32 was (before migration 0013) is compressed for such a client, as before.
    await gateway.db.query(sql`update ${schema.blockReceipts} set crc32 = null where block_number = ${number}`)
    gateway.resolvers.notify({ reorg: true })
    const compressed = await raw(gateway.dedicatedUrl, { method: 'POST', headers: gzip, body: call('eth_getBlockReceipts', [busiest.number], 7) })
    expect(compressed.headers['content-encoding']).toBe('gzip')
    expect(compressed.body.includes(stored.deflated)).toBe(false)
    expect(JSON.parse(decode(compressed))).toEqual({ ...JSON.parse(busiest.receipts), id: 7 })
    // A row written before streams were kept open (finished, no length or checksum) is converted when the
    // index is upgraded (db/upgrade.ts), and answers the same in every coding.
    await gateway.db.query(
      sql`update ${schema.blockReceipts} set deflated = ${deflateRawSync(JSON.stringify(JSON.parse(busiest.receipts).result))}, plain_length = null, adler32 = null, segment_offsets = null where block_number = ${number}`,
    )
    await gateway.db.query(sql`delete from ${schema.syncState} where key = ${SYNC_KEYS.storageVersion}`)
    await upgradeStorage(gateway.db)
    gateway.resolvers.notify({ reorg: true })
    for (const accept of ['deflate', 'br', 'gzip', 'identity']) {
      const answer = await raw(gateway.dedicatedUrl, {
        method: 'POST',
        headers: { ...json, 'accept-encoding': accept },
        body: call('eth_getBlockReceipts', [busiest.number]),
      })
      expect(decode(answer), accept).toBe(busiest.receipts)
    }
  })

  test('small answers go out uncompressed even to a client that accepts br', async () => {
    const answer = await raw(gateway.url, { method: 'POST', headers: { ...json, 'accept-encoding': 'br, gzip' }, body: call('eth_chainId') })
    expect(answer.headers['content-encoding']).toBeUndefined()
    expect(JSON.parse(answer.body.toString())).toMatchObject({ id: 1, result: expect.any(String) })
  })

  test('GraphQL and REST answers are compressed too', async () => {
    const query = `{ block(number: "${BigInt(busiest.number)}") { transactions { hash receipt { logs { data topics } } } } }`
    const graphql = await raw(`${gateway.url}/graphql`, { method: 'POST', headers: { ...json, 'accept-encoding': 'gzip' }, body: JSON.stringify({ query }) })
    expect(graphql.status).toBe(200)
    expect(graphql.headers['content-encoding']).toBe('gzip')
    expect(JSON.parse(decode(graphql)).data.block.transactions.length).toBeGreaterThan(0)
    const dashboard = await raw(`${gateway.url}/dashboard`, { headers: { 'accept-encoding': 'br' } })
    expect(dashboard.headers['content-encoding']).toBe('br')
    expect(decode(dashboard)).toContain('<!doctype html>')
  })

  test('CORS: OPTIONS on /, /rpc and /rpc/:key is a 204 preflight; answers carry Access-Control-Allow-Origin', async () => {
    for (const url of [gateway.url, `${gateway.url}/rpc`, gateway.dedicatedUrl]) {
      const preflight = await raw(url, {
        method: 'OPTIONS',
        headers: { origin: 'https://dapp.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
      })
      expect(preflight.status, url).toBe(204)
      expect(preflight.headers['access-control-allow-origin']).toBe('*')
      expect(preflight.headers['access-control-allow-methods']).toContain('POST')
      expect(preflight.headers['access-control-allow-headers']).toContain('content-type')
      const answer = await raw(url, { method: 'POST', headers: { ...json, origin: 'https://dapp.example' }, body: call('eth_chainId') })
      expect(answer.status).toBe(200)
      expect(answer.headers['access-control-allow-origin']).toBe('*')
    }
  })

  test('CORS for REST: a page on another origin may register an agent and read the builder codes, as it may call JSON-RPC', async () => {
    const url = `${gateway.url}/v1/agents/builder-codes`
    const preflight = await raw(url, {
      method: 'OPTIONS',
      headers: { origin: 'https://dapp.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    })
    expect(preflight.status).toBe(204)
    expect(preflight.headers['access-control-allow-origin']).toBe('*')
    expect(preflight.headers['access-control-allow-methods']).toContain('POST')
    const registered = await raw(url, {
      method: 'POST',
      headers: { ...json, origin: 'https://dapp.example' },
      body: JSON.stringify({ walletAddress: `0x${'c4'.repeat(20)}` }),
    })
    expect(registered.status).toBe(201)
    expect(registered.headers['access-control-allow-origin']).toBe('*')
    const leaderboard = await raw(`${gateway.url}/v1/builder-codes`, { headers: { origin: 'https://dapp.example' } })
    expect(leaderboard.status).toBe(200)
    expect(leaderboard.headers['access-control-allow-origin']).toBe('*')
  })

  test('CORS for GraphQL and the dashboard, as for JSON-RPC: a preflight is a 204, answers allow any origin, never with credentials', async () => {
    const origin = { origin: 'https://dapp.example' }
    for (const path of ['/graphql', '/dashboard']) {
      const preflight = await raw(`${gateway.url}${path}`, {
        method: 'OPTIONS',
        headers: { ...origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
      })
      expect(preflight.status, path).toBe(204)
      expect(preflight.headers['access-control-allow-origin'], path).toBe('*')
      expect(preflight.headers['access-control-allow-credentials'], path).toBeUndefined()
    }
    const answer = await raw(`${gateway.url}/graphql`, { method: 'POST', headers: { ...json, ...origin }, body: JSON.stringify({ query: '{ blockNumber }' }) })
    expect(answer.status).toBe(200)
    expect(answer.headers['access-control-allow-origin']).toBe('*')
    expect(answer.headers['access-control-allow-credentials']).toBeUndefined()
    // The page takes GET and HEAD, and says so.
    const refused = await raw(`${gateway.url}/dashboard`, { method: 'POST', headers: json, body: '{}' })
    expect(refused.status).toBe(405)
    expect(refused.headers.allow).toBe('GET, HEAD')
  })

  test('HEAD is GET without a body wherever GET is served; health, readiness and metrics take no other method', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/v1/builder-codes', '/graphql?query=%7BblockNumber%7D']) {
      const [get, head] = await Promise.all([raw(`${gateway.url}${path}`), raw(`${gateway.url}${path}`, { method: 'HEAD' })])
      expect(head.status, path).toBe(get.status)
      expect(get.status, path).toBe(200)
      expect(head.body.length, path).toBe(0)
    }
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      const post = await raw(`${gateway.url}${path}`, { method: 'POST', headers: json, body: '{}' })
      expect(post.status, path).toBe(405)
      expect(post.headers.allow, path).toBe('GET, HEAD')
    }
  })

  test('GraphQL refusals have bodies: 415 for text/plain, 406 for a subscription over POST without event-stream', async () => {
    const plain = await raw(`${gateway.url}/graphql`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"query":"{ blockNumber }"}' })
    expect(plain.status).toBe(415)
    expect(JSON.parse(plain.body.toString())).toMatchObject({
      errors: [{ message: expect.stringContaining('content-type'), extensions: { code: 'UNSUPPORTED_MEDIA_TYPE' } }],
    })
    const subscription = await raw(`${gateway.url}/graphql`, {
      method: 'POST',
      headers: { ...json, accept: 'application/json' },
      body: JSON.stringify({ query: 'subscription { newHeads { number } }' }),
    })
    expect(subscription.status).toBe(406)
    expect(JSON.parse(subscription.body.toString())).toMatchObject({ errors: [{ extensions: { code: 'NOT_ACCEPTABLE' } }] })
  })

  test('a 60 KB query string is a 431 with a JSON body', async () => {
    const answer = await raw(`${gateway.url}/graphql?query=${encodeURIComponent(`{ blockNumber ${' '.repeat(60_000)}}`)}`, {
      headers: { accept: 'application/json' },
    })
    expect(answer.status).toBe(431)
    expect(JSON.parse(answer.body.toString())).toMatchObject({ error: { code: 'request_header_fields_too_large', message: expect.stringContaining('POST') } })
  })

  test("a body over the cap: Node's fetch gets the 413 and its JSON-RPC error, declared or chunked", async () => {
    const oversized = call('eth_chainId', [], 1).replace('"params":[]', `"params":[],"padding":"${'x'.repeat(24 * 1024 * 1024)}"`)
    for (let attempt = 0; attempt < 5; attempt++) {
      const answer = await fetch(gateway.url, { method: 'POST', headers: json, body: oversized })
      expect(answer.status).toBe(413)
      expect(await answer.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32600, message: expect.stringContaining('exceeds') } })
      const stream = new Blob([oversized]).stream()
      const chunked = await fetch(gateway.url, { method: 'POST', headers: json, body: stream, duplex: 'half' } as RequestInit)
      expect(chunked.status).toBe(413)
      // Node's own client writes the whole body before it reads: closed early, it gets EPIPE, not the 413.
      const written = await raw(gateway.url, { method: 'POST', headers: json, body: oversized })
      expect(written.status).toBe(413)
    }
  })

  test('a 401 on an unknown key echoes the request id', async () => {
    for (const id of [7, 'seven']) {
      const answer = await raw(`${gateway.url}/rpc/not-a-key`, { method: 'POST', headers: json, body: call('eth_chainId', [], id) })
      expect(answer.status).toBe(401)
      expect(JSON.parse(answer.body.toString())).toMatchObject({ jsonrpc: '2.0', id, error: { code: -32000 } })
    }
  })
})

describe('CORS with --cors-origins: every endpoint lets in the origins listed and no other', () => {
  const ALLOWED = 'https://a.example'
  let anvil: Anvil
  let database: TestDatabase
  let gateway: TestGateway

  beforeAll(async () => {
    anvil = await startAnvil()
    database = await createTestDatabase()
    gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, corsOrigins: `${ALLOWED}, https://b.example` })
    await gateway.ingester.waitForBlock(0)
  }, 120_000)

  afterAll(async () => {
    await gateway?.stop()
    await anvil?.stop()
    await database?.drop()
  })

  test('preflights and answers on JSON-RPC, GraphQL, REST and the dashboard', async () => {
    const requests = [
      { path: '/', method: 'POST', body: call('eth_chainId') },
      { path: new URL(gateway.dedicatedUrl).pathname, method: 'POST', body: call('eth_chainId') },
      { path: '/graphql', method: 'POST', body: JSON.stringify({ query: '{ blockNumber }' }) },
      { path: '/v1/builder-codes', method: 'GET' },
      { path: '/dashboard', method: 'GET' },
    ]
    for (const { path, method, body } of requests)
      for (const origin of [ALLOWED, 'https://evil.example']) {
        const allowed = origin === ALLOWED
        const preflight = await raw(`${gateway.url}${path}`, {
          method: 'OPTIONS',
          headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'content-type' },
        })
        expect(preflight.status, `${path} ${origin}`).toBe(204)
        expect(preflight.headers['access-control-allow-origin'], `${path} ${origin}`).toBe(allowed ? origin : undefined)
        expect(preflight.headers['access-control-allow-credentials'], `${path} ${origin}`).toBeUndefined()
        const answer = await raw(`${gateway.url}${path}`, { method, headers: { ...json, origin }, body })
        expect(answer.status, `${path} ${origin}`).toBe(200)
        expect(answer.headers['access-control-allow-origin'], `${path} ${origin}`).toBe(allowed ? origin : undefined)
        expect(answer.headers['access-control-allow-credentials'], `${path} ${origin}`).toBeUndefined()
        expect(answer.headers.vary, `${path} ${origin}`).toContain('Origin')
      }
  })
})
