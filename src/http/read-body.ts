import type { IncomingMessage, ServerResponse } from 'node:http'
import { brotliDecompress, gunzip, inflate } from 'node:zlib'
import { PayloadTooLargeError } from '../errors.js'

/**
 * Of a body over the cap, this much more is read and thrown away before the 413 goes out. A client that is
 * still sending when the server closes the connection sees EPIPE or a reset, not the 413; past this bound the
 * connection is closed anyway (no one sends 64 MiB to a JSON-RPC endpoint by mistake).
 */
export const MAX_DISCARDED_BODY_BYTES = 64 * 1024 * 1024

type Decoder = (body: Buffer, options: { maxOutputLength: number }, done: (error: Error | null, result: Buffer) => void) => void

/** The content codings a request body may come in, each undone by node:zlib (RFC 9110 §8.4.1; `x-gzip` is gzip). */
const DECODERS: Readonly<Record<string, Decoder>> = Object.freeze({ gzip: gunzip, 'x-gzip': gunzip, deflate: inflate, br: brotliDecompress })

/** The codings named to a client whose body came in another (`x-gzip` is gzip's old name, not offered). */
export const DECODED_CODINGS: readonly string[] = Object.keys(DECODERS).filter((coding) => coding !== 'x-gzip')

/**
 * The decoders of a `Content-Encoding`, in the order the codings were applied (`identity` is none); `null` when
 * one of them is not a coding this server decodes (the request is then refused with a 415).
 */
export function contentDecoders(header: string): Decoder[] | null {
  const decoders: Decoder[] = []
  for (const part of header.split(',')) {
    const coding = part.trim().toLowerCase()
    if (coding === '' || coding === 'identity') continue
    const decoder = Object.hasOwn(DECODERS, coding) ? DECODERS[coding] : undefined
    if (decoder === undefined) return null
    decoders.push(decoder)
  }
  return decoders
}

/** Requests whose client waits for `100 Continue` before it sends the body (see `continueWhenRead`). */
const awaitingContinue = new WeakSet<IncomingMessage>()

/**
 * A request whose client sent `Expect: 100-continue` (Node's 'checkContinue'): the 100 goes out when its
 * handler starts reading the body, as Go's net/http sends it, so that a body refused unread (declared over
 * the cap, or never read: a 405) is never sent. https://www.rfc-editor.org/rfc/rfc9110#section-10.1.1
 */
export function continueWhenRead(request: IncomingMessage, response: ServerResponse) {
  awaitingContinue.add(request)
  const reading = (event: string | symbol) => {
    if (event !== 'data' && event !== 'readable') return
    request.off('newListener', reading)
    awaitingContinue.delete(request)
    // A 1xx comes before the final answer or not at all (RFC 9110 §15.2).
    if (!response.headersSent) response.writeContinue()
  }
  request.on('newListener', reading)
}

/**
 * A request body as text, at most `limit` bytes, decoded when it comes gzip, deflate or br (then the decoded
 * body is held to `limit` too, and decoding stops as soon as it passes it: no zip bombs). A larger declared or
 * streamed body rejects with `PayloadTooLargeError` once the rest of it has been read and discarded (up to
 * `MAX_DISCARDED_BODY_BYTES`), so that the client is listening when the 413 arrives; a client waiting for
 * `100 Continue` is refused a declared body over the cap at once, and never sends it.
 */
export function readBody(request: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => readBodyThen(request, limit, resolve, reject))
}

/**
 * As `readBody`, with callbacks instead of a promise: the path of every JSON-RPC request, where a promise and
 * its turn of the microtask queue were a measurable part of a cached answer's cost (issue 18). Exactly one of
 * `onBody` and `onError` is called.
 */
export function readBodyThen(request: IncomingMessage, limit: number, onBody: (text: string) => void, onError: (error: unknown) => void): void {
  const over = Number(request.headers['content-length']) > limit
  if (over && awaitingContinue.has(request)) {
    onError(new PayloadTooLargeError(limit))
    return
  }
  const coding = request.headers['content-encoding']
  if (coding === undefined) receive(request, limit, over, textOf, onBody, onError)
  else readEncoded(request, limit, over, coding).then(onBody, onError)
}

/** Most bodies come in one chunk: decoded as it is, not copied into a new buffer first. */
function textOf(chunks: Buffer[]): string {
  return chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8')
}

function bytesOf(chunks: Buffer[]): Buffer {
  return Buffer.concat(chunks)
}

/**
 * A body whose coding this server does not decode, or that its coding does not decode, reads as no body: no
 * JSON, which each caller answers in its own shape (-32700, `invalid_json`). The gateway refuses unknown
 * codings with a 415 before a body is read (src/server).
 */
async function readEncoded(request: IncomingMessage, limit: number, over: boolean, coding: string): Promise<string> {
  const decoders = contentDecoders(coding)
  let body = await new Promise<Buffer>((resolve, reject) => receive(request, limit, over, bytesOf, resolve, reject))
  if (decoders === null) return ''
  // Undone in the reverse of the order they were applied.
  for (let index = decoders.length - 1; index >= 0; index--) {
    const decoded = await decodeWithin(decoders[index]!, body, limit)
    if (decoded === null) return ''
    body = decoded
  }
  return body.toString('utf8')
}

/** `body` decoded, at most `limit` bytes of it (zlib stops at the bound); `null` when it does not decode. */
function decodeWithin(decode: Decoder, body: Buffer, limit: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) =>
    decode(body, { maxOutputLength: limit }, (error, decoded) => {
      if (error === null) resolve(decoded)
      else if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') reject(new PayloadTooLargeError(limit))
      else resolve(null)
    }),
  )
}

/** Reads the chunks of a body of at most `limit` bytes, then calls `onBody` with `finish(chunks)`, or `onError` once. */
function receive<body>(
  request: IncomingMessage,
  limit: number,
  declaredOver: boolean,
  finish: (chunks: Buffer[]) => body,
  onBody: (body: body) => void,
  onError: (error: unknown) => void,
): void {
  const chunks: Buffer[] = []
  let size = 0
  let over = declaredOver
  let settled = false
  // No named closure here or below: tsx names each one as it is made (`__name`), once per request.
  request.on('data', (chunk: Buffer) => {
    size += chunk.length
    if (over || size > limit) {
      over = true
      chunks.length = 0
      if (size > limit + MAX_DISCARDED_BODY_BYTES && !settled) {
        settled = true
        request.removeAllListeners('data')
        request.removeAllListeners('end')
        request.resume()
        onError(new PayloadTooLargeError(limit))
      }
      return
    }
    chunks.push(chunk)
  })
  request.on('end', () => {
    if (settled) return
    settled = true
    if (over) onError(new PayloadTooLargeError(limit))
    else onBody(finish(chunks))
  })
  request.on('error', (error) => {
    if (settled) return
    settled = true
    onError(error)
  })
}
