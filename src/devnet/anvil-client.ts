// The sequencer's line to anvil: plain JSON-RPC calls, and pipelined sends that reach anvil's pool in order.
import { connect } from 'node:net'
import type { JsonRpcErrorObject } from '../errors.js'

const HEADER_END = '\r\n\r\n'

export type JsonRpcId = string | number | null
export type JsonRpcRequest = { jsonrpc: '2.0'; id?: JsonRpcId; method: string; params?: unknown }
export type JsonRpcResponse = { jsonrpc: '2.0'; id: JsonRpcId; result?: unknown; error?: JsonRpcErrorObject }

export type AnvilClient = {
  forward: (request: JsonRpcRequest) => Promise<JsonRpcResponse>
  /** Answers in request order, and anvil handles them in that order (which FIFO mining depends on). */
  forwardInOrder: (requests: JsonRpcRequest[]) => Promise<JsonRpcResponse[]>
  request: <T = unknown>(method: string, params?: unknown[]) => Promise<T>
}

export function createAnvilClient(rpcUrl: string): AnvilClient {
  let nextId = 0
  async function forward(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    const response = await fetch(rpcUrl, {
      method: 'POST',
      // anvil refuses a body without this header (-32600 "Invalid request").
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(request),
    })
    return (await response.json()) as JsonRpcResponse
  }
  async function forwardInOrder(requests: JsonRpcRequest[]): Promise<JsonRpcResponse[]> {
    if (requests.length <= 1) return Promise.all(requests.map(forward))
    const answered: string[] = []
    try {
      await pipeline(
        new URL(rpcUrl),
        requests.map((request) => JSON.stringify(request)),
        answered,
      )
    } catch {
      // The rest one at a time; a request that did reach anvil is answered "already imported".
    }
    const rest = []
    for (const request of requests.slice(answered.length)) rest.push(await forward(request))
    return [...answered.map((body) => JSON.parse(body) as JsonRpcResponse), ...rest]
  }
  async function request<T>(method: string, params: unknown[] = []): Promise<T> {
    const response = await forward({ jsonrpc: '2.0', id: ++nextId, method, params })
    if (response.error) throw new Error(`anvil ${method}: ${response.error.message} (${response.error.code})`)
    return response.result as T
  }
  return { forward, forwardInOrder, request }
}

/**
 * HTTP/1.1 pipelining: every request written at once on one connection. anvil (hyper) handles a
 * connection's requests one after another, so they reach its pool in order, at a fifth of the cost of
 * awaiting each (0.2 ms against 0.85 ms a transaction, measured). A JSON-RPC batch is no substitute:
 * anvil runs a batch's calls concurrently, and FIFO order then follows whichever finished first.
 */
function pipeline(url: URL, bodies: string[], answers: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    let buffer = Buffer.alloc(0)
    const socket = connect(Number(url.port), url.hostname)
    socket.setNoDelay(true)
    socket.on('error', reject)
    socket.on('close', () => reject(new Error(`connection closed after ${answers.length} of ${bodies.length} answers`)))
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk])
      for (let end = buffer.indexOf(HEADER_END); end >= 0; end = buffer.indexOf(HEADER_END)) {
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(buffer.subarray(0, end).toString('latin1'))?.[1]
        if (length === undefined) return socket.destroy(new Error('anvil answered without content-length'))
        const bodyStart = end + HEADER_END.length
        if (buffer.length < bodyStart + Number(length)) return
        const body = buffer.subarray(bodyStart, bodyStart + Number(length)).toString('utf8')
        buffer = buffer.subarray(bodyStart + Number(length))
        answers.push(body)
        if (answers.length === bodies.length) {
          resolve()
          socket.end()
        }
      }
    })
    const host = `${url.hostname}:${url.port}`
    socket.write(
      bodies
        .map((body) => `POST / HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
        .join(''),
    )
  })
}
