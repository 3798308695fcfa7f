import { type DeflatedText, gzipMember, zlibStream } from '../codecs/deflated.js'
import { RawJson } from '../resolvers/index.js'
import type { JsonRpcResponse } from './index.js'
import { NumericId } from './request-ids.js'

const OPEN_BATCH = Buffer.from('[')
const SEPARATOR = Buffer.from(',')
const CLOSE_BATCH = Buffer.from(']')
const CLOSE_RESPONSE = Buffer.from('}')

const hasRawResult = (response: JsonRpcResponse) => 'result' in response && response.result instanceof RawJson
const hasNumericId = (response: JsonRpcResponse) => response.id instanceof NumericId
/** A response `JSON.stringify` would not write as it must: a raw result, or an id kept as its text. */
const needsOwnWriting = (response: JsonRpcResponse) => hasRawResult(response) || hasNumericId(response)
const idText = (id: JsonRpcResponse['id']) => (id instanceof NumericId ? id.text : JSON.stringify(id))

/** One response's pieces: bytes, and raw results as they are (inflated or kept deflated by the caller). */
function responseChunks(response: JsonRpcResponse, chunks: (Buffer | RawJson)[]) {
  // The key order of `{ jsonrpc, id, result | error }`, as `JSON.stringify` writes the other answers.
  const head = `{"jsonrpc":"2.0","id":${idText(response.id)},`
  if ('result' in response && response.result instanceof RawJson) chunks.push(Buffer.from(`${head}"result":`), response.result, CLOSE_RESPONSE)
  else if (hasNumericId(response)) {
    const rest = 'result' in response ? `"result":${JSON.stringify(response.result)}` : `"error":${JSON.stringify(response.error)}`
    chunks.push(Buffer.from(`${head}${rest}}`))
  } else chunks.push(Buffer.from(JSON.stringify(response)))
}

function answerChunks(body: JsonRpcResponse | JsonRpcResponse[]): (Buffer | RawJson)[] {
  const chunks: (Buffer | RawJson)[] = []
  if (!Array.isArray(body)) responseChunks(body, chunks)
  else {
    chunks.push(OPEN_BATCH)
    body.forEach((response, index) => {
      if (index > 0) chunks.push(SEPARATOR)
      responseChunks(response, chunks)
    })
    chunks.push(CLOSE_BATCH)
  }
  return chunks
}

/**
 * The JSON of a JSON-RPC answer (one response or a batch). Results that are already JSON text (`RawJson`,
 * e.g. whole-block receipts) are copied in as bytes instead of being parsed and stringified again, and a
 * `NumericId` is written as the request wrote it.
 */
export function serializeJsonRpc(body: JsonRpcResponse | JsonRpcResponse[]): string | Buffer {
  const parts = serializeJsonRpcParts(body)
  return typeof parts === 'string' ? parts : Buffer.concat(parts)
}

/**
 * As `serializeJsonRpc`, but the bytes in pieces to be written in order, so that a large raw result goes to
 * the socket as it is instead of being copied into one buffer with the few bytes around it.
 */
export function serializeJsonRpcParts(body: JsonRpcResponse | JsonRpcResponse[]): string | Buffer[] {
  if (!(Array.isArray(body) ? body.some(needsOwnWriting) : needsOwnWriting(body))) return JSON.stringify(body)
  return answerChunks(body).map((chunk) => (chunk instanceof RawJson ? chunk.bytes : chunk))
}

/** Whether any result of the answer is stored deflated: only then is `deflatedJsonRpc` worth asking (and the client's codings worth reading). */
export function hasDeflatedResult(body: JsonRpcResponse | JsonRpcResponse[]): boolean {
  return Array.isArray(body) ? body.some(isDeflatedResult) : isDeflatedResult(body)
}

const isDeflatedResult = (response: JsonRpcResponse) => 'result' in response && response.result instanceof RawJson && response.result.deflated !== undefined

/** Plain bytes a spliced answer may carry uncompressed (stored blocks) beside its deflated results. */
const SPLICE_MAX_PLAIN_BYTES = 4096

/**
 * The answer as one zlib stream (`Content-Encoding: deflate`) or gzip member (`gzip`) made of the stored
 * DEFLATE of its results as they are, with no inflate and no compression per request; with its plain length.
 * `null` when no result is stored deflated, when the rest of the answer is too large to go uncompressed beside
 * them (a batch of other answers): then compressing the whole is better; and for gzip, when a result was
 * stored without its CRC-32.
 */
export function storedJsonRpc(body: JsonRpcResponse | JsonRpcResponse[], coding: 'deflate' | 'gzip'): { stream: Buffer; plainLength: number } | null {
  if (!hasDeflatedResult(body)) return null
  const parts: (Buffer | DeflatedText)[] = []
  let plainBytes = 0
  let plainLength = 0
  for (const chunk of answerChunks(body)) {
    const part = chunk instanceof RawJson ? (chunk.deflated ?? chunk.bytes) : chunk
    if (Buffer.isBuffer(part)) plainBytes += part.length
    if (plainBytes > SPLICE_MAX_PLAIN_BYTES) return null
    plainLength += part.length
    // Adjacent plain pieces are joined so that they share stored blocks.
    const previous = parts.at(-1)
    if (Buffer.isBuffer(part) && Buffer.isBuffer(previous)) parts[parts.length - 1] = Buffer.concat([previous, part])
    else parts.push(part)
  }
  const stream = coding === 'deflate' ? zlibStream(parts) : gzipMember(parts)
  return stream === null ? null : { stream, plainLength }
}
