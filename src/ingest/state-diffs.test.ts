import pino from 'pino'
import type { Hex } from 'viem'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDb, type Db } from '../db/index.js'
import { type Anvil, startAnvil } from '../devnet/anvil.js'
import { createUpstream } from '../upstream/index.js'
import type { PrestateDiff } from './account-diffs.js'
import { createIngester, type Ingester } from './index.js'
import { anvilCall, anvilReceipt } from '../../test/fixtures/sync.js'

// With `keepRecentStateDiffs` (the flashblock executor's cache), the blocks the ingester hands to its
// listeners carry their state diffs, as the upstream's prestate tracer gave them, for blocks sealed in the
// last minute only: a block of long ago (a backfill's) keeps none.

const DEV_ACCOUNT = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'
/** 2001: every block mined before the clock is moved on is old. */
const GENESIS_TIMESTAMP = 1_000_000_000

let anvil: Anvil
let db: Db
let ingester: Ingester
const call = <value>(method: string, params: unknown[] = []) => anvilCall<value>(anvil.rpcUrl, method, params)

beforeAll(async () => {
  anvil = await startAnvil({ extraArgs: ['--timestamp', String(GENESIS_TIMESTAMP)] })
  db = await createDb({ databaseUrl: 'memory://' })
}, 60_000)

afterAll(async () => {
  await ingester?.stop()
  await db?.close()
  await anvil?.stop()
})

test('recent blocks carry their state diffs to the listeners; old ones none', async () => {
  const old = await call<Hex>('eth_sendTransaction', [{ from: DEV_ACCOUNT, to: `0x${'01'.repeat(20)}`, value: '0x1' }])
  await anvilReceipt(anvil.rpcUrl, old)
  await call('evm_setNextBlockTimestamp', [Math.floor(Date.now() / 1000)])
  const recent = await call<Hex>('eth_sendTransaction', [{ from: DEV_ACCOUNT, to: `0x${'02'.repeat(20)}`, value: '0x2' }])
  const recentBlock = await anvilReceipt<{ blockHash: Hex }>(anvil.rpcUrl, recent)
  const heard = new Map<number, PrestateDiff[] | undefined>()
  ingester = createIngester({
    db,
    upstream: createUpstream({ rpcUrl: anvil.rpcUrl }),
    logger: pino({ level: 'silent' }),
    startBlock: 0,
    registry: null,
    keepRecentStateDiffs: true,
  })
  ingester.events.on('blocks', (blocks) => {
    for (const block of blocks) heard.set(block.number, block.stateDiffs)
  })
  ingester.start()
  await ingester.waitForBlock(2, 30_000)
  expect(heard.get(1)).toBeUndefined()
  const traces = await call<{ result: PrestateDiff }[]>('debug_traceBlockByHash', [
    recentBlock.blockHash,
    { tracer: 'prestateTracer', tracerConfig: { diffMode: true } },
  ])
  expect(heard.get(2)).toEqual(traces.map((trace) => trace.result))
  expect(heard.get(2)![0]!.post[`0x${'02'.repeat(20)}`]).toEqual({ balance: '0x2' })
})
