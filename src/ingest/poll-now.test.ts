import pino from 'pino'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { startDelayProxy } from '../../test/fixtures/delay-proxy.js'
import { createDb, type Db } from '../db/index.js'
import { type Anvil, startAnvil } from '../devnet/anvil.js'
import { createUpstream } from '../upstream/index.js'
import { createIngester, type Ingester } from './index.js'

// An upstream without WebSocket is polled for its head; a flashblock of a newer block (app.ts) asks at once.

/** Far longer than the test waits: the block can only be seen through `pollNow`. */
const POLL_INTERVAL_MS = 120_000
/** How late the slow upstream answers in the second test: long enough to ask again while a read is in flight. */
const SLOW_ANSWER_MS = 600

let anvil: Anvil
let proxy: Awaited<ReturnType<typeof startDelayProxy>>
let db: Db
let ingester: Ingester
beforeAll(async () => {
  anvil = await startAnvil()
  proxy = await startDelayProxy(anvil.rpcUrl)
  db = await createDb({ databaseUrl: 'memory://' })
  ingester = createIngester({
    db,
    upstream: createUpstream({ rpcUrl: proxy.url }),
    logger: pino({ level: 'silent' }),
    startBlock: 0,
    pollIntervalMs: POLL_INTERVAL_MS,
    registry: null,
  })
  ingester.start()
  await ingester.waitForBlock(0, 30_000)
}, 60_000)

afterAll(async () => {
  await ingester?.stop()
  await proxy?.stop()
  await db?.close()
  await anvil?.stop()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const mine = () =>
  fetch(anvil.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'evm_mine', params: [] }),
  })

test('pollNow reads the new head at once instead of at the next poll', async () => {
  await mine()
  ingester.pollNow()
  await ingester.waitForBlock(1, 5_000)
  expect(ingester.status().head).toBe(1)
}, 30_000)

test('a pollNow that comes while the loop is reading an older head is kept for after it, not lost', async () => {
  // Let the loop settle into its wait, then wake it into a slow read of the head (block 1, answered late).
  await sleep(500)
  proxy.setDelay(SLOW_ANSWER_MS)
  ingester.pollNow()
  await sleep(SLOW_ANSWER_MS / 4)
  // Block 2 is mined while that read is in flight, and the next flashblock asks again meanwhile.
  await mine()
  ingester.pollNow()
  await ingester.waitForBlock(2, 10_000)
  expect(ingester.status().head).toBe(2)
}, 30_000)
