import { sql } from 'drizzle-orm'
import { expect, test } from 'vitest'
import { useTestDb } from '../../test/fixtures/db.js'
import { loadFixedChain } from '../../test/fixtures/fixed-chain.js'
import type { CopyOptions, Db } from '../db/index.js'
import { toRows } from './block-data.js'
import { createBlockFetcher } from './fetch-block.js'
import { SEAL_MARGIN_BLOCKS } from './seal-logs.js'
import { createStore } from './store.js'

// The ingester's commits of blocks too deep to be reorganised need not wait for the disk (db/session.ts,
// `durable: false`); those near the upstream's head, and any written without a target, wait as before.

const testDb = useTestDb()

test('a batch the seal margin below its target commits without waiting for the disk; one near the head and one without a target wait', async () => {
  const db = testDb()
  const chain = loadFixedChain()
  const fetcher = createBlockFetcher({ upstream: chain.upstream(), capabilities: { blockReceipts: true, tracing: true } })
  const rows = await Promise.all([0, 1, 2, 3].map(async (number) => toRows(await fetcher.fetchBlock(number))))
  // The store writes through this database, whose commits are recorded as they are asked for.
  const durability: boolean[] = []
  const recorded: Db = {
    ...db,
    copyInTransaction: (batches, statements, options?: CopyOptions) => {
      durability.push(options?.durable ?? true)
      return db.copyInTransaction(batches, statements, options)
    },
  }
  const store = createStore({ db: recorded })
  // Blocks 0 and 1 against a head far above them: final.
  await store.writeBlocks(rows.slice(0, 2), {}, { target: 1 + SEAL_MARGIN_BLOCKS + 10 })
  // Block 2 within the margin of its target: it could still be reorganised.
  await store.writeBlocks(rows.slice(2, 3), {}, { target: 2 + SEAL_MARGIN_BLOCKS - 1 })
  await store.writeBlocks(rows.slice(3, 4), {})
  expect(durability).toEqual([false, true, true])
  const written = await db.query<{ number: number }>(sql`select number::int as number from blocks order by number`)
  expect(written.map((block) => block.number)).toEqual([0, 1, 2, 3])
})
