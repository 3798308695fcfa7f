import { once } from 'node:events'
import { request as httpRequest } from 'node:http'
import { connect, type Socket } from 'node:net'
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import WebSocket from 'ws'
import { startGateway, type Gateway } from '../src/app.js'
import { createClusterLink } from '../src/cluster/link.js'
import { serveConfigSchema } from '../src/config.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'

/** The public endpoint's body cap in this suite. */
const PUBLIC_MAX_BODY = 64 * 1024
/** The dedicated endpoints' body cap (`--max-body`'s default). */
const DEDICATED_MAX_BODY = 5 * 1024 * 1024
/** `--request-timeout` in this suite, in seconds: short, so that a trickled request runs out of it quickly. */
const REQUEST_TIMEOUT_S = 3
/** What the registration route reads of a body (src/rest). */
const REGISTRATION_MAX_BODY = 4 * 1024

const call = (method: string, params: unknown[] = [], id: unknown = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params })
const CHAIN_ID = call('eth_chainId')

type Answer = { status: number; headers: Record<string, string>; body: string }

/** The answers in the bytes a connection received, in order (1xx included, with no body). */
function parseAnswers(text: string): Answer[] {
  const answers: Answer[] = []
  let rest = text
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n')
    if (end === -1) throw new Error(`an incomplete head: ${JSON.stringify(rest.slice(0, 200))}`)
    const [statusLine, ...fields] = rest.slice(0, end).split('\r\n')
    const status = Number(statusLine!.split(' ')[1])
    const headers = Object.fromEntries(fields.map((field) => [field.slice(0, field.indexOf(':')).toLowerCase(), field.slice(field.indexOf(':') + 1).trim()]))
    rest = rest.slice(end + 4)
    let body = ''
    if (status >= 200 && headers['transfer-encoding'] === 'chunked') {
      for (;;) {
        const line = rest.indexOf('\r\n')
        const size = Number.parseInt(rest.slice(0, line), 16)
        body += rest.slice(line + 2, line + 2 + size)
        rest = rest.slice(line + 2 + size + 2)
        if (size === 0) break
      }
    } else if (status >= 200) {
      const length = Number(headers['content-length'] ?? rest.length)
      body = rest.slice(0, length)
      rest = rest.slice(length)
    }
    answers.push({ status, headers, body })
  }
  return answers
}

/** A raw connection to the gateway: what is written goes on the wire as it is; what comes back is kept. */
async function openConnection(url: string) {
  const socket: Socket = connect(Number(new URL(url).port), '127.0.0.1')
  await once(socket, 'connect')
  let received = ''
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => {
    received += chunk
  })
  socket.on('error', () => {})
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  return {
    socket,
    get received() {
      return received
    },
    /** Waits until what came back satisfies `done` (or the connection closes), at most `timeoutMs`. */
    async until(done: (text: string) => boolean, timeoutMs = 5_000): Promise<string> {
      const deadline = Date.now() + timeoutMs
      while (!done(received) && !socket.destroyed && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
      return received
    },
    closed,
  }
}

/** Sends `text` on a fresh connection and returns the answers received until the server closes it. */
async function exchange(url: string, text: string | Buffer): Promise<Answer[]> {
  const connection = await openConnection(url)
  connection.socket.write(text)
  await Promise.race([connection.closed, new Promise((resolve) => setTimeout(resolve, 10_000))])
  connection.socket.destroy()
  return parseAnswers(connection.received)
}

function head(method: string, path: string, headers: Record<string, string | number>): string {
  return `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n`
}

/** A WebSocket handshake's refusal: its status, headers and body. */
function refusedWebSocket(url: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url)
    socket.on('open', () => reject(new Error(`${url} opened a WebSocket`)))
    socket.on('error', () => {})
    socket.on('unexpected-response', (_request, response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => {
        body += chunk
      })
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers as Record<string, string>, body }))
    })
  })
}

describe('HTTP edges: expectations, upgrades, compressed bodies', () => {
  let anvil: Anvil
  let database: TestDatabase
  let gateway: TestGateway
  let path: string

  beforeAll(async () => {
    anvil = await startAnvil()
    database = await createTestDatabase()
    gateway = await startTestGateway({
      upstreamRpc: anvil.rpcUrl,
      databaseUrl: database.databaseUrl,
      publicMaxBody: PUBLIC_MAX_BODY,
      requestTimeout: REQUEST_TIMEOUT_S,
    })
    await gateway.ingester.waitForBlock(0)
    path = new URL(gateway.dedicatedUrl).pathname
  }, 120_000)

  afterAll(async () => {
    await gateway?.stop()
    await anvil?.stop()
    await database?.drop()
  })

  test('an expectation other than 100-continue is a 417 with a JSON body, in the JSON-RPC shape on a JSON-RPC path', async () => {
    const headers = { expect: '42-foo', 'content-type': 'application/json', 'content-length': Buffer.byteLength(CHAIN_ID) }
    const [rpcAnswer] = await exchange(gateway.url, head('POST', '/', headers) + CHAIN_ID)
    expect(rpcAnswer!.status).toBe(417)
    expect(rpcAnswer!.headers['content-type']).toBe('application/json')
    expect(rpcAnswer!.headers.connection).toBe('close')
    expect(JSON.parse(rpcAnswer!.body)).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32600, message: expect.stringContaining('100-continue') } })
    const [restAnswer] = await exchange(gateway.url, head('POST', '/v1/agents/builder-codes', headers) + CHAIN_ID)
    expect(restAnswer!.status).toBe(417)
    expect(JSON.parse(restAnswer!.body)).toEqual({ error: { code: 'expectation_failed', message: expect.stringContaining('"42-foo"') } })
  })

  test('Expect: 100-continue with a declared body over the cap gets the 413 and no 100 Continue, on every endpoint', async () => {
    for (const [target, length, shape] of [
      ['/', PUBLIC_MAX_BODY + 1, 'json-rpc'],
      [path, DEDICATED_MAX_BODY + 1, 'json-rpc'],
      ['/v1/agents/builder-codes', REGISTRATION_MAX_BODY + 1, 'rest'],
    ] as const) {
      const connection = await openConnection(gateway.url)
      // The client sends the head only, and waits for a 100 before it sends the body (as curl does).
      connection.socket.write(head('POST', target, { expect: '100-continue', 'content-type': 'application/json', 'content-length': length }))
      await connection.until((text) => /\r\n\r\n.*[}\]]$/s.test(text))
      connection.socket.destroy()
      expect(connection.received, target).not.toContain('100 Continue')
      const [answer, ...others] = parseAnswers(connection.received)
      expect(others).toEqual([])
      expect(answer!.status, target).toBe(413)
      expect(answer!.headers.connection).toBe('close')
      if (shape === 'json-rpc')
        expect(JSON.parse(answer!.body)).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32600, message: `request body exceeds ${length - 1} bytes` } })
      else expect(JSON.parse(answer!.body)).toEqual({ error: { code: 'payload_too_large', message: `request body exceeds ${length - 1} bytes` } })
    }
  })

  test('Expect: 100-continue with a body within the cap gets the 100 before it sends, then the answer, on one connection', async () => {
    // A 2 KB body: curl sends `Expect: 100-continue` for bodies over 1 KB (and over 1 MB since 8.x).
    const padded = call('eth_chainId', [], 'padded').replace('"params":[]', `"params":[],"padding":"${'x'.repeat(2048)}"`)
    const graphqlBody = JSON.stringify({ query: '{ __typename }' })
    for (const [target, body, expected] of [
      ['/', padded, { jsonrpc: '2.0', id: 'padded', result: '0x7a69' }],
      [path, CHAIN_ID, { jsonrpc: '2.0', id: 1, result: '0x7a69' }],
      ['/graphql', graphqlBody, { data: { __typename: 'Query' } }],
    ] as const) {
      const connection = await openConnection(gateway.url)
      const headers = { expect: '100-continue', 'content-type': 'application/json', accept: 'application/json', 'content-length': Buffer.byteLength(body) }
      connection.socket.write(head('POST', target, headers))
      expect(await connection.until((text) => text.includes('\r\n\r\n'))).toBe('HTTP/1.1 100 Continue\r\n\r\n')
      connection.socket.write(body)
      // The connection carries another request after it.
      connection.socket.write(head('GET', '/healthz', { connection: 'close' }))
      await connection.closed
      const [informational, answer, next] = parseAnswers(connection.received)
      expect(informational!.status).toBe(100)
      expect(answer!.status, target).toBe(200)
      expect(JSON.parse(answer!.body)).toEqual(expected)
      expect(JSON.parse(next!.body)).toEqual({ status: 'ok' })
    }
    // Node's own client waits for the 100 too.
    const answer = await new Promise<string>((resolve, reject) => {
      const request = httpRequest(
        gateway.url,
        { method: 'POST', headers: { 'content-type': 'application/json', expect: '100-continue' }, agent: false },
        (response) => {
          let text = ''
          response.on('data', (chunk: Buffer) => {
            text += chunk
          })
          response.on('end', () => resolve(text))
        },
      )
      request.on('continue', () => request.end(padded))
      request.on('error', reject)
    })
    expect(JSON.parse(answer)).toEqual({ jsonrpc: '2.0', id: 'padded', result: '0x7a69' })
  })

  test('a WebSocket on a path without one is a 404 with a JSON body; on /graphql a 400 saying to use server-sent events', async () => {
    const ws = gateway.url.replace('http', 'ws')
    for (const target of ['/nowhere', '/healthz', '/v1/builder-codes']) {
      const answer = await refusedWebSocket(`${ws}${target}`)
      expect(answer.status, target).toBe(404)
      expect(answer.headers['content-type']).toBe('application/json')
      expect(JSON.parse(answer.body)).toEqual({ error: { code: 'not_found', message: expect.stringContaining('/rpc/<apiKey>') } })
    }
    const graphql = await refusedWebSocket(`${ws}/graphql`)
    expect(graphql.status).toBe(400)
    expect(JSON.parse(graphql.body)).toEqual({
      errors: [{ message: expect.stringContaining('server-sent events'), extensions: { code: 'BAD_REQUEST' } }],
    })
    const unknownKey = await refusedWebSocket(`${ws}/rpc/not-a-key`)
    expect(unknownKey.status).toBe(401)
    expect(JSON.parse(unknownKey.body)).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'unknown or revoked API key' } })
    // The JSON-RPC paths still open one.
    const socket = new WebSocket(ws)
    await once(socket, 'open')
    socket.send(CHAIN_ID)
    const [message] = await once(socket, 'message')
    expect(JSON.parse(String(message))).toEqual({ jsonrpc: '2.0', id: 1, result: '0x7a69' })
    socket.close()
  })

  test('a malformed WebSocket handshake on a JSON-RPC path is refused in the JSON-RPC shape, not ws\u2019s plain text', async () => {
    const upgrade = { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' }
    const refused = async (method: string, headers: Record<string, string>) => {
      const [answer] = await exchange(gateway.url, head(method, '/rpc', { ...headers, 'content-length': 0 }))
      expect(answer!.headers['content-type']).toBe('application/json')
      expect(answer!.headers.connection).toBe('close')
      return { status: answer!.status, headers: answer!.headers, body: JSON.parse(answer!.body) as unknown }
    }
    const jsonRpc = (message: RegExp) => ({ jsonrpc: '2.0', id: null, error: { code: -32600, message: expect.stringMatching(message) } })
    const { 'sec-websocket-key': _key, ...keyless } = upgrade
    expect(await refused('GET', keyless)).toMatchObject({ status: 400, body: jsonRpc(/Sec-WebSocket-Key/) })
    expect(await refused('GET', { ...upgrade, 'sec-websocket-key': 'short' })).toMatchObject({ status: 400, body: jsonRpc(/Sec-WebSocket-Key/) })
    const version = await refused('GET', { ...upgrade, 'sec-websocket-version': '12' })
    expect(version).toMatchObject({ status: 400, body: jsonRpc(/Sec-WebSocket-Version must be 13/) })
    expect(version.headers['sec-websocket-version']).toBe('13, 8')
    const post = await refused('POST', upgrade)
    expect(post).toMatchObject({ status: 405, body: jsonRpc(/must be a GET, not POST/) })
    expect(post.headers.allow).toBe('GET')
    // A well-formed one still opens (the key of RFC 6455 §1.3, version 13).
    const connection = await openConnection(gateway.url)
    connection.socket.write(head('GET', '/rpc', upgrade))
    expect(await connection.until((text) => text.includes('\r\n\r\n'))).toMatch(/^HTTP\/1\.1 101 /)
    connection.socket.destroy()
  })

  test('Upgrade: h2c (curl --http2 on http://) is ignored: answered in HTTP/1.1, body and the next requests too', async () => {
    const h2c = { connection: 'Upgrade, HTTP2-Settings', upgrade: 'h2c', 'http2-settings': 'AAMAAABkAAQCAAAAAAIAAAAA' }
    const connection = await openConnection(gateway.url)
    const answered = (count: number) => (text: string) => text.split('HTTP/1.1 ').length > count && /[}\]]$/.test(text)
    connection.socket.write(head('POST', '/', { ...h2c, 'content-type': 'application/json', 'content-length': Buffer.byteLength(CHAIN_ID) }) + CHAIN_ID)
    await connection.until(answered(1))
    connection.socket.write(head('GET', '/healthz', h2c))
    await connection.until(answered(2))
    connection.socket.write(head('GET', '/readyz', { connection: 'close' }))
    await connection.closed
    const answers = parseAnswers(connection.received)
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, expect.any(Number)])
    expect(JSON.parse(answers[0]!.body)).toEqual({ jsonrpc: '2.0', id: 1, result: '0x7a69' })
    expect(JSON.parse(answers[1]!.body)).toEqual({ status: 'ok' })
    expect(JSON.parse(answers[2]!.body)).toHaveProperty('ready')
  })

  test('a gzip, deflate or br body is decoded; two codings are undone in order', async () => {
    const plain = Buffer.from(CHAIN_ID)
    for (const [coding, body] of [
      ['gzip', gzipSync(plain)],
      ['x-gzip', gzipSync(plain)],
      ['deflate', deflateSync(plain)],
      ['br', brotliCompressSync(plain)],
      ['gzip, br', brotliCompressSync(gzipSync(plain))],
      ['identity', plain],
    ] as const) {
      for (const url of [gateway.url, gateway.dedicatedUrl]) {
        const answer = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': coding }, body })
        expect(answer.status, coding).toBe(200)
        expect(await answer.json()).toEqual({ jsonrpc: '2.0', id: 1, result: '0x7a69' })
      }
    }
    // A body that is not what its coding says is a body that is not JSON.
    const corrupt = await fetch(gateway.url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: plain })
    expect(await corrupt.json()).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } })
  })

  test('a decoded body is held to the cap: a zip bomb is a 413, answered at once', async () => {
    // 4 GiB of zeros in 64 gzip members of 64 MiB each (one gzip stream): about 4 MB on the wire, under the dedicated cap.
    const member = gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 })
    const bomb = Buffer.concat(Array.from({ length: 64 }, () => member))
    expect(bomb.length).toBeLessThan(DEDICATED_MAX_BODY)
    const started = performance.now()
    const answer = await fetch(gateway.dedicatedUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: bomb,
    })
    expect(answer.status).toBe(413)
    expect(await answer.json()).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32600, message: `request body exceeds ${DEDICATED_MAX_BODY} bytes` } })
    // Inflating all of it would take seconds (and 4 GiB); the decoder stopped at the cap.
    const elapsedMs = performance.now() - started
    expect(elapsedMs, `answered in ${Math.round(elapsedMs)} ms`).toBeLessThan(3_000)
    // Just over the public cap once decoded, from a few hundred bytes.
    const over = await fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'br' },
      body: brotliCompressSync(call('eth_chainId').replace('"params":[]', `"params":[],"padding":"${' '.repeat(PUBLIC_MAX_BODY)}"`)),
    })
    expect(over.status).toBe(413)
  })

  test('an encoding not decoded is a 415 naming it, in the shape of the path; GraphQL takes no compressed body', async () => {
    const headers = { 'content-type': 'application/json', 'content-encoding': 'zstd' }
    const rpcAnswer = await fetch(gateway.url, { method: 'POST', headers, body: CHAIN_ID })
    expect(rpcAnswer.status).toBe(415)
    expect(await rpcAnswer.json()).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32600, message: expect.stringContaining('"zstd"') } })
    const restAnswer = await fetch(`${gateway.url}/v1/agents/builder-codes`, { method: 'POST', headers, body: '{}' })
    expect(restAnswer.status).toBe(415)
    expect(await restAnswer.json()).toEqual({ error: { code: 'unsupported_media_type', message: expect.stringContaining('"zstd"') } })
    const graphql = await fetch(`${gateway.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify({ query: '{ __typename }' })),
    })
    expect(graphql.status).toBe(415)
    expect(await graphql.json()).toEqual({ error: { code: 'unsupported_media_type', message: expect.stringContaining('uncompressed') } })
  })

  test('a request trickled a byte at a time, head or body, is a 408 once --request-timeout has passed, and its connection closed', async () => {
    const body = CHAIN_ID
    const requestHead = head('POST', path, { 'content-type': 'application/json', 'content-length': body.length })
    const trickled = [
      // The whole head, then the body a byte every 200 ms (it would take longer than the timeout).
      { sent: requestHead, rest: body },
      // The head itself, a byte every 200 ms.
      { sent: '', rest: requestHead + body },
    ]
    const outcomes = await Promise.all(
      trickled.map(async ({ sent, rest }) => {
        const connection = await openConnection(gateway.url)
        const started = performance.now()
        connection.socket.write(sent)
        let position = 0
        const ticking = setInterval(() => {
          if (position < rest.length && !connection.socket.destroyed) connection.socket.write(rest[position++]!)
        }, 200)
        await Promise.race([connection.closed, new Promise((resolve) => setTimeout(resolve, 20_000))])
        clearInterval(ticking)
        return { answers: parseAnswers(connection.received), seconds: (performance.now() - started) / 1_000, closed: connection.socket.destroyed }
      }),
    )
    for (const { answers, seconds, closed } of outcomes) {
      expect(closed).toBe(true)
      expect(answers.map(({ status }) => status)).toEqual([408])
      expect(JSON.parse(answers[0]!.body)).toEqual({ error: { code: 'request_timeout', message: expect.stringContaining('in time') } })
      expect(seconds).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_S - 0.5)
      expect(seconds).toBeLessThan(REQUEST_TIMEOUT_S + 5)
    }
    // Nothing else is affected: a WebSocket outlives the timeout, and a request sent at once is answered.
    const socket = new WebSocket(gateway.url.replace('http', 'ws'))
    await once(socket, 'open')
    await new Promise((resolve) => setTimeout(resolve, (REQUEST_TIMEOUT_S + 2) * 1_000))
    socket.send(CHAIN_ID)
    const [message] = await once(socket, 'message')
    expect(JSON.parse(String(message))).toMatchObject({ id: 1, result: expect.stringMatching(/^0x/) })
    socket.close()
    const answer = await fetch(gateway.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
    expect(await answer.json()).toMatchObject({ id: 1, result: expect.stringMatching(/^0x/) })
  }, 40_000)
})

describe('HTTP edges: a worker of serve --workers N', () => {
  let anvil: Anvil
  let database: TestDatabase
  let worker: Gateway

  beforeAll(async () => {
    anvil = await startAnvil()
    database = await createTestDatabase()
    const config = serveConfigSchema.parse({
      port: 0,
      logLevel: 'silent',
      startBlock: '0',
      publicRateLimit: 0,
      upstreamRpc: anvil.rpcUrl,
      databaseUrl: database.databaseUrl,
    })
    // A worker whose primary says nothing: a WebSocket's handshake asks it nothing either.
    const link = createClusterLink({ workerId: 3, send: () => {}, receive: () => {} })
    worker = await startGateway({ config, logger: pino({ level: 'silent' }), cluster: { kind: 'worker', link } })
  }, 120_000)

  afterAll(async () => {
    await worker?.stop()
    await anvil?.stop()
    await database?.drop()
  })

  test('a WebSocket handshake names the worker in x-flashgate-worker, as HTTP answers do; so does a refused one', async () => {
    const ws = worker.url.replace('http', 'ws')
    const socket = new WebSocket(ws)
    const [response] = await once(socket, 'upgrade')
    expect(response.headers['x-flashgate-worker']).toBe('3')
    socket.close()
    expect((await refusedWebSocket(`${ws}/nowhere`)).headers['x-flashgate-worker']).toBe('3')
    expect((await fetch(`${worker.url}/healthz`)).headers.get('x-flashgate-worker')).toBe('3')
  })
})

describe.runIf(SHARED_POSTGRES_AVAILABLE)('HTTP edges: an ingest-only process (--role ingest)', () => {
  let anvil: Anvil
  let database: TestDatabase
  let ingestOnly: TestGateway

  beforeAll(async () => {
    anvil = await startAnvil()
    database = await createSharedPostgresDatabase()
    ingestOnly = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, role: 'ingest' })
  }, 120_000)

  afterAll(async () => {
    await ingestOnly?.stop()
    await anvil?.stop()
    await database?.drop()
  })

  test('answers a WebSocket with a 404, not a dropped connection', async () => {
    const answer = await refusedWebSocket(ingestOnly.url.replace('http', 'ws'))
    expect(answer.status).toBe(404)
    expect(JSON.parse(answer.body)).toEqual({ error: { code: 'not_found', message: expect.stringContaining('--role ingest') } })
  })

  test('answers Upgrade: h2c in HTTP/1.1', async () => {
    const h2c = { connection: 'Upgrade, HTTP2-Settings, close', upgrade: 'h2c', 'http2-settings': 'AAMAAABkAAQCAAAAAAIAAAAA' }
    const [health] = await exchange(ingestOnly.url, head('GET', '/healthz', h2c))
    expect(health!.status).toBe(200)
    expect(JSON.parse(health!.body)).toEqual({ status: 'ok' })
  })
})
