import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, expect, test } from 'vitest'
import { WebSocketServer } from 'ws'
import { createUpstream } from './index.js'

// A WebSocket upstream that restarts, or is away for a while, is connected again by the next call.

/** Longer than viem's first reconnection attempt (two seconds after the close), which finds nobody. */
const OUTAGE_MS = 3_000

const servers: WebSocketServer[] = []
afterAll(async () => {
  for (const server of servers) {
    for (const client of server.clients) client.terminate()
    await new Promise((resolve) => server.close(resolve))
  }
})

/** A JSON-RPC node over WebSocket answering `eth_blockNumber` with `head`; port 0 for a new one. */
async function startNode(port: number, head: string): Promise<{ port: number; stop(): Promise<void> }> {
  const server = new WebSocketServer({ host: '127.0.0.1', port })
  servers.push(server)
  await new Promise((resolve, reject) => server.once('listening', resolve).once('error', reject))
  server.on('connection', (socket) =>
    socket.on('message', (message) => {
      const { id } = JSON.parse(message.toString()) as { id: number }
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, result: head }))
    }),
  )
  return {
    port: (server.address() as AddressInfo).port,
    async stop() {
      for (const client of server.clients) client.terminate()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

test('a ws:// upstream that went away and came back answers the next call', { timeout: 30_000 }, async () => {
  const node = await startNode(0, '0x1')
  const upstream = createUpstream({ rpcUrl: `ws://127.0.0.1:${node.port}` })
  expect(await upstream.request('eth_blockNumber')).toBe('0x1')

  await node.stop()
  await sleep(OUTAGE_MS)
  await startNode(node.port, '0x2')
  expect(await upstream.request('eth_blockNumber')).toBe('0x2')
  expect(await upstream.batchedRequest('eth_blockNumber')).toBe('0x2')
})
