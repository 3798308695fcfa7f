import type { IncomingMessage } from 'node:http'
import { PayloadTooLargeError } from '../errors.js'

/**
 * Of a body over the cap, this much more is read and thrown away before the 413 goes out. A client that is
 * still sending when the server closes the connection sees EPIPE or a reset, not the 413; past this bound the
 * connection is closed anyway (no one sends 64 MiB to a JSON-RPC endpoint by mistake).
 */
export const MAX_DISCARDED_BODY_BYTES = 64 * 1024 * 1024

/**
 * A request body as text, at most `limit` bytes. A larger declared or streamed body rejects with
 * `PayloadTooLargeError` once the rest of it has been read and discarded (up to `MAX_DISCARDED_BODY_BYTES`),
 * so that the client is listening when the 413 arrives.
 */
export function readBody(request: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    let over = Number(request.headers['content-length']) > limit
    // No named closure here or below: tsx names each one as it is made (`__name`), once per request.
    request.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (over || size > limit) {
        over = true
        chunks.length = 0
        if (size > limit + MAX_DISCARDED_BODY_BYTES) {
          request.removeAllListeners('data')
          request.removeAllListeners('end')
          request.resume()
          reject(new PayloadTooLargeError(limit))
        }
        return
      }
      chunks.push(chunk)
    })
    // Most bodies come in one chunk: decoded as it is, not copied into a new buffer first.
    request.on('end', () =>
      over ? reject(new PayloadTooLargeError(limit)) : resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8')),
    )
    request.on('error', reject)
  })
}
