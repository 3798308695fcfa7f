import pino from 'pino'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { mineEmptyBlocks } from '../../test/fixtures/chain.js'
import { anvilCall } from '../../test/fixtures/sync.js'
import { createDb, type Db, SYNC_KEYS } from '../db/index.js'
import { type Anvil, startAnvil } from '../devnet/anvil.js'
import { createUpstream } from '../upstream/index.js'
import { createIngester, type Ingester } from './index.js'
import { createStore } from './store.js'

// The upstream's chain replaced by a shorter one that shares no block with the index (a devnet wiped, a node
// synced anew): the index starts again on the new chain, as --start-block says, instead of waiting for it to
// grow back to where the old index started.

const BEHIND_GRACE_MS = 1_000
const KEEP_BLOCKS = 5

let anvil: Anvil
let db: Db
let ingester: Ingester
const reorgs: { ancestor: number; removedLogs: number }[] = []

beforeAll(async () => {
  anvil = await startAnvil()
  db = await createDb({ databaseUrl: 'memory://' })
}, 60_000)

afterAll(async () => {
  await ingester?.stop()
  await db?.close()
  await anvil?.stop()
})

const hashOf = async (number: number) => (await anvilCall<{ hash: string }>(anvil.rpcUrl, 'eth_getBlockByNumber', [`0x${number.toString(16)}`, false])).hash

test('a chain that shares no block with the index: a new index on it from latest-N, equal to the node', async () => {
  const genesis = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
  await mineEmptyBlocks(anvil.rpcUrl, 20)
  ingester = createIngester({
    db,
    upstream: createUpstream({ rpcUrl: anvil.rpcUrl }),
    logger: pino({ level: 'silent' }),
    startBlock: { latestMinus: KEEP_BLOCKS },
    pollIntervalMs: 50,
    registry: null,
    upstreamBehindGraceMs: BEHIND_GRACE_MS,
  })
  ingester.events.on('reorg', (event) => reorgs.push(event))
  ingester.start()
  await ingester.waitForBlock(20, 30_000)
  const store = createStore({ db })
  expect((await store.syncState()).get(SYNC_KEYS.firstBlock)).toBe(20 - KEEP_BLOCKS)

  // Back to genesis, and a new chain of 8 blocks: below the old index's first block (15).
  expect(await anvilCall(anvil.rpcUrl, 'evm_revert', [genesis])).toBe(true)
  await anvilCall(anvil.rpcUrl, 'evm_setNextBlockTimestamp', [Math.floor(Date.now() / 1000) + 1_000])
  await mineEmptyBlocks(anvil.rpcUrl, 8)

  await expect.poll(() => ingester.status().head, { timeout: BEHIND_GRACE_MS + 15_000, interval: 50 }).toBe(8)
  expect(reorgs).toEqual([{ ancestor: 20 - KEEP_BLOCKS - 1, removedLogs: 0 }])
  expect((await store.syncState()).get(SYNC_KEYS.firstBlock)).toBe(8 - KEEP_BLOCKS)
  const stored = await store.hashesFrom(0, 30)
  expect([...stored.keys()].sort((a, b) => a - b)).toEqual([3, 4, 5, 6, 7, 8])
  for (const [number, hash] of stored) expect(hash).toBe(await hashOf(number))
}, 60_000)
