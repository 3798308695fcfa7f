// A deep reorg deletes everything above the common ancestor in one transaction. On a big index that is
// millions of rows, longer than the statement timeout the gateway sets for reads: the rewind was cancelled
// every time, and the ingester retried the same rewind forever.
import { sql } from 'drizzle-orm'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDb, type Db, type IngestLock, isPostgresUrl, sqlState } from '../src/db/index.js'
import { attachLogPartitions } from '../src/db/log-partitions.js'
import { createStore, UNDONE_LOG_BLOCKS, UNDONE_LOG_TTL_MS } from '../src/ingest/store.js'
import type { TestDatabase } from './fixtures/db.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'

/** The serving statement timeout, far below what deleting the logs above the ancestor takes. */
const STATEMENT_TIMEOUT_MS = 50
const BLOCKS = 100
const ANCESTOR = 9
const LOGS_PER_BLOCK = 3_000
/** SQLSTATE of a statement cancelled by `statement_timeout`. */
const QUERY_CANCELED = '57014'

/**
 * The same runs in CI's PGlite and Postgres passes (a Postgres database either way: `DATABASE_URL`'s, or a
 * throwaway cluster in the PGlite pass): the Postgres pass only, where no cluster has to be made for it.
 */
const SAME_IN_EVERY_PASS = !isPostgresUrl(process.env.DATABASE_URL ?? '')
/** Whether this pass runs the file: several processes can share a Postgres here, and it is the Postgres pass. */
const runsHere = SHARED_POSTGRES_AVAILABLE && !SAME_IN_EVERY_PASS

let database: TestDatabase
/** For setting up and looking: without a timeout, which a busy machine's DDL, bulk insert or count could outlast. */
let untimed: Db
let db: Db
let lock: IngestLock | null = null

beforeAll(async () => {
  if (!runsHere) return
  database = await createSharedPostgresDatabase()
  untimed = await createDb({ databaseUrl: database.databaseUrl, statementTimeoutMs: 0 })
  await attachLogPartitions(untimed, 0, BLOCKS)
  // Synthetic rows, in bulk: only their block numbers matter.
  await untimed.query(sql`insert into blocks (number, hash, parent_hash, timestamp, header)
    select n, sha256(int8send(n)), sha256(int8send(n - 1)), n, '{}'::json from generate_series(0, ${BLOCKS - 1}::bigint) n`)
  await untimed.query(sql`insert into logs (block_number, log_index, block_hash, block_timestamp, transaction_hash, transaction_index, address, topic0, data)
    select n, i, sha256(int8send(n)), n, sha256(int8send(n * ${LOGS_PER_BLOCK} + i)), i, substr(sha256(int4send(i % 50)), 1, 20), sha256(int4send(i % 7)), ''::bytea
    from generate_series(0, ${BLOCKS - 1}::bigint) n, generate_series(0, ${LOGS_PER_BLOCK - 1}) i`)
  await untimed.query(sql`analyze`)
  db = await createDb({ databaseUrl: database.databaseUrl, statementTimeoutMs: STATEMENT_TIMEOUT_MS, migrate: false })
  lock = await db.tryIngestLock()
}, 120_000)

/** The SQLSTATE `work` fails with; undefined when it succeeds. */
async function failureOf(work: Promise<unknown>): Promise<string | undefined> {
  return work.then(
    () => undefined,
    (error: unknown) => sqlState(error) ?? String(error),
  )
}

afterAll(async () => {
  await lock?.release()
  await db?.close()
  await untimed?.close()
  await database?.drop()
})

test.skipIf(!runsHere)('a rewind that deletes for longer than the statement timeout completes, and nothing above the ancestor is left', async () => {
  expect(lock).not.toBeNull()
  const ingest = lock!.db
  // The premise: the ingester's session cancels a statement that runs longer than the timeout.
  expect(await failureOf(ingest.query(sql`select pg_sleep(1)`))).toBe(QUERY_CANCELED)

  const store = createStore({ db: ingest })
  // A log kept by a rewind longer ago than undone logs live: this rewind deletes it.
  await untimed.query(sql`insert into undone_logs (block_hash, log_index, block_number, block_timestamp, transaction_hash, transaction_index, address, data, undone_at)
      values (sha256('stale'::bytea), 0, 1, 1, sha256('stale'::bytea), 0, substr(sha256('stale'::bytea), 1, 20), ''::bytea, ${Date.now() - UNDONE_LOG_TTL_MS - 1})`)
  const startedAt = performance.now()
  const removed = await store.rewindTo(ANCESTOR)
  const elapsedMs = performance.now() - startedAt
  expect(removed).toBe((BLOCKS - 1 - ANCESTOR) * LOGS_PER_BLOCK)
  // Otherwise the test proves nothing: the rewind must have outlasted the timeout.
  expect(elapsedMs).toBeGreaterThan(STATEMENT_TIMEOUT_MS)

  expect(await store.head()).toMatchObject({ number: ANCESTOR })
  const [left] = await untimed.query<{ blocks: number; logs: number; below: number }>(sql`select
      (select count(*)::int from blocks where number > ${ANCESTOR}) as blocks,
      (select count(*)::int from logs where block_number > ${ANCESTOR}) as logs,
      (select count(*)::int from logs where block_number <= ${ANCESTOR}) as below`)
  expect(left).toEqual({ blocks: 0, logs: 0, below: (ANCESTOR + 1) * LOGS_PER_BLOCK })
  // The logs of the newest UNDONE_LOG_BLOCKS undone blocks are kept for log filters, whole; nothing older.
  const [kept] = await untimed.query<{ rows: number; first: number; last: number; hashes: boolean }>(sql`select count(*)::int as rows,
      min(block_number)::int as first, max(block_number)::int as last, bool_and(block_hash = sha256(int8send(block_number))) as hashes from undone_logs`)
  expect(kept).toEqual({ rows: UNDONE_LOG_BLOCKS * LOGS_PER_BLOCK, first: BLOCKS - UNDONE_LOG_BLOCKS, last: BLOCKS - 1, hashes: true })
  // The timeout still holds for everything else on that session once the rewind has committed.
  expect(await failureOf(ingest.query(sql`select pg_sleep(1)`))).toBe(QUERY_CANCELED)
})
