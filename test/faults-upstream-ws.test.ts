import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, expect, test, vi } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { waitForSameHead } from './fixtures/sync.js'

/** Longer than viem's first reconnection attempt (two seconds after the close), which finds nobody. */
const OUTAGE_MS = 4_000

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway | undefined
let relay: WebSocketRelay | undefined

beforeAll(async () => {
  ;[anvil, database] = await Promise.all([startAnvil(), createTestDatabase()])
})

afterAll(async () => {
  await gateway?.stop()
  await relay?.down()
  await anvil?.stop()
  await database?.drop()
})

test('a ws:// upstream that went away is followed again once it is back, newHeads with it, and nothing is written outside the log', {
  timeout: 60_000,
}, async () => {
  // viem's own reconnection writes each failed attempt to the console as a stack trace.
  const consoleErrors = vi.spyOn(console, 'error')
  relay = await startWebSocketRelay(anvil.wsUrl)
  await generateChain(anvil.rpcUrl, { seed: 61, blocks: 5 })
  gateway = await startTestGateway({ upstreamRpc: relay.url, databaseUrl: database.databaseUrl })
  await waitForSameHead(gateway, anvil.rpcUrl)

  // The upstream goes away (connections cut, new ones refused) while its chain moves on.
  await relay.down()
  await generateChain(anvil.rpcUrl, { seed: 62, blocks: 4 })
  await sleep(OUTAGE_MS)

  const subscriptionsBefore = relay.subscriptions()
  await relay.up()
  await waitForSameHead(gateway, anvil.rpcUrl, 15_000)
  // Subscribed again (within the 1-2-4 s back-off), not only polled.
  await expect.poll(() => relay!.subscriptions(), { timeout: 10_000 }).toBeGreaterThan(subscriptionsBefore)
  expect(consoleErrors).not.toHaveBeenCalled()
  consoleErrors.mockRestore()
})

type WebSocketRelay = { url: string; down(): Promise<void>; up(): Promise<void>; subscriptions(): number }

/** A loopback WebSocket relay in front of the node that can be taken down (and its port left closed) and brought back. */
async function startWebSocketRelay(targetUrl: string): Promise<WebSocketRelay> {
  let server: WebSocketServer | null = null
  let port = 0
  let subscriptions = 0
  async function up() {
    const listening = new WebSocketServer({ host: '127.0.0.1', port })
    await new Promise<void>((resolve, reject) => listening.once('listening', resolve).once('error', reject))
    port = (listening.address() as { port: number }).port
    listening.on('connection', (client) => {
      const target = new WebSocket(targetUrl)
      const queued: string[] = []
      target.on('open', () => {
        for (const message of queued.splice(0)) target.send(message)
      })
      target.on('message', (message) => client.send(message.toString()))
      client.on('message', (message) => {
        if (message.toString().includes('"eth_subscribe"')) subscriptions++
        if (target.readyState === WebSocket.OPEN) target.send(message.toString())
        else queued.push(message.toString())
      })
      client.on('close', () => target.close())
      target.on('close', () => client.close())
      target.on('error', () => client.terminate())
    })
    server = listening
  }
  await up()
  return {
    url: `ws://127.0.0.1:${port}`,
    up,
    subscriptions: () => subscriptions,
    async down() {
      const closing = server
      server = null
      if (closing === null) return
      for (const client of closing.clients) client.terminate()
      await new Promise<void>((resolve) => closing.close(() => resolve()))
    },
  }
}
