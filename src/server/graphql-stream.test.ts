import { createServer, type Server } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import pino from 'pino'
import { afterAll, expect, test } from 'vitest'
import { streamAnswer } from './graphql.js'

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
