import pino from 'pino'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDb, type Db } from '../db/index.js'
import { type Anvil, startAnvil } from '../devnet/anvil.js'
import { createUpstream } from '../upstream/index.js'
import { createIngester, type Ingester } from './index.js'

// An upstream without WebSocket is polled for its head; a flashblock of a newer block (app.ts) asks at once.

/** Far longer than the test waits: the block can only be seen through `pollNow`. */
const POLL_INTERVAL_MS = 120_000

let anvil: Anvil
let db: Db
let ingester: Ingester
beforeAll(async () => {
  anvil = await startAnvil()
  db = await createDb({ databaseUrl: 'memory://' })
  ingester = createIngester({
    db,
    upstream: createUpstream({ rpcUrl: anvil.rpcUrl }),
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
  await db?.close()
  await anvil?.stop()
})

test('pollNow reads the new head at once instead of at the next poll', async () => {
  // The loop reaches its wait between polls after its first look at the head.
  await new Promise((resolve) => setTimeout(resolve, 500))
  await fetch(anvil.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'evm_mine', params: [] }),
  })
  ingester.pollNow()
  await ingester.waitForBlock(1, 5_000)
  expect(ingester.status().head).toBe(1)
}, 30_000)
