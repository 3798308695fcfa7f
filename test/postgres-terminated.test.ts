// Postgres ends a backend in the middle of a transaction on the pool (what a fast shutdown, a restart or a
// failover does to every backend). postgres.js 3.4.9 answers a failed transaction body with a ROLLBACK on the
// same connection; written to the closed one, it crashed the process (porsager/postgres#1154, #1208). Partition
// seals, partition drops and retention run their transactions on the pool, in the ingest leader.
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDb, type Db, isPostgresUrl, sqlState } from '../src/db/index.js'
import type { TestDatabase } from './fixtures/db.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'

/**
 * The same runs in CI's PGlite and Postgres passes (a Postgres database either way: `DATABASE_URL`'s, or a
 * throwaway cluster in the PGlite pass): the Postgres pass only, where no cluster has to be made for it.
 */
const SAME_IN_EVERY_PASS = !isPostgresUrl(process.env.DATABASE_URL ?? '')
/** Whether this pass runs the file: several processes can share a Postgres here, and it is the Postgres pass. */
const runsHere = SHARED_POSTGRES_AVAILABLE && !SAME_IN_EVERY_PASS

let database: TestDatabase
let db: Db
let admin: postgres.Sql

beforeAll(async () => {
  if (!runsHere) return
  database = await createSharedPostgresDatabase()
  db = await createDb({ databaseUrl: database.databaseUrl })
  admin = postgres(database.databaseUrl, { max: 1, onnotice: () => {} })
}, 120_000)

afterAll(async () => {
  await db?.close()
  await admin?.end()
  await database?.drop()
})

test.skipIf(!runsHere)(
  'a pool transaction whose backend Postgres terminates fails, the process goes on, and the next query is answered',
  async () => {
    const uncaught: unknown[] = []
    const onUncaught = (error: unknown) => uncaught.push(error)
    process.on('uncaughtException', onUncaught)
    try {
      for (let round = 0; round < 3; round++) {
        const marker = `pg_sleep_terminated_${round}`
        const transaction = db.transaction(async (tx) => {
          await tx.execute(sql.raw(`select pg_sleep(5) as ${marker}`))
        })
        const outcome = transaction.then(
          () => 'committed',
          (error: unknown) => `failed: ${(error as Error).message}`,
        )
        // Once the statement runs, its backend is ended.
        for (let terminated = 0; terminated === 0; ) {
          await new Promise((resolve) => setTimeout(resolve, 50))
          const rows = await admin`select pg_terminate_backend(pid) from pg_stat_activity
            where datname = current_database() and query like ${`%${marker}%`} and pid <> pg_backend_pid()`
          terminated = rows.length
        }
        expect(await outcome).toMatch(/^failed: /)
        // The write of a ROLLBACK to the closed connection came from a setImmediate: give it several turns.
        await new Promise((resolve) => setTimeout(resolve, 300))
        expect(uncaught).toEqual([])
        await expect
          .poll(
            () =>
              db.query(sql`select 1 as one`).then(
                () => 'answered',
                (error: Error) => error.message,
              ),
            { timeout: 10_000 },
          )
          .toBe('answered')
      }
    } finally {
      process.off('uncaughtException', onUncaught)
    }
  },
  60_000,
)

test.skipIf(!runsHere)('a pool transaction that fails on its own still fails at once with its error, its connection healthy', async () => {
  for (let round = 0; round < 3; round++) {
    const error = await db
      .transaction((tx) => tx.execute(sql`select 1 / 0`))
      .then(
        () => null,
        (error: unknown) => error,
      )
    expect(sqlState(error)).toBe('22012')
  }
  expect(await db.query(sql`select 1 as one`)).toEqual([{ one: 1 }])
})
