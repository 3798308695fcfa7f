import { createServer, type IncomingHttpHeaders, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import { describe, expect, test } from 'vitest'
import { negotiateEncoding, STORED_DEFLATE_OFFERS, sendCompressible } from './compress.js'

describe('negotiateEncoding', () => {
  test.each([
    [undefined, null],
    ['', null],
    ['identity', null],
    ['gzip, deflate, br', 'br'],
    ['gzip', 'gzip'],
    ['br;q=0.5, gzip', 'gzip'],
    ['br;q=0, gzip;q=0', null],
    ['*', 'br'],
    ['*;q=0.1, gzip;q=0.5', 'gzip'],
    ['deflate', null],
    [['gzip', 'br;q=0.2'], 'gzip'],
  ] as const)('%j → %s', (header, expected) => {
    expect(negotiateEncoding(header as string | string[] | undefined)).toBe(expected)
  })
})

describe('negotiateEncoding for answers stored deflated', () => {
  test.each([
    ['gzip, deflate, br', 'deflate'],
    ['gzip, deflate', 'deflate'],
    ['deflate;q=0.5, br', 'br'],
    ['deflate;q=0, gzip', 'gzip'],
    // A stored answer goes as it is in a gzip member as well: gzip before br, which would be compressed per request.
    ['br, gzip', 'gzip'],
    ['gzip', 'gzip'],
    ['br', 'br'],
    ['*', 'deflate'],
    ['identity', null],
  ] as const)('%j → %s', (header, expected) => {
    expect(negotiateEncoding(header, STORED_DEFLATE_OFFERS)).toBe(expected)
  })
})

describe('sendCompressible with an answer in pieces', () => {
  const pieces = [Buffer.from('{"jsonrpc":"2.0","id":1,"result":'), Buffer.from(`[${'"0x1",'.repeat(400)}"0x2"]`), Buffer.from('}')]
  const whole = Buffer.concat(pieces)

  async function answer(method: string, acceptEncoding?: string, body: Buffer[] = pieces) {
    const server = createServer((request, response) => void sendCompressible(request, response, 200, body, { 'content-type': 'application/json' }))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    try {
      return await new Promise<{ headers: IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
        const headers = acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding }
        request({ port, host: '127.0.0.1', method, headers }, (response) => {
          const chunks: Buffer[] = []
          response.on('data', (chunk: Buffer) => chunks.push(chunk))
          response.on('end', () => resolve({ headers: response.headers, body: Buffer.concat(chunks) }))
        })
          .on('error', reject)
          .end()
      })
    } finally {
      server.close()
    }
  }

  test('goes out as the pieces joined, with their whole length', async () => {
    const { headers, body } = await answer('POST')
    expect(body.equals(whole)).toBe(true)
    expect(Number(headers['content-length'])).toBe(whole.length)
    expect(headers['content-encoding']).toBeUndefined()
  })

  test('is compressed whole for a client that accepts gzip', async () => {
    const { headers, body } = await answer('POST', 'gzip')
    expect(headers['content-encoding']).toBe('gzip')
    expect(gunzipSync(body).equals(whole)).toBe(true)
  })

  // Up to 64 KB compressed on the event loop's thread, above on libuv's pool: both, in both codings.
  const large = [pieces[0]!, Buffer.from(`[${'"0x1",'.repeat(40_000)}"0x2"]`), pieces[2]!]
  test.each([
    ['gzip', 'a few KB', pieces],
    ['br', 'a few KB', pieces],
    ['gzip', 'over 64 KB', large],
    ['br', 'over 64 KB', large],
  ] as const)('is compressed with %s when it is %s, and decodes to the answer', async (coding, _size, body) => {
    const { headers, body: received } = await answer('POST', coding, [...body])
    expect(headers['content-encoding']).toBe(coding)
    expect(headers.vary).toBe('Accept-Encoding')
    expect(Number(headers['content-length'])).toBe(received.length)
    const decoded = coding === 'br' ? brotliDecompressSync(received) : gunzipSync(received)
    expect(decoded.equals(Buffer.concat(body))).toBe(true)
  })

  test('HEAD gets the length and no body', async () => {
    const { headers, body } = await answer('HEAD')
    expect(Number(headers['content-length'])).toBe(whole.length)
    expect(body.length).toBe(0)
  })
})
