import { setTimeout as sleep } from 'node:timers/promises'
import type { Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startDelayProxy } from './fixtures/delay-proxy.js'
import { startFaultyProxy } from './fixtures/faulty-proxy.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { result, rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'

// Today's Base: the feed carries transactions only; receipts are hydrated from a flashblocks-aware upstream
// (the devnet), here behind a proxy that can make every answer slow.
const UPSTREAM_DELAY_MS = 400
const ZERO_HASH = `0x${'00'.repeat(32)}`

let devnet: Devnet
let proxy: Awaited<ReturnType<typeof startDelayProxy>>
let database: TestDatabase
let gateway: TestGateway

/** Until flashgate follows the block being built (it joins a feed at the next index 0). */
async function followingABlock() {
  await expect
    .poll(async () => gateway.pending!.blocks((await gateway.resolvers.chain.view()).head?.number ?? -1).length, { timeout: 10_000, interval: 20 })
    .toBeGreaterThan(0)
}

async function readyz() {
  return (await (await fetch(`${gateway.url}/readyz`)).json()) as { pending: Record<string, unknown> }
}

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 100 })
  proxy = await startDelayProxy(devnet.rpcUrl)
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: proxy.url, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
  await gateway.ingester.waitForBlock(0, 10_000)
})

afterAll(async () => {
  await gateway?.stop()
  await proxy?.stop()
  await devnet?.stop()
  await database?.drop()
})

describe('hydration from a flashblocks-aware upstream', () => {
  test("today's frames: receipts come from the upstream, equal the sealed ones, and /readyz names the source", async () => {
    await followingABlock()
    const sender = DEV_ACCOUNTS[1]!.address
    const hash = await result<Hex>(devnet.rpcUrl, 'eth_sendTransaction', [{ from: sender, to: DEV_ACCOUNTS[2]!.address, value: '0x5' }])
    let pendingReceipt: Record<string, unknown> | null = null
    for (let tries = 0; pendingReceipt === null; tries++) {
      const receipt = await result<Record<string, unknown> | null>(gateway.dedicatedUrl, 'eth_getTransactionReceipt', [hash])
      if (receipt !== null && receipt.blockHash === ZERO_HASH) pendingReceipt = receipt
      else if (receipt !== null) throw new Error('sealed before a pre-confirmed receipt was seen')
      if (tries > 500) throw new Error('no pre-confirmed receipt')
      await sleep(5)
    }
    await gateway.ingester.waitForBlock(Number(pendingReceipt.blockNumber), 10_000)
    const sealed = await result<Record<string, unknown>>(devnet.rpcUrl, 'eth_getTransactionReceipt', [hash])
    const withoutHash = ({ blockHash: _hash, logs, ...rest }: Record<string, unknown>) => ({
      ...rest,
      logs: (logs as Record<string, unknown>[]).map(({ blockHash: _h, ...log }) => log),
    })
    expect(withoutHash(pendingReceipt)).toEqual(withoutHash(sealed))
    const { pending } = await readyz()
    expect(pending).toMatchObject({ mode: 'auto', source: 'hydrate', upstreamFlashblocksAware: true, hydrationFailures: 0 })
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
    expect(metrics).toMatch(/flashgate_pending_source\{source="hydrate"\} 1/)
    expect(metrics).toMatch(/flashgate_pending_hydrations_total [1-9]/)
  })

  test('a slow upstream never holds up the feed: transactions and nonces at once, receipts one round trip later, in order', async () => {
    await followingABlock()
    proxy.setDelay(UPSTREAM_DELAY_MS)
    try {
      const sender = DEV_ACCOUNTS[3]!.address
      const state = gateway.pending!
      const appliedAt = new Map<string, number>()
      const hydratedAt = new Map<string, number>()
      const announced: string[] = []
      const noncesWhileHydrating: Promise<[bigint, number]>[] = []
      state.events.on('transactions', (_block, transactions) => {
        for (const transaction of transactions) {
          appliedAt.set(transaction.hash, performance.now())
          // Asked the moment the frame is applied, while its receipts are still out.
          if (transaction.from === sender.toLowerCase())
            noncesWhileHydrating.push(
              result<Hex>(gateway.dedicatedUrl, 'eth_getTransactionCount', [sender, 'pending']).then((nonce) => [BigInt(nonce), transaction.nonce]),
            )
        }
      })
      state.events.on('receipts', (_block, receipts) => {
        for (const receipt of receipts) {
          hydratedAt.set(receipt.transactionHash, performance.now())
          announced.push(receipt.transactionHash)
        }
      })
      const hashes: Hex[] = []
      for (let index = 0; index < 6; index++) {
        hashes.push(await result<Hex>(devnet.rpcUrl, 'eth_sendTransaction', [{ from: sender, to: DEV_ACCOUNTS[4]!.address, value: '0x1' }]))
        await sleep(40)
      }
      await expect.poll(() => hashes.every((hash) => hydratedAt.has(hash)), { timeout: 10_000, interval: 20 }).toBe(true)
      for (const hash of hashes) expect(hydratedAt.get(hash)! - appliedAt.get(hash)!).toBeGreaterThanOrEqual(UPSTREAM_DELAY_MS * 0.9)
      // In chain order, although their round trips overlapped.
      expect(announced.filter((hash) => hashes.includes(hash as Hex))).toEqual(hashes)
      for (const [pendingNonce, transactionNonce] of await Promise.all(noncesWhileHydrating)) expect(pendingNonce).toBeGreaterThan(BigInt(transactionNonce))
      const { pending } = await readyz()
      expect((pending.hydrationLagMs as { p99: number }).p99).toBeGreaterThanOrEqual(UPSTREAM_DELAY_MS * 0.9)
      expect(pending.source).toBe('hydrate')
    } finally {
      proxy.setDelay(0)
    }
  })
})

describe('an upstream whose pending account reads fail', () => {
  test("the pending nonce still counts the frames' transactions; the pending balance says the upstream failed", async () => {
    // Hydration (batches) and confirmed reads pass; the account reads at `pending` are refused.
    const faulty = await startFaultyProxy(devnet.rpcUrl, {
      refuseCall: (method, params) => (method === 'eth_getBalance' || method === 'eth_getTransactionCount') && params[1] === 'pending',
    })
    const own = await createTestDatabase()
    const refused = await startTestGateway({ upstreamRpc: faulty.url, flashblocksWs: devnet.flashblocksUrl, databaseUrl: own.databaseUrl })
    try {
      await refused.ingester.waitForBlock(0, 10_000)
      // It joins the feed at a block's first flashblock: sent before, the transaction would never be pending here.
      await expect
        .poll(async () => refused.pending!.blocks((await refused.resolvers.chain.view()).head?.number ?? -1).length, { timeout: 10_000, interval: 20 })
        .toBeGreaterThan(0)
      const sender = DEV_ACCOUNTS[2]!.address
      const hash = await result<Hex>(devnet.rpcUrl, 'eth_sendTransaction', [{ from: sender, to: DEV_ACCOUNTS[4]!.address, value: '0x1' }])
      const sent = await result<{ nonce: Hex }>(devnet.rpcUrl, 'eth_getTransactionByHash', [hash])
      // Pre-confirmed in flashgate's view, not yet sealed.
      await expect
        .poll(
          async () => {
            const head = (await refused.resolvers.chain.view()).head?.number ?? -1
            return refused.pending!.blocks(head).some((block) => block.transactions.some((transaction) => transaction.hash === hash))
          },
          { timeout: 10_000, interval: 10 },
        )
        .toBe(true)
      const nonce = await rpc(refused.dedicatedUrl, 'eth_getTransactionCount', [sender, 'pending'])
      const balance = await rpc(refused.dedicatedUrl, 'eth_getBalance', [sender, 'pending'])
      // Asked while the transaction is still only pre-confirmed, so that the answer came from the frames.
      const head = (await refused.resolvers.chain.view()).head?.number ?? -1
      expect(refused.pending!.blocks(head).some((block) => block.transactions.some((transaction) => transaction.hash === hash))).toBe(true)
      expect(nonce.error).toBeUndefined()
      expect(BigInt(nonce.result as Hex)).toBe(BigInt(sent.nonce) + 1n)
      expect(balance.error).toMatchObject({ code: expect.any(Number), message: expect.stringMatching(/upstream/) })
    } finally {
      await refused.stop()
      await faulty.stop()
      await own.drop()
    }
  })
})
