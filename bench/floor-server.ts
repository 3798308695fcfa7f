import { createServer } from 'node:http'

// The floor of the read benchmarks: a bare Node HTTP server that reads a JSON-RPC body, parses it and answers
// a fixed result for its id. Nothing flashgate does per request can be cheaper than this on the same Node;
// it runs in a process of its own, like the gateway. Listens on an ephemeral port and reports it over IPC.

const server = createServer((request, response) => {
  const chunks: Buffer[] = []
  request.on('data', (chunk: Buffer) => chunks.push(chunk))
  request.on('end', () => {
    let id: unknown = null
    try {
      id = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown }).id ?? null
    } catch {
      // A body that is not JSON still gets an answer: the floor measures HTTP and parsing, not validation.
    }
    const body = JSON.stringify({ jsonrpc: '2.0', id, result: '0x0' })
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
    response.end(body)
  })
})
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.send!({ port: typeof address === 'object' && address !== null ? address.port : 0 })
})
process.on('disconnect', () => process.exit(0))
