import { openPostgres } from './postgres.js'
import * as schema from './schema.js'
import type { Db, DbConfig } from './session.js'
import { upgradeStorage } from './upgrade.js'
import { isPostgresUrl } from './urls.js'

// The database, whichever driver: PGlite (embedded, the default) or Postgres, chosen once by the URL.

export { schema }
export { type LogRow, SYNC_KEYS } from './schema.js'
export * from './bytes.js'
export { blockHashesBetween } from './block-hashes.js'
export { DatabaseInUseError, DIRECTORY_LOCK_FILE, type DirectoryLock, directoryHolder, type LockHolder, lockDirectory } from './lock.js'
export type { CopyRows } from './copy.js'
export { databaseUrlProblem, isPostgresUrl, maskedDatabaseUrl, pgliteDirectory } from './urls.js'
export {
  type Db,
  type DbConfig,
  type DbSession,
  type CopyOptions,
  type Drizzle,
  type IngestLock,
  IngestLockLostError,
  isIngestLockLost,
  isSql,
  PLAN_FOR_VALUES,
  type RenderedStatement,
  renderStatement,
  rowsOf,
  sqlState,
} from './session.js'

/**
 * Opens the database named by `databaseUrl` and brings its schema up to date: the migrations, then the
 * conversion of an older index's stored bodies (upgrade.ts), before anything reads them.
 */
export async function createDb(config: DbConfig): Promise<Db> {
  // PGlite's module is imported only for a PGlite database: loaded, it adds ~35-40 MB to the resident memory of
  // a process (measured on Node 20), which every serving process on Postgres would carry for nothing.
  const db = isPostgresUrl(config.databaseUrl) ? await openPostgres(config) : await (await import('./pglite.js')).openPglite(config)
  if (config.migrate === false) return db
  try {
    await upgradeStorage(db, config.upgradeProgress)
  } catch (error) {
    await db.close().catch(() => {})
    throw error
  }
  return db
}
