import type { IncomingMessage, ServerResponse } from 'node:http'
import { PayloadTooLargeError } from '../errors.js'

/**
 * Of a body over the cap, this much more is read and thrown away before the 413 goes out. A client that is
 * still sending when the server closes the connection sees EPIPE or a reset, not the 413; past this bound the
 * connection is closed anyway (no one sends 64 MiB to a JSON-RPC endpoint by mistake).
 */
export const MAX_DISCARDED_BODY_BYTES = 64 * 1024 * 1024

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
 * A request body as text, at most `limit` bytes. A larger declared or streamed body rejects with
 * `PayloadTooLargeError` once the rest of it has been read and discarded (up to `MAX_DISCARDED_BODY_BYTES`),
 * so that the client is listening when the 413 arrives; a client waiting for `100 Continue` is refused a
 * declared body over the cap at once, and never sends it.
 */
export function readBody(request: IncomingMessage, limit: number): Promise<string> {
  const declaredOver = Number(request.headers['content-length']) > limit
  if (declaredOver && awaitingContinue.has(request)) return Promise.reject(new PayloadTooLargeError(limit))
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    let over = declaredOver
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
