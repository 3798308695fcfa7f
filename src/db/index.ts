import { mkdirSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PGlite } from '@electric-sql/pglite'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { SQL } from 'drizzle-orm'
import { PgDialect, type PgDatabase, type PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import { type CopyRows, encodeCopy } from './copy.js'
import * as schema from './schema.js'

export { schema }
export { type LogRow, SYNC_KEYS } from './schema.js'
export * from './bytes.js'
export type { CopyRows } from './copy.js'

const MIGRATIONS_FOLDER = resolve(dirname(fileURLToPath(import.meta.url)), '../../drizzle')
/** Serialises `migrate` between processes that share one Postgres (any constant works; this is "flsh"). */
const MIGRATION_LOCK_ID = 0x666c7368
const INGEST_LOCK_ID = 0x666c7369
const DEFAULT_POOL_SIZE = 10
const DEFAULT_STATEMENT_TIMEOUT_MS = 10_000

const dialect = new PgDialect()

export type Drizzle = PgDatabase<PgQueryResultHKT, typeof schema>

export type DbConfig = {
  /** `postgres://…` for Postgres, `memory://` for a throwaway PGlite, anything else is a PGlite directory. */
  databaseUrl: string
  poolSize?: number
  statementTimeoutMs?: number
}

export type Db = {
  kind: 'pglite' | 'postgres'
  drizzle: Drizzle
  /** Runs raw SQL and returns its rows, whatever the driver. */
  query<row extends Record<string, unknown>>(statement: SQL): Promise<row[]>
  /** Bulk-loads rows with COPY, then runs `statements`, all in one transaction. */
  copyInTransaction(batches: CopyRows[], statements?: SQL[]): Promise<void>
  /**
   * Tries to become the one ingester (DESIGN.md §1): a session-level advisory lock on Postgres, held on a
   * connection of its own until `release`; PGlite belongs to one process, which always wins.
   */
  tryIngestLock(): Promise<{ release(): Promise<void> } | null>
  close(): Promise<void>
}

export function isPostgresUrl(url: string): boolean {
  return url.startsWith('postgres://') || url.startsWith('postgresql://')
}

/** Opens the database named by `databaseUrl` and brings its schema up to date. */
export async function createDb(config: DbConfig): Promise<Db> {
  const db = isPostgresUrl(config.databaseUrl) ? await openPostgres(config) : await openPglite(config)
  return db
}

async function openPglite(config: DbConfig): Promise<Db> {
  let client: PGlite
  if (config.databaseUrl === 'memory://') client = new PGlite()
  else {
    const dataDir = resolve(config.databaseUrl.replace(/^file:\/\//, ''))
    mkdirSync(dataDir, { recursive: true })
    client = new PGlite(dataDir)
  }
  await client.waitReady
  const drizzle = drizzlePglite(client, { schema })
  await migratePglite(drizzle, { migrationsFolder: MIGRATIONS_FOLDER })
  return {
    kind: 'pglite',
    drizzle: drizzle as unknown as Drizzle,
    async query(statement) {
      const result = await drizzle.execute(statement)
      return result.rows as never
    },
    async copyInTransaction(batches, statements = []) {
      await client.transaction(async (tx) => {
        for (const batch of batches) {
          if (batch.rows.length === 0) continue
          const { tableName, columns, format, payload } = encodeCopy(batch)
          await tx.query(`copy ${tableName} (${columns}) from '/dev/blob' with (format ${format})`, [], { blob: new Blob([payload as Uint8Array<ArrayBuffer>]) })
        }
        for (const statement of statements) {
          const query = dialect.sqlToQuery(statement)
          await tx.query(query.sql, query.params)
        }
      })
    },
    async tryIngestLock() {
      return { async release() {} }
    },
    async close() {
      await client.close()
    },
  }
}

async function openPostgres(config: DbConfig): Promise<Db> {
  const statementTimeout = config.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS
  await migratePostgresOnce(config.databaseUrl)
  const client = postgres(config.databaseUrl, {
    max: config.poolSize ?? DEFAULT_POOL_SIZE,
    onnotice: () => {},
    connection: { statement_timeout: statementTimeout, application_name: 'flashgate' },
  })
  const drizzle = drizzlePostgres(client, { schema })
  return {
    kind: 'postgres',
    drizzle: drizzle as unknown as Drizzle,
    async query(statement) {
      return (await drizzle.execute(statement)) as never
    },
    async copyInTransaction(batches, statements = []) {
      await client.begin(async (tx) => {
        for (const batch of batches) {
          if (batch.rows.length === 0) continue
          const { tableName, columns, format, payload } = encodeCopy(batch)
          const writable = await tx.unsafe(`copy ${tableName} (${columns}) from stdin with (format ${format})`).writable()
          await pipeline(Readable.from([payload]), writable)
        }
        for (const statement of statements) {
          const query = dialect.sqlToQuery(statement)
          await tx.unsafe(query.sql, query.params as never[])
        }
      })
    },
    async tryIngestLock() {
      const connection = await client.reserve()
      const [row] = await connection`select pg_try_advisory_lock(${INGEST_LOCK_ID}) as locked`
      if (row?.locked !== true) {
        connection.release()
        return null
      }
      return {
        async release() {
          await connection`select pg_advisory_unlock(${INGEST_LOCK_ID})`.catch(() => {})
          connection.release()
        },
      }
    },
    async close() {
      await client.end({ timeout: 5 })
    },
  }
}

/** Applies migrations on one connection, under an advisory lock so that concurrent starts do not race. */
async function migratePostgresOnce(databaseUrl: string): Promise<void> {
  const client = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    await client`select pg_advisory_lock(${MIGRATION_LOCK_ID})`
    await migratePostgres(drizzlePostgres(client), { migrationsFolder: MIGRATIONS_FOLDER })
    await client`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`
  } finally {
    await client.end({ timeout: 5 })
  }
}
