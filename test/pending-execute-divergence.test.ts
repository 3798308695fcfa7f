import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { WebSocket } from 'ws'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { SYNC_TOPIC } from '../src/devnet/pool.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'

// `--pending-source execute` when its execution is wrong: an upstream that answers every storage read with
// a made-up value makes the executed swaps of the Base-shaped profile report reserves (`Sync`) the sealed
// block does not have. Reconciliation by content counts each divergence, and the pre-confirmed logs that
// proved wrong are announced again to `pendingLogs` subscribers with `removed: true`.

/** What the lying upstream answers to every `eth_getStorageAt`: a reserve no pool has. */
const MADE_UP_WORD = `0x${(10n ** 24n).toString(16).padStart(64, '0')}`

type Log = { topics: string[]; transactionHash: string; logIndex: string; data: string; removed: boolean }

let devnet: Devnet
let database: TestDatabase
let gateway: TestGateway
let lying: ReturnType<typeof createServer>

/** A JSON-RPC proxy to the devnet that rewrites the results of `eth_getStorageAt`, in batches too. */
async function startLyingUpstream(target: string): Promise<string> {
  lying = createServer((incoming, response) => {
    const chunks: Buffer[] = []
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk))
    incoming.on('end', () => {
      lie(Buffer.concat(chunks).toString('utf8')).then(
        ({ status, text }) => response.writeHead(status, { 'content-type': 'application/json' }).end(text),
        // The devnet may be gone already while the gateway stops: a bad gateway, not an unhandled rejection.
        () => response.writeHead(502).end(),
      )
    })
  })
  async function lie(body: string): Promise<{ status: number; text: string }> {
    const request = JSON.parse(body) as { method: string } | { method: string }[]
    const answer = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
    const parsed = (await answer.json()) as { id: unknown; result?: unknown } | { id: unknown; result?: unknown }[]
    const calls = Array.isArray(request) ? request : [request]
    const answers = Array.isArray(parsed) ? parsed : [parsed]
    answers.forEach((entry, offset) => {
      if (calls[offset]?.method === 'eth_getStorageAt' && entry.result !== undefined) entry.result = MADE_UP_WORD
    })
    return { status: answer.status, text: JSON.stringify(parsed) }
  }
  await new Promise<void>((resolve) => lying.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(lying.address() as AddressInfo).port}`
}

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, profile: 'base', profileTransactionsPerBlock: 40 })
  database = await createTestDatabase()
  gateway = await startTestGateway({
    upstreamRpc: await startLyingUpstream(devnet.rpcUrl),
    flashblocksWs: devnet.flashblocksUrl,
    databaseUrl: database.databaseUrl,
    pendingSource: 'execute',
  })
}, 60_000)

afterAll(async () => {
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
  lying?.closeAllConnections()
  await new Promise<void>((resolve) => (lying ? lying.close(() => resolve()) : resolve()))
})

test('executed receipts that differ from the sealed block are counted and their logs withdrawn from pendingLogs', { timeout: 90_000 }, async () => {
  const socket = new WebSocket(gateway.dedicatedUrl.replace('http', 'ws'))
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  const heard: Log[] = []
  socket.on('message', (data: Buffer) => {
    const message = JSON.parse(data.toString()) as { method?: string; params?: { result: Log } }
    if (message.method === 'eth_subscription') heard.push(message.params!.result)
  })
  socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['pendingLogs', { topics: [SYNC_TOPIC] }] }))

  // Withdrawn: a Sync log heard pre-confirmed, then again with `removed: true`.
  const withdrawn = () => heard.filter((log) => log.removed)
  await expect.poll(() => withdrawn().length, { timeout: 45_000, interval: 100 }).toBeGreaterThan(0)
  for (const log of withdrawn()) {
    const announced = heard.find((candidate) => !candidate.removed && candidate.transactionHash === log.transactionHash && candidate.logIndex === log.logIndex)
    expect(announced).toMatchObject({ ...log, removed: false })
  }
  socket.close()

  const readiness = (await (await fetch(`${gateway.url}/readyz`)).json()) as {
    pending: { source: string; divergences: { receipt: number }; execution: { freshBlocks: number; canonicalBlocks: number } }
  }
  expect(readiness.pending.source).toBe('execute')
  expect(readiness.pending.divergences.receipt).toBeGreaterThan(0)
  // Blocks after a divergence do not build on the diverged block's executed state: they read theirs afresh,
  // or from the cache caught up with the sealed block's state diffs (a block already executing on the
  // diverged one's state is withdrawn: src/pending/execute/index.test.ts).
  const execution = async () => ((await (await fetch(`${gateway.url}/readyz`)).json()) as typeof readiness).pending.execution
  const restarts = async () => {
    const { freshBlocks, canonicalBlocks } = await execution()
    return freshBlocks + canonicalBlocks
  }
  await expect.poll(restarts, { timeout: 10_000, interval: 100 }).toBeGreaterThan(1)
  const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
  expect(metrics).toMatch(/flashgate_pending_divergences_total\{kind="receipt"\} [1-9]/)
})
