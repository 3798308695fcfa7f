import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { promisify } from 'node:util'
import { brotliCompress, brotliCompressSync, constants, gzip, gzipSync } from 'node:zlib'
import { type MaybePromise, whenReady } from './maybe-promise.js'

/** Answers below this size go out as they are: compressing them costs more time than the bytes save. */
export const COMPRESS_MIN_BYTES = 1024
/**
 * Brotli quality for answers made per request. Measured on a 63 KB `eth_getLogs` answer: quality 1 takes
 * 0.12 ms for 14.5 KB, quality 4 0.37 ms for the same size (11 is 50× slower still). A compressed answer costs
 * the server more than a plain one on a fast network: every millisecond here is one a client does not get.
 */
const DYNAMIC_BROTLI_QUALITY = 1
/**
 * gzip level for answers made per request: 1, as nginx's default `gzip_comp_level`. On the same answer: 0.31 ms
 * for 16.6 KB, where zlib's default (6) takes 0.50 ms for 15.7 KB.
 */
const DYNAMIC_GZIP_LEVEL = 1
/**
 * Answers up to this size are compressed on the event loop's thread (at most ~0.3 ms of gzip level 1), larger
 * ones on libuv's pool, so that a multi-megabyte `eth_getLogs` answer never holds up the other requests.
 */
const SYNC_COMPRESS_MAX_BYTES = 64 * 1024
/** Brotli quality for static assets, compressed once per process. */
const STATIC_BROTLI_QUALITY = 9
const STATIC_GZIP_LEVEL = 9

/** The codings flashgate compresses answers with. */
export type ContentCoding = 'br' | 'gzip'
/** `deflate` (RFC 1950) is only sent for answers stored compressed, as they are (codecs/deflated.ts). */
export type StoredCoding = ContentCoding | 'deflate'

const brotliAsync = promisify(brotliCompress)
const gzipAsync = promisify(gzip)

/** Dynamic answers: brotli over gzip when both are equally welcome. */
const DYNAMIC_OFFERS: readonly ContentCoding[] = ['br', 'gzip']
/** Answers stored deflated: sent as they are (no compression work) in a zlib stream or a gzip member when either is as welcome as anything else. */
export const STORED_DEFLATE_OFFERS: readonly StoredCoding[] = ['deflate', 'gzip', 'br']

/**
 * The coding to answer with, from `Accept-Encoding` and its q-values (RFC 9110 §12.5.3): the most welcome
 * of `offers`, the earlier offer on a tie, `null` (identity) when none is welcome.
 */
export function negotiateEncoding(header: string | string[] | undefined): ContentCoding | null
export function negotiateEncoding<offer extends StoredCoding>(header: string | string[] | undefined, offers: readonly offer[]): offer | null
export function negotiateEncoding(header: string | string[] | undefined, offers: readonly StoredCoding[] = DYNAMIC_OFFERS): StoredCoding | null {
  if (header === undefined || header === '') return null
  const text = Array.isArray(header) ? header.join(',') : header
  const weights = new Map<string, number>()
  for (const part of text.split(',')) {
    const [name, ...parameters] = part.split(';')
    const coding = name!.trim().toLowerCase()
    if (coding === '') continue
    let weight = 1
    for (const parameter of parameters) {
      const [key, value] = parameter.split('=')
      if (key?.trim().toLowerCase() === 'q') weight = Number(value?.trim())
    }
    weights.set(coding, Number.isFinite(weight) ? weight : 0)
  }
  const wildcard = weights.get('*') ?? 0
  const weightOf = (coding: StoredCoding) => weights.get(coding) ?? (coding === 'gzip' ? weights.get('x-gzip') : undefined) ?? wildcard
  let best: StoredCoding | null = null
  let bestWeight = 0
  for (const offer of offers) {
    const weight = weightOf(offer)
    if (weight > bestWeight) {
      best = offer
      bestWeight = weight
    }
  }
  return best
}

/**
 * Compresses one answer made for this request (fast settings): on this thread up to `SYNC_COMPRESS_MAX_BYTES`,
 * on libuv's pool above. A zlib job on the pool costs more than the compression of an answer of a few KB:
 * measured on an 8 KB `eth_getLogs` answer, gzip took 39 µs here and 149 µs through the pool (209 µs of CPU).
 */
export function compressDynamic(body: Buffer, coding: ContentCoding): MaybePromise<Buffer> {
  const brotli = { params: { [constants.BROTLI_PARAM_QUALITY]: DYNAMIC_BROTLI_QUALITY, [constants.BROTLI_PARAM_SIZE_HINT]: body.length } }
  const gzipLevel = { level: DYNAMIC_GZIP_LEVEL }
  if (body.length <= SYNC_COMPRESS_MAX_BYTES) return coding === 'br' ? brotliCompressSync(body, brotli) : gzipSync(body, gzipLevel)
  return coding === 'br' ? brotliAsync(body, brotli) : gzipAsync(body, gzipLevel)
}

/** Compresses a static asset once (slower settings, smaller output). */
export function compressStatic(body: Buffer, coding: ContentCoding): Promise<Buffer> {
  return coding === 'br'
    ? brotliAsync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: STATIC_BROTLI_QUALITY, [constants.BROTLI_PARAM_SIZE_HINT]: body.length } })
    : gzipAsync(body, { level: STATIC_GZIP_LEVEL })
}

/** Adds `Accept-Encoding` to the `Vary` header given, or else already set on the response (CORS's `Origin`). */
function varyOnEncoding(response: ServerResponse, headers: OutgoingHttpHeaders): string {
  const vary = headers.vary ?? response.getHeader('vary')
  if (vary === undefined) return 'Accept-Encoding'
  return `${Array.isArray(vary) ? vary.join(', ') : String(vary)}, Accept-Encoding`
}

/**
 * Writes a whole answer, compressed when it is large enough and the client accepts gzip or br. Small answers
 * and clients that accept neither take the plain path: no copy, no zlib.
 */
export function sendCompressible(
  request: IncomingMessage,
  response: ServerResponse,
  status: number,
  body: Body,
  headers: OutgoingHttpHeaders,
): MaybePromise<void> {
  const size = byteLength(body)
  if (size < COMPRESS_MIN_BYTES) return sendEncoded(request, response, status, body, null, headers, size)
  const coding = negotiateEncoding(request.headers['accept-encoding'])
  if (coding === null) return sendEncoded(request, response, status, body, null, { ...headers, vary: varyOnEncoding(response, headers) }, size)
  const whole = typeof body === 'string' ? Buffer.from(body) : Array.isArray(body) ? Buffer.concat(body) : (body as Buffer)
  return whenReady(compressDynamic(whole, coding), (compressed) => sendEncoded(request, response, status, compressed, coding, headers))
}

/** An answer's bytes: text, one buffer, or buffers to write one after the other. */
export type Body = string | Buffer | readonly Buffer[]

function byteLength(body: Body): number {
  if (!Array.isArray(body)) return Buffer.byteLength(body as string | Buffer)
  let size = 0
  for (const part of body) size += part.length
  return size
}

/**
 * Writes an answer that is already encoded in `coding` (or plain, for `null`), e.g. a zlib stream spliced
 * from stored DEFLATE (codecs/deflated.ts); the caller has negotiated the coding. `HEAD` gets the headers.
 */
export function sendEncoded(
  request: IncomingMessage,
  response: ServerResponse,
  status: number,
  body: Body,
  coding: StoredCoding | null,
  headers: OutgoingHttpHeaders,
  size = byteLength(body),
): void {
  const head =
    coding === null
      ? { ...headers, 'content-length': size }
      : { ...headers, 'content-encoding': coding, vary: varyOnEncoding(response, headers), 'content-length': size }
  response.writeHead(status, head)
  if (request.method === 'HEAD') return void response.end()
  if (!Array.isArray(body)) return void response.end(body)
  // Corked: the head and every piece leave in one write (end() uncorks).
  response.cork()
  for (const part of body) response.write(part)
  response.end()
}
