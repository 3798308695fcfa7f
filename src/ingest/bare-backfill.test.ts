import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createTestDatabase, type TestDatabase } from '../../test/fixtures/db.js'
import { result } from '../../test/fixtures/gateway.js'
import { anvilReceipt } from '../../test/fixtures/sync.js'
import { byteaToHex, createDb, type Db, isPostgresUrl } from '../db/index.js'
import { LOG_PARTITION_BLOCKS, logPartitions, sealLogPartition } from '../db/log-partitions.js'
import { type Anvil, startAnvil } from '../devnet/anvil.js'
import { createUpstream } from '../upstream/index.js'
import { createIngester } from './index.js'
import { SEAL_MARGIN_BLOCKS } from './seal-logs.js'

// A backfill that fills a partition of `logs` far enough below the upstream's head to be sealed once written
// leaves its secondary indexes to the seal (db/log-partitions.ts): the ingester tells the store its target.
// Postgres only, as in the gateway (app.ts seals on Postgres alone): on PGlite this took 100 s of the pass.
const usesPostgres = isPostgresUrl(process.env.DATABASE_URL ?? '')

/** A contract whose every call emits one empty LOG0: init code returning the runtime `PUSH1 0 PUSH1 0 LOG0 STOP`. */
const EMITTER_INIT_CODE = '0x6560006000a0006000526006601af3'
/** Empty blocks mined between the two groups of logs: the first partition ends far enough below the head. */
const EMPTY_BLOCKS = LOG_PARTITION_BLOCKS + SEAL_MARGIN_BLOCKS + 50

describe.skipIf(!usesPostgres)('bare backfill (Postgres)', () => {
  let anvil: Anvil
  let stateDirectory: string
  let database: TestDatabase
  let db: Db
  beforeAll(async () => {
    // anvil forgets the states of blocks a few thousand below its head, which tracing the first blocks needs.
    stateDirectory = mkdtempSync(join(tmpdir(), 'flashgate-anvil-states-'))
    anvil = await startAnvil({ extraArgs: ['--max-persisted-states', String(2 * EMPTY_BLOCKS), '--cache-path', stateDirectory] })
    database = await createTestDatabase()
    db = await createDb({ databaseUrl: database.databaseUrl })
  }, 60_000)

  afterAll(async () => {
    await db?.close()
    await database?.drop()
    await anvil?.stop()
    rmSync(stateDirectory, { recursive: true, force: true })
  })

  type Log = { blockNumber: string; logIndex: string; address: string; transactionHash: string }

  test('a backfill far below the head writes bare partitions, the one at the head indexed; the logs are all there, and sealing indexes the bare one', async () => {
    const [from] = await result<string[]>(anvil.rpcUrl, 'eth_accounts')
    const deployment = await result<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from, data: EMITTER_INIT_CODE }])
    const { contractAddress } = await anvilReceipt<{ contractAddress: string }>(anvil.rpcUrl, deployment)
    const call = async () => anvilReceipt(anvil.rpcUrl, await result<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from, to: contractAddress }]))
    for (let each = 0; each < 3; each++) await call()
    await result(anvil.rpcUrl, 'anvil_mine', [`0x${EMPTY_BLOCKS.toString(16)}`])
    for (let each = 0; each < 3; each++) await call()
    const head = Number.parseInt(await result<string>(anvil.rpcUrl, 'eth_blockNumber'), 16)
    const expected = (await result<Log[]>(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }])).map((log) => [
      Number.parseInt(log.blockNumber, 16),
      Number.parseInt(log.logIndex, 16),
      log.address,
      log.transactionHash,
    ])
    expect(expected.length).toBe(6)

    const ingester = createIngester({
      db,
      upstream: createUpstream({ rpcUrl: anvil.rpcUrl }),
      logger: pino({ level: process.env.TEST_LOG ?? 'silent' }),
      startBlock: 0,
      registry: null,
      sealsLogs: true,
    })
    ingester.start()
    try {
      await ingester.waitForBlock(head, 120_000)
    } finally {
      await ingester.stop()
    }
    const partitions = await logPartitions(db)
    // Blocks [0, 5000) end more than the seal's margin below the head: bare. The head's partition: indexed.
    expect(partitions.map(({ from, to, bare }) => ({ from, to, bare }))).toEqual([
      { from: 0, to: LOG_PARTITION_BLOCKS, bare: true },
      { from: LOG_PARTITION_BLOCKS, to: 2 * LOG_PARTITION_BLOCKS, bare: false },
    ])
    const stored = async () =>
      (
        await db.query<{ block: string; index: number; address: Uint8Array; tx: Uint8Array }>(
          sql`select block_number::text as block, log_index as index, address, transaction_hash as tx from logs order by block_number, log_index`,
        )
      ).map((row) => [Number(row.block), row.index, byteaToHex(row.address), byteaToHex(row.tx)])
    expect(await stored()).toEqual(expected)

    expect(await sealLogPartition(db, partitions[0]!)).toBe('sealed')
    expect((await logPartitions(db))[0]).toMatchObject({ sealed: true, bare: false })
    expect(await stored()).toEqual(expected)
  }, 180_000)
})
