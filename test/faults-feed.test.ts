import { createServer, type Server, type Socket, connect } from 'node:net'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createFlashblocksServer, type FlashblocksServer } from '../src/devnet/flashblocks-server.js'
import { FLASHBLOCK_STALE_MS } from '../src/pending/index.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, flashblock, signedTransfer } from './fixtures/flashblocks.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, blockHashAt, waitForSameHead } from './fixtures/sync.js'

const SENDER = DEV_ACCOUNTS[3]!.address.toLowerCase() as `0x${string}`
const RECIPIENT = `0x${'7e'.repeat(20)}` as const
/** Pending falls back to latest after FLASHBLOCK_STALE_MS without frames, whether the connection was lost or went silent. */
const FALLBACK_SLACK_MS = 1_000

let anvil: Anvil
let database: TestDatabase
let feed: FlashblocksServer
let proxy: Awaited<ReturnType<typeof startBlackHoleProxy>>
let gateway: TestGateway
let head: number
let payloads = 0

/**
 * A loopback TCP relay in front of the feed. `blackHole()` makes its open connections swallow everything in
 * both directions without closing, as a peer that vanished would; connections made afterwards relay again.
 */
async function startBlackHoleProxy(targetPort: number) {
  const open = new Set<{ client: Socket; upstream: Socket; swallowed: boolean }>()
  let accepted = 0
  const server: Server = createServer((client) => {
    accepted++
    const upstream = connect(targetPort, '127.0.0.1')
    const link = { client, upstream, swallowed: false }
    open.add(link)
    client.on('data', (chunk) => link.swallowed || upstream.write(chunk))
    upstream.on('data', (chunk) => link.swallowed || client.write(chunk))
    const close = () => {
      open.delete(link)
      client.destroy()
      upstream.destroy()
    }
    client.on('close', close)
    upstream.on('close', close)
    client.on('error', close)
    upstream.on('error', close)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    url: `ws://127.0.0.1:${port}/ws`,
    get accepted() {
      return accepted
    },
    blackHole() {
      for (const link of open) link.swallowed = true
    },
    async stop() {
      for (const link of open) {
        link.client.destroy()
        link.upstream.destroy()
      }
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

beforeAll(async () => {
  anvil = await startAnvil()
  await anvilCall(anvil.rpcUrl, 'anvil_mine', ['0x5'])
  feed = await createFlashblocksServer({ port: 0, plain: false })
  proxy = await startBlackHoleProxy(feed.port)
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, flashblocksWs: proxy.url })
  head = await waitForSameHead(gateway, anvil.rpcUrl)
  for (const deadline = Date.now() + 10_000; feed.clientCount() === 0; ) {
    if (Date.now() > deadline) throw new Error('the gateway did not connect to the feed')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
})

afterAll(async () => {
  await gateway?.stop()
  await proxy?.stop()
  await feed?.close()
  await anvil?.stop()
  await database?.drop()
})

/** Two pre-confirmed transfers from SENDER in the block above the head, as two flashblocks. */
async function preConfirm(nonce: number) {
  const first = await signedTransfer({ from: 3, nonce, to: RECIPIENT, value: 5n })
  const second = await signedTransfer({ from: 3, nonce: nonce + 1, to: RECIPIENT, value: 6n })
  const payloadId = `0x${(++payloads).toString(16).padStart(16, '0')}` as const
  feed.broadcast(flashblock({ payloadId, index: 0, blockNumber: head + 1, parentHash: await blockHashAt(anvil.rpcUrl, head), transactions: [first] }) as never)
  feed.broadcast(flashblock({ payloadId, index: 1, blockNumber: head + 1, cumulativeGasBefore: 21_000n, transactions: [second] }) as never)
  return [first.hash, second.hash]
}

async function pendingView() {
  const [nonce, receipts, latestNonce, latestReceipts] = await Promise.all([
    rpc(gateway.dedicatedUrl, 'eth_getTransactionCount', [SENDER, 'pending']),
    rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['pending']),
    rpc(gateway.dedicatedUrl, 'eth_getTransactionCount', [SENDER, 'latest']),
    rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['latest']),
  ])
  return {
    nonce: Number(nonce.result),
    receipts: (receipts.result as { transactionHash: string }[]).map((receipt) => receipt.transactionHash),
    asLatest: nonce.result === latestNonce.result && JSON.stringify(receipts.result) === JSON.stringify(latestReceipts.result),
  }
}

test('the feed server killed: pending answers as latest within the stale limit, then the feed reconnects with backoff and pre-confirmations flow again when the server is back on its port', async () => {
  const confirmed = Number((await rpc(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER, 'latest'])).result)
  const hashes = await preConfirm(confirmed)
  await expect.poll(pendingView).toEqual({ nonce: confirmed + 2, receipts: hashes, asLatest: false })

  const port = feed.port
  await feed.close()
  const killedAt = Date.now()
  await expect.poll(async () => (await pendingView()).asLatest, { timeout: FLASHBLOCK_STALE_MS + FALLBACK_SLACK_MS, interval: 50 }).toBe(true)
  expect(Date.now() - killedAt).toBeLessThan(FLASHBLOCK_STALE_MS + FALLBACK_SLACK_MS)
  expect(await fetch(`${gateway.url}/readyz`).then((response) => response.json())).toMatchObject({ flashblocks: 'disconnected' })

  // Down for a while: the reconnect attempts fail and back off; pending stays latest, never stale.
  await new Promise((resolve) => setTimeout(resolve, 3_000))
  expect((await pendingView()).asLatest).toBe(true)

  feed = await createFlashblocksServer({ port, plain: false })
  // The backoff is at most 5 s.
  await expect.poll(() => feed.clientCount(), { timeout: 10_000, interval: 100 }).toBe(1)
  expect(await fetch(`${gateway.url}/readyz`).then((response) => response.json())).toMatchObject({ flashblocks: 'connected' })
  const again = await preConfirm(confirmed + 10)
  await expect.poll(pendingView).toEqual({ nonce: confirmed + 12, receipts: again, asLatest: false })
})

test('a feed that goes silent without closing (its peer vanished): pending answers as latest within the stale limit, and the dead connection is replaced by itself', async () => {
  const confirmed = Number((await rpc(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER, 'latest'])).result)
  const hashes = await preConfirm(confirmed + 20)
  await expect.poll(pendingView).toEqual({ nonce: confirmed + 22, receipts: hashes, asLatest: false })

  const connections = proxy.accepted
  proxy.blackHole()
  const silentFrom = Date.now()
  await expect.poll(async () => (await pendingView()).asLatest, { timeout: FLASHBLOCK_STALE_MS + FALLBACK_SLACK_MS, interval: 50 }).toBe(true)
  expect(Date.now() - silentFrom).toBeLessThan(FLASHBLOCK_STALE_MS + FALLBACK_SLACK_MS)

  // No close ever comes: the heartbeat finds the connection dead and opens a new one.
  await expect.poll(() => proxy.accepted, { timeout: 15_000, interval: 100 }).toBeGreaterThan(connections)
  await expect.poll(() => gateway.feed?.status().connected, { timeout: 5_000 }).toBe(true)
  const again = await preConfirm(confirmed + 30)
  await expect.poll(pendingView).toEqual({ nonce: confirmed + 32, receipts: again, asLatest: false })
})
