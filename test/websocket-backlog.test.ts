import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, expect, test } from 'vitest'
import WebSocket from 'ws'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { waitForSameHead } from './fixtures/sync.js'

/** Sockets one client opens, and the answers it asks for on each without reading them (MiB). */
const SOCKETS = 12
const UNREAD_MIB_PER_SOCKET = 15

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway

beforeAll(async () => {
  anvil = await startAnvil()
  await generateChain(anvil.rpcUrl, { seed: 83, blocks: 40, txPerBlock: [4, 8] })
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

test('a client that reads none of its answers over many WebSockets is cut off once they hold 32 MiB together, though each holds under 16', async () => {
  const request = { jsonrpc: '2.0', id: 1, method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: 'latest' }] }
  const answerBytes = JSON.stringify(await rpc(gateway.dedicatedUrl, request.method, request.params)).length
  const requests = Math.ceil((UNREAD_MIB_PER_SOCKET * 2 ** 20) / answerBytes)
  const url = gateway.dedicatedUrl.replace('http', 'ws')
  const sockets = await Promise.all(
    Array.from({ length: SOCKETS }, async () => {
      const socket = new WebSocket(url)
      await once(socket, 'open')
      return socket
    }),
  )
  const closedByServer: boolean[] = sockets.map(() => false)
  sockets.forEach((socket, position) => {
    socket.on('close', () => {
      closedByServer[position] = true
    })
  })
  for (const socket of sockets) {
    // Nothing read from here on: the answers pile up in the kernel's buffers, then in the server's.
    ;(socket as unknown as { _socket: { pause(): void } })._socket.pause()
    for (let sent = 0; sent < requests; sent++) socket.send(JSON.stringify({ ...request, id: sent }))
  }
  // The server answers them all, or cuts the client off; then reading resumes and shows which sockets it closed.
  await sleep(10_000)
  for (const socket of sockets) (socket as unknown as { _socket: { resume(): void } })._socket.resume()
  await expect.poll(() => closedByServer.filter(Boolean).length, { timeout: 20_000 }).toBeGreaterThan(0)
  for (const socket of sockets) socket.terminate()
}, 60_000)
