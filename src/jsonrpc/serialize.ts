import { RawJson } from '../resolvers/index.js'
import type { JsonRpcResponse } from './index.js'

const OPEN_BATCH = Buffer.from('[')
const SEPARATOR = Buffer.from(',')
const CLOSE_BATCH = Buffer.from(']')
const CLOSE_RESPONSE = Buffer.from('}')

const hasRawResult = (response: JsonRpcResponse) => 'result' in response && response.result instanceof RawJson

function responseChunks(response: JsonRpcResponse, chunks: Buffer[]) {
  if ('result' in response && response.result instanceof RawJson) {
    // The key order of `{ jsonrpc, id, result }`, as `JSON.stringify` writes the other answers.
    chunks.push(Buffer.from(`{"jsonrpc":"2.0","id":${JSON.stringify(response.id)},"result":`), response.result.bytes, CLOSE_RESPONSE)
  } else chunks.push(Buffer.from(JSON.stringify(response)))
}

/**
 * The JSON of a JSON-RPC answer (one response or a batch). Results that are already JSON text (`RawJson`,
 * e.g. whole-block receipts) are copied in as bytes instead of being parsed and stringified again.
 */
export function serializeJsonRpc(body: JsonRpcResponse | JsonRpcResponse[]): string | Buffer {
  const responses = Array.isArray(body) ? body : [body]
  if (!responses.some(hasRawResult)) return JSON.stringify(body)
  const chunks: Buffer[] = []
  if (!Array.isArray(body)) responseChunks(body, chunks)
  else {
    chunks.push(OPEN_BATCH)
    body.forEach((response, index) => {
      if (index > 0) chunks.push(SEPARATOR)
      responseChunks(response, chunks)
    })
    chunks.push(CLOSE_BATCH)
  }
  return Buffer.concat(chunks)
}
