import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Query, SQL } from 'drizzle-orm'
import { PgDialect, type PgDatabase, type PgQueryResultHKT } from 'drizzle-orm/pg-core'
import type { CopyRows } from './copy.js'
import type * as schema from './schema.js'

// What every driver offers (DbSession, Db), the ingest lock's errors, and what the drivers share.

export const MIGRATIONS_FOLDER = resolve(dirname(fileURLToPath(import.meta.url)), '../../drizzle')

export const dialect = new PgDialect()

/** The comment that `PLAN_FOR_VALUES` puts in a statement's text. */
export const PLAN_FOR_VALUES_COMMENT = '/* plan for values */'

/**
 * A condition (always true), as statement text, that marks a statement whose best plan depends on its values, so that Postgres
 * plans it for each call: the Postgres client prepares every other statement, and a prepared statement may
 * be run with one generic plan for all values. A log filter by address alone is such a statement: over a
 * few blocks a hot token's logs are best found by block range, a rare address's by its index.
 */
export const PLAN_FOR_VALUES = `${PLAN_FOR_VALUES_COMMENT} true`

export type Drizzle = PgDatabase<PgQueryResultHKT, typeof schema>

export type DbConfig = {
  /** `postgres://…` for Postgres, `memory://` for a throwaway PGlite, anything else is a PGlite directory. */
  databaseUrl: string
  poolSize?: number
  statementTimeoutMs?: number
  /**
   * Postgres: how long a statement may go unanswered before its connections are taken for dead and replaced
   * (the ingest lock's session is ended, and its lock with it). Default: the statement timeout and 10 s more.
   */
  unansweredAfterMs?: number
  /** Told each time connections are replaced because a statement went unanswered. */
  onUnanswered?: (event: { session: 'pool' | 'ingest lock'; waitedMs: number }) => void
  /** `false` for a read replica: a standby cannot be migrated (its primary's migrations reach it by replication). */
  migrate?: boolean
  /** Told after each batch of blocks an upgrade of an older index converts (upgrade.ts). */
  upgradeProgress?: (done: { fromBlock: number; toBlock: number; lastBlock: number }) => void
}

/** A statement's text and parameters, rendered by drizzle once (`renderStatement`) rather than at each call. */
export type RenderedStatement = Query

/**
 * The text of a statement run on every request of a hot path, rendered once: building the `sql` template and
 * rendering it at each call took ~4% of the serving process's CPU under uncached `eth_getBlockReceipts`
 * (perf). Run it with `withParameters`, which gives it its values in the order of the template's.
 */
export function renderStatement(statement: SQL): { withParameters(...parameters: unknown[]): RenderedStatement } {
  const { sql: text, params } = dialect.sqlToQuery(statement)
  return {
    withParameters(...parameters) {
      if (parameters.length !== params.length) throw new TypeError(`the statement takes ${params.length} parameters, not ${parameters.length}`)
      return { sql: text, params: parameters }
    },
  }
}

/** Whether `statement` is drizzle SQL still to be rendered, and not a `RenderedStatement`. */
export const isSql = (statement: SQL | RenderedStatement): statement is SQL => statement instanceof SQL

export type CopyOptions = {
  durable?: boolean
  /** Statements run first, in the same transaction (a rewind whose new branch the COPY writes: no reader sees the chain lower between). */
  before?: SQL[]
}

/** What the ingester reads and writes through: the whole database, or (on Postgres) the session holding the ingest lock. */
export type DbSession = {
  drizzle: Drizzle
  /** Runs raw SQL, or a statement rendered once (`renderStatement`), and returns its rows, whatever the driver. */
  query<row extends Record<string, unknown>>(statement: SQL | RenderedStatement): Promise<row[]>
  /**
   * Bulk-loads rows with COPY, then runs `statements`, all in one transaction. `durable: false` lets Postgres
   * commit without waiting for the transaction's WAL to reach the disk (`synchronous_commit = off`): a crash of
   * the server may then lose the last fraction of a second of such commits, never part of one. For rows that
   * would be written again the same (blocks too deep to be reorganised, written again from where the index
   * ends). PGlite takes every commit as it does.
   */
  copyInTransaction(batches: CopyRows[], statements?: SQL[], options?: CopyOptions): Promise<void>
  /**
   * Runs `work` in a transaction. On the ingest lock's session, this and `copyInTransaction` first check
   * that the session still holds the lock, and fail (`isIngestLockLost`) when it does not.
   */
  transaction<result>(work: (tx: Drizzle) => Promise<result>): Promise<result>
}

/**
 * The one ingester's lock (DESIGN.md §1). On Postgres it is a session-level advisory lock: `db` runs on
 * that session, so writes happen only while the lock is held (a transaction cannot outlive its session,
 * and each one checks the lock at its start). A database restart or a dropped connection ends the
 * session and the lock with it: `held()` turns false and the ingester must acquire it again.
 */
export type IngestLock = {
  db: DbSession
  /** False once the lock's session has closed (the lock went with it). */
  held(): boolean
  release(): Promise<void>
}

export type Db = DbSession & {
  /** Tries to become the one ingester; PGlite belongs to one process, which always wins. */
  tryIngestLock(): Promise<IngestLock | null>
  close(): Promise<void>
}

/** postgres.js answers a row array, PGlite a result with `rows`. */
export function rowsOf<row>(result: unknown): row[] {
  return (Array.isArray(result) ? result : (result as { rows: row[] }).rows) as row[]
}

/** The SQLSTATE of a database error, thrown by the driver or wrapped by drizzle (as its `cause`). */
export function sqlState(error: unknown): string | undefined {
  const { code, cause } = (error ?? {}) as { code?: unknown; cause?: { code?: unknown } }
  const state = code ?? cause?.code
  return typeof state === 'string' ? state : undefined
}

/** SQLSTATE raised by the lock check when the session no longer holds the ingest lock. */
export const INGEST_LOCK_LOST_SQLSTATE = 'FGL01'

/** The session that wrote for the ingester lost the ingest lock (database restart, dropped connection). */
export class IngestLockLostError extends Error {
  override readonly name = 'IngestLockLostError'
  constructor() {
    super('the ingest lock was lost (database restart or dropped connection)')
  }
}

/** True for an error that means the ingest lock is gone: `IngestLockLostError` or the guard's SQLSTATE. */
export function isIngestLockLost(error: unknown): boolean {
  return error instanceof IngestLockLostError || (error as { code?: unknown } | null)?.code === INGEST_LOCK_LOST_SQLSTATE
}
