import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'

// The floor of the read benchmarks: a bare Node HTTP server that reads a JSON-RPC body, parses it, finds the
// answer to its method and params in a table, and writes it with the request's id. Nothing flashgate does per
// cached request can be cheaper than this on the same Node; it runs in a process of its own, like the gateway.
// The table holds the answers flashgate gave to the same bodies (`{ answers }` over IPC: a JSON-lines file of
// `{ method, params, result }`), so that the floor writes as many bytes as flashgate; a body it does not hold is answered
// `"0x0"`. Listens on an ephemeral port and reports it over IPC.

/** Results as JSON text, by method and params written back as JSON (flashgate's own memo key). */
let answers = new Map<string, string>()
const keyOf = (method: unknown, params: unknown) => `${String(method)}\u0000${JSON.stringify(params ?? [])}`

const server = createServer((request, response) => {
  const chunks: Buffer[] = []
  request.on('data', (chunk: Buffer) => chunks.push(chunk))
  request.on('end', () => {
    let id: unknown = null
    let result = '"0x0"'
    try {
      const call = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown; method?: unknown; params?: unknown }
      id = call.id ?? null
      result = answers.get(keyOf(call.method, call.params)) ?? result
    } catch {
      // A body that is not JSON still gets an answer: the floor measures HTTP and parsing, not validation.
    }
    const body = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${result}}`
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
    response.end(body)
  })
})
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.send!({ port: typeof address === 'object' && address !== null ? address.port : 0 })
})
process.on('message', (message: { answers: string }) => {
  answers = new Map(
    readFileSync(message.answers, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => {
        const { method, params, result } = JSON.parse(line) as { method: string; params: unknown; result: unknown }
        return [keyOf(method, params), JSON.stringify(result)]
      }),
  )
  process.send!({ answered: answers.size })
})
process.on('disconnect', () => process.exit(0))
