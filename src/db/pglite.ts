import { PGlite } from '@electric-sql/pglite'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator'
import { encodeCopy } from './copy.js'
import { type DirectoryLock, lockDirectory } from './lock.js'
import * as schema from './schema.js'
import { type Db, type DbConfig, type Drizzle, dialect, isSql, MIGRATIONS_FOLDER } from './session.js'
import { pgliteDirectory } from './urls.js'

// PGlite: the embedded database, one process's, in a directory or in memory.

export async function openPglite(config: DbConfig): Promise<Db> {
  let client: PGlite
  let lock: DirectoryLock | null = null
  if (config.databaseUrl === 'memory://') client = new PGlite()
  else {
    // PGlite is single-process: a directory another process has open is refused, never opened twice.
    lock = lockDirectory(pgliteDirectory(config.databaseUrl)!)
    client = new PGlite(lock.directory)
  }
  const drizzle = drizzlePglite(client, { schema })
  try {
    await client.waitReady
    await migratePglite(drizzle, { migrationsFolder: MIGRATIONS_FOLDER })
  } catch (error) {
    await client.close().catch(() => {})
    lock?.release()
    throw error
  }
  const db: Db = {
    drizzle: drizzle as unknown as Drizzle,
    transaction: (work) => drizzle.transaction((tx) => work(tx as unknown as Drizzle)),
    async query(statement) {
      const result = isSql(statement) ? await drizzle.execute(statement) : await client.query(statement.sql, statement.params as unknown[])
      return result.rows as never
    },
    async copyInTransaction(batches, statements = [], { before = [] } = {}) {
      await client.transaction(async (tx) => {
        for (const statement of before) {
          const query = dialect.sqlToQuery(statement)
          await tx.query(query.sql, query.params)
        }
        for (const batch of batches) {
          if (batch.rows.length === 0) continue
          const { tableName, columns, format, payload } = encodeCopy(batch)
          await tx.query(`copy ${tableName} (${columns}) from '/dev/blob' with (format ${format})`, [], {
            blob: new Blob([payload as Uint8Array<ArrayBuffer>]),
          })
        }
        for (const statement of statements) {
          const query = dialect.sqlToQuery(statement)
          await tx.query(query.sql, query.params)
        }
      })
    },
    async tryIngestLock() {
      return { db, held: () => true, async release() {} }
    },
    async close() {
      await client.close()
      lock?.release()
    },
  }
  return db
}
