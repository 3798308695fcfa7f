// What one client may hold over JSON-RPC WebSockets: connections, and the arguments of its open subscriptions
// across them, so that one client cannot take the process's memory with sockets or subscription filters; and a
// subscription asked for in a notification (no id) is not opened, as geth opens none.
import { afterAll, beforeAll, expect, test } from 'vitest'
import WebSocket from 'ws'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { MAX_SUBSCRIPTION_BYTES_PER_CLIENT } from '../src/jsonrpc/subscriptions.js'
import { MAX_WEBSOCKETS_PER_CLIENT } from '../src/server/index.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { largestLogFilter } from './fixtures/queries.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
const opened: WebSocket[] = []

beforeAll(async () => {
  anvil = await startAnvil()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  for (const socket of opened) socket.terminate()
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

const wsUrl = (url: string) => url.replace('http', 'ws')

type Message = { id?: number; result?: unknown; error?: { code: number; message: string }; method?: string }

/** A socket, open; or the refusal's HTTP status and body. */
function open(url: string): Promise<{ socket: WebSocket; messages: Message[] } | { status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url)
    const messages: Message[] = []
    socket.on('message', (data) => messages.push(JSON.parse(data.toString()) as Message))
    socket.once('open', () => {
      opened.push(socket)
      resolve({ socket, messages })
    })
    socket.once('unexpected-response', (_request, response) => {
      let body = ''
      response.on('data', (chunk: Buffer) => (body += chunk.toString()))
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }))
    })
    socket.once('error', reject)
  })
}

async function openOrFail(url: string) {
  const outcome = await open(url)
  if (!('socket' in outcome)) throw new Error(`refused: ${outcome.status} ${outcome.body}`)
  return outcome
}

let nextId = 1
/** Sends a call on the socket and waits for its answer. */
async function call({ socket, messages }: { socket: WebSocket; messages: Message[] }, method: string, params: unknown[]): Promise<Message> {
  const id = nextId++
  socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }))
  await expect.poll(() => messages.some((message) => message.id === id), { timeout: 10_000, interval: 10 }).toBe(true)
  return messages.find((message) => message.id === id)!
}

const closed = (socket: WebSocket) => new Promise((resolve) => (socket.readyState === WebSocket.CLOSED ? resolve(null) : socket.once('close', resolve)))

test(`a client holds at most ${MAX_WEBSOCKETS_PER_CLIENT} WebSockets: the next upgrade is 429 (-32005), other clients are not affected, and closing one makes room`, async () => {
  const sockets = await Promise.all(Array.from({ length: MAX_WEBSOCKETS_PER_CLIENT }, () => openOrFail(wsUrl(gateway.url))))
  const refused = await open(wsUrl(gateway.url))
  expect('status' in refused && refused.status).toBe(429)
  expect(JSON.parse((refused as { body: string }).body)).toEqual({
    jsonrpc: '2.0',
    id: null,
    error: { code: -32005, message: `too many open WebSockets from this client: at most ${MAX_WEBSOCKETS_PER_CLIENT}; close one first` },
  })
  // Another client (a dedicated key) connects, and the client's own sockets still answer.
  const other = await openOrFail(wsUrl(gateway.dedicatedUrl))
  expect((await call(other, 'eth_chainId', [])).result).toBe('0x7a69')
  expect((await call(sockets[0]!, 'eth_chainId', [])).result).toBe('0x7a69')
  sockets[0]!.socket.close()
  await closed(sockets[0]!.socket)
  await expect.poll(async () => 'socket' in (await open(wsUrl(gateway.url))), { timeout: 5_000, interval: 50 }).toBe(true)
  for (const socket of opened.splice(0)) socket.terminate()
  await Promise.all(sockets.map(({ socket }) => closed(socket)))
})

test(`the arguments of a client's open subscriptions are bounded (${MAX_SUBSCRIPTION_BYTES_PER_CLIENT / 1024 / 1024} MiB) across its connections; unsubscribing or closing frees them`, async () => {
  const largest = largestLogFilter()
  const first = await openOrFail(wsUrl(gateway.url))
  const second = await openOrFail(wsUrl(gateway.url))
  const subscribed: [typeof first, string][] = []
  let refusal: Message['error']
  for (let attempt = 0; attempt < 60 && refusal === undefined; attempt++) {
    const on = attempt % 2 === 0 ? first : second
    const answer = await call(on, 'eth_subscribe', ['logs', largest])
    if (answer.error !== undefined) refusal = answer.error
    else subscribed.push([on, answer.result as string])
  }
  expect(refusal).toEqual({
    code: -32602,
    message: `too many subscription filters from this client: at most ${MAX_SUBSCRIPTION_BYTES_PER_CLIENT / 1024 / 1024} MiB of arguments open across its connections; unsubscribe first`,
  })
  // ~320 KB each.
  expect(subscribed.length).toBeGreaterThan(8)
  expect(subscribed.length).toBeLessThan(16)
  // Small subscriptions still fit; a large one again once one is gone.
  expect((await call(first, 'eth_subscribe', ['newHeads'])).result).toMatch(/^0x/)
  const [on, id] = subscribed.find(([socket]) => socket === second)!
  expect((await call(on, 'eth_unsubscribe', [id])).result).toBe(true)
  expect((await call(first, 'eth_subscribe', ['logs', largest])).result).toMatch(/^0x/)
  expect((await call(first, 'eth_subscribe', ['logs', largest])).error?.code).toBe(-32602)
  // Closing a connection frees what its subscriptions held.
  second.socket.close()
  await closed(second.socket)
  await expect.poll(async () => (await call(first, 'eth_subscribe', ['logs', largest])).result, { timeout: 5_000, interval: 50 }).toMatch(/^0x/)
  first.socket.close()
  await closed(first.socket)
})

test('eth_subscribe sent as a notification (no id) opens nothing, as geth; the socket goes on answering', async () => {
  const socket = await openOrFail(wsUrl(gateway.url))
  const control = await openOrFail(wsUrl(gateway.url))
  socket.socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscribe', params: ['newHeads'] }))
  await call(control, 'eth_subscribe', ['newHeads'])
  await anvilCall(anvil.rpcUrl, 'evm_mine')
  await anvilCall(anvil.rpcUrl, 'evm_mine')
  await waitForSameHead(gateway, anvil.rpcUrl)
  await expect.poll(() => control.messages.filter((message) => message.method === 'eth_subscription').length, { timeout: 10_000 }).toBe(2)
  expect(socket.messages).toEqual([])
  expect((await call(socket, 'eth_chainId', [])).result).toBe('0x7a69')
  expect(socket.messages.filter((message) => message.method === 'eth_subscription')).toEqual([])
})
