import { createServer, type Server } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import pino from 'pino'
import { afterAll, expect, test } from 'vitest'
import { createSchema, createYoga } from 'graphql-yoga'
import type { GraphqlServer } from '../schema/server.js'
import { createGraphqlRoute, streamAnswer } from './graphql.js'

// A GraphQL subscription is an event stream (server-sent events); its client may stop reading.

const CHUNK = new Uint8Array(256 * 1024).fill(0x61)

let server: Server | undefined
afterAll(async () => {
  server?.closeAllConnections()
  await new Promise((resolve) => server?.close(resolve))
})

test('an event stream whose client stops reading is closed once 16 MiB wait unread, and its source is cancelled', async () => {
  let pulled = 0
  let cancelled = false
  let closed = false
  // A source of events faster than any client: a chunk each time one is asked for, for ever.
  const events = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulled += CHUNK.length
      controller.enqueue(CHUNK)
    },
    cancel() {
      cancelled = true
    },
  })
  server = createServer((_request, response) => {
    response.once('close', () => {
      closed = true
    })
    void streamAnswer(
      response,
      new Response(events, { headers: { 'content-type': 'text/event-stream' } }),
      { 'content-type': 'text/event-stream' },
      pino({ level: 'silent' }),
    )
  })
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))

  // A client that sends its request and never reads the answer.
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1')
  client.pause()
  client.write('GET / HTTP/1.1\r\nhost: localhost\r\naccept: text/event-stream\r\n\r\n')

  await expect.poll(() => closed && cancelled, { timeout: 10_000 }).toBe(true)
  // What was read from the source: the 16 MiB held for the client, and what the sockets took.
  expect(pulled).toBeLessThan(64 * 1024 * 1024)
  client.destroy()
})

/** A GraphQL server whose one subscription never ends on its own, behind the route with a cap of `maxStreams`. */
async function startCappedRoute(trustProxy: boolean, maxStreams: number) {
  const yoga = createYoga({
    schema: createSchema({
      typeDefs: 'type Query { ok: Boolean } type Subscription { ticks: Int }',
      resolvers: {
        Subscription: {
          ticks: {
            subscribe: async function* () {
              yield { ticks: 1 }
              await new Promise(() => {})
            },
          },
        },
      },
    }),
    logging: false,
  })
  const route = createGraphqlRoute(yoga as unknown as GraphqlServer, pino({ level: 'silent' }), { trustProxy, maxStreams })
  const capped = createServer((request, response) => void route(request, response))
  await new Promise<void>((resolve) => capped.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(capped.address() as AddressInfo).port}/graphql`
  const subscribe = async (forwardedFor: string) => {
    const controller = new AbortController()
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-forwarded-for': forwardedFor },
      body: JSON.stringify({ query: 'subscription { ticks }' }),
      signal: controller.signal,
    })
    return { response, close: () => controller.abort() }
  }
  const stop = () => {
    capped.closeAllConnections()
    return new Promise((resolve) => capped.close(resolve))
  }
  return { subscribe, stop }
}

test('a client address holds at most its cap of open subscription streams: the next is 429 LIMIT_EXCEEDED, and one closed frees a place', async () => {
  const { subscribe, stop } = await startCappedRoute(true, 2)
  try {
    const [first, second] = [await subscribe('203.0.113.1'), await subscribe('203.0.113.1')]
    expect([first.response.status, second.response.status]).toEqual([200, 200])
    const refused = await subscribe('203.0.113.1')
    expect(refused.response.status).toBe(429)
    expect(await refused.response.json()).toEqual({
      errors: [{ message: 'too many open subscriptions from this client: at most 2; close one first', extensions: { code: 'LIMIT_EXCEEDED' } }],
    })
    // Another client (by X-Forwarded-For, with --trust-proxy) has places of its own.
    const other = await subscribe('203.0.113.2')
    expect(other.response.status).toBe(200)
    first.close()
    await expect
      .poll(async () => {
        const again = await subscribe('203.0.113.1')
        again.close()
        return again.response.status
      })
      .toBe(200)
    for (const stream of [second, other]) stream.close()
  } finally {
    await stop()
  }
})

test('without --trust-proxy the socket address is the client: X-Forwarded-For does not buy more streams', async () => {
  const { subscribe, stop } = await startCappedRoute(false, 1)
  try {
    const first = await subscribe('203.0.113.1')
    expect(first.response.status).toBe(200)
    expect((await subscribe('203.0.113.2')).response.status).toBe(429)
    first.close()
  } finally {
    await stop()
  }
})
