import type { IncomingMessage } from 'node:http'
import { PayloadTooLargeError } from '../errors.js'

/**
 * A request body as text, at most `limit` bytes: a larger declared or streamed body rejects with
 * `PayloadTooLargeError`, and the rest of it is drained so that the answer still goes out.
 */
export function readBody(request: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    if (Number(request.headers['content-length']) > limit) return reject(new PayloadTooLargeError(limit))
    const chunks: Buffer[] = []
    let size = 0
    request.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        request.removeAllListeners('data')
        request.resume()
        reject(new PayloadTooLargeError(limit))
        return
      }
      chunks.push(chunk)
    })
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    request.on('error', reject)
  })
}
