import { sql } from 'drizzle-orm'
import pino from 'pino'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDb, type Db } from '../db/index.js'
import { type Anvil, startAnvil } from '../devnet/anvil.js'
import { result } from '../../test/fixtures/gateway.js'
import { anvilReceipt } from '../../test/fixtures/sync.js'
import { createUpstream } from '../upstream/index.js'
import { createIngester, type Ingester } from './index.js'

// Followed block by block, the index refreshes the planner's statistics every so many logs (ingest/sync.ts),
// not only after a large backfill: autovacuum may be off, or far behind a table that grows all the time.

/** A contract whose every call emits one empty LOG0: init code returning the runtime `PUSH1 0 PUSH1 0 LOG0 STOP`. */
const EMITTER_INIT_CODE = '0x6560006000a0006000526006601af3'
/** Logs between two refreshes, for the test (the gateway's default is 100,000). */
const ANALYZE_AFTER_LOGS = 3
const CALLS = 5

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
    pollIntervalMs: 50,
    registry: null,
    analyzeAfterLogs: ANALYZE_AFTER_LOGS,
  })
  ingester.start()
  await ingester.waitForBlock(0, 30_000)
}, 60_000)

afterAll(async () => {
  await ingester?.stop()
  await db?.close()
  await anvil?.stop()
})

/** The planner's row count for the logs of blocks 0…: -1 until the partition is first analysed. */
async function plannedLogRows(): Promise<number> {
  const [row] = await db.query<{ rows: number }>(sql`select reltuples::float8 as rows from pg_class where relname = 'logs_0'`)
  return Number(row?.rows ?? -1)
}

test('blocks followed one at a time: the statistics are refreshed once enough logs have been written, without autovacuum', async () => {
  const [from] = await result<string[]>(anvil.rpcUrl, 'eth_accounts')
  const deployment = await result<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from, data: EMITTER_INIT_CODE }])
  const { contractAddress } = await anvilReceipt<{ contractAddress: string }>(anvil.rpcUrl, deployment)
  expect(await plannedLogRows()).toBeLessThan(1)
  // One call, one log, one block: each followed on its own, far below any backfill's size.
  for (let call = 0; call < CALLS; call++) {
    const sent = await result<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from, to: contractAddress }])
    const { blockNumber } = await anvilReceipt<{ blockNumber: string }>(anvil.rpcUrl, sent)
    await ingester.waitForBlock(Number(blockNumber), 10_000)
  }
  for (const deadline = Date.now() + 10_000; (await plannedLogRows()) < ANALYZE_AFTER_LOGS && Date.now() < deadline; )
    await new Promise((resolve) => setTimeout(resolve, 50))
  expect(await plannedLogRows()).toBeGreaterThanOrEqual(ANALYZE_AFTER_LOGS)
}, 60_000)
