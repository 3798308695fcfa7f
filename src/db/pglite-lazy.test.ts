import { sql } from 'drizzle-orm'
import { describe, expect, test, vi } from 'vitest'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from '../../test/fixtures/shared-postgres.js'
import { createDb, rowsOf } from './index.js'

// Importing PGlite's module (through src/db/pglite.ts) fails in this file: a process on Postgres must never load it.
vi.mock('./pglite.js', () => {
  throw new Error('the PGlite module was loaded')
})

describe('PGlite imported only for a PGlite database', () => {
  test.skipIf(!SHARED_POSTGRES_AVAILABLE)(
    'a Postgres database opens, migrates and answers without loading it',
    async () => {
      const database = await createSharedPostgresDatabase()
      try {
        const db = await createDb({ databaseUrl: database.databaseUrl })
        try {
          expect(rowsOf<{ blocks: number }>(await db.drizzle.execute(sql`select count(*)::int as blocks from blocks`))).toEqual([{ blocks: 0 }])
        } finally {
          await db.close()
        }
      } finally {
        await database.drop()
      }
    },
    60_000,
  )

  test('a PGlite database does load it (so the mock above stands in the way of the real import)', async () => {
    const error = (await createDb({ databaseUrl: 'memory://' }).then(
      () => null,
      (failure: unknown) => failure,
    )) as (Error & { cause?: Error }) | null
    // vitest reports a failing mock factory with the factory's error as its cause.
    expect(error?.cause?.message ?? error?.message).toBe('the PGlite module was loaded')
  })
})
