import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { sql } from 'drizzle-orm'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import type postgres from 'postgres'
import { type CopyPieces, type CopyRows, encodeCopyPieces } from './copy.js'
import * as schema from './schema.js'
import {
  type Db,
  type DbConfig,
  type DbSession,
  type Drizzle,
  dialect,
  INGEST_LOCK_LOST_SQLSTATE,
  isSql,
  MIGRATIONS_FOLDER,
  PLAN_FOR_VALUES_COMMENT,
  sqlState,
} from './session.js'
import { noDelayConnections } from './socket.js'
import { postgresClient } from './client.js'

// Postgres through postgres.js: a pool that renews itself after a restart, the ingest lock's own session,
// and migrations serialised between processes.

/** Serialises `migrate` between processes that share one Postgres (any constant works; this is "flsh"). */
const MIGRATION_LOCK_ID = 0x666c7368
const INGEST_LOCK_ID = 0x666c7369
const DEFAULT_POOL_SIZE = 10
const DEFAULT_STATEMENT_TIMEOUT_MS = 10_000
/** How long opening a connection may take; past it a query fails rather than hang while the database is away. */
const CONNECT_TIMEOUT_S = 10
/**
 * Wait before reconnecting after failed connection attempts, in seconds: postgres.js grows it to 20 s,
 * and requests queue behind it, so a database back after an outage would serve nothing for that long.
 */
const reconnectBackoff = (failures: number) => Math.min(0.05 * 2 ** failures, 1)
/** After a pool connection closes unasked, the pool is replaced this much later (closes in between count once). */
const POOL_RENEWAL_DELAY_MS = 250
/** How long queries under way on a replaced pool get to finish, in seconds. */
const POOL_RETIRE_TIMEOUT_S = 10
/** Beyond the statement timeout, how long a statement may go unanswered before its connection is taken for dead. */
const UNANSWERED_GRACE_MS = 10_000
/** How often statements under way are looked at for one gone unanswered. */
const UNANSWERED_CHECK_MS = 1_000
/** How long the other queries of a pool replaced for an unanswered statement get to finish, in seconds. */
const UNANSWERED_RETIRE_TIMEOUT_S = 2

/**
 * Statements under way on one client, watched for one that goes unanswered. Postgres answers every statement
 * flashgate runs within the statement timeout, if only to cancel it, so silence past it means the connection
 * is dead without either end having said so: the database host gone, a failover behind the same name, a
 * network or proxy that drops packets. The kernel would wait ~15 minutes of retransmissions (forever behind a
 * proxy that keeps its side open) before failing the socket; meanwhile reads and ingest would hang.
 * A transaction's BEGIN and COMMIT are watched too, and its statements until it lifts the timeout (a rewind,
 * sealing).
 */
function watchUnanswered(limitMs: number, onUnanswered: (waitedMs: number) => void) {
  /** `query`: postgres.js's statement, whose `state` is its connection's (one object per connection) once sent. */
  type Watched = { at: number; query: { state?: object | null } | null; sentSeenAt: number | null }
  const started = new Set<Watched>()
  let timer: NodeJS.Timeout | null = null
  // Silence is counted from the last answer of the connection a statement waits on, not from when it was asked
  // for: under load, statements wait for a connection (queued) or behind others on one (pipelined), each of
  // those answered within the statement timeout; only a connection that answers nothing for the limit is dead.
  const lastAnswer = new WeakMap<object, number>()
  let clientLastAnswer = Number.NEGATIVE_INFINITY
  /** Since when the statement's connection has said nothing while it waits; `null` while it is not sent. */
  function silentSince(statement: Watched, now: number): number | null {
    // A transaction's BEGIN or COMMIT, a COPY's rows: on a connection of their own, but which is not known here.
    if (statement.query === null) return Math.max(statement.at, clientLastAnswer)
    const connection = statement.query.state
    if (connection === null || connection === undefined) return null
    statement.sentSeenAt ??= now
    return Math.max(statement.sentSeenAt, lastAnswer.get(connection) ?? Number.NEGATIVE_INFINITY)
  }
  function check() {
    const now = performance.now()
    let oldest = now
    for (const statement of started) oldest = Math.min(oldest, silentSince(statement, now) ?? now)
    if (now - oldest <= limitMs) return
    // Once per silence: those statements fail when their connections close.
    started.clear()
    onUnanswered(now - oldest)
  }
  return {
    /**
     * `work` (one statement, one step of a COPY, a BEGIN or COMMIT), watched until it settles; returned as it
     * is. `query`: the postgres.js statement that `work` is, if it is one.
     */
    watch<work extends PromiseLike<unknown>>(work: work, query: object | null = null): work {
      if (!Number.isFinite(limitMs)) return work
      const statement: Watched = { at: performance.now(), query, sentSeenAt: null }
      started.add(statement)
      if (timer === null) {
        timer = setInterval(check, Math.min(UNANSWERED_CHECK_MS, limitMs))
        timer.unref()
      }
      const settled = () => {
        started.delete(statement)
        const now = performance.now()
        clientLastAnswer = now
        const connection = statement.query?.state
        if (connection !== null && connection !== undefined) lastAnswer.set(connection, now)
      }
      work.then(settled, settled)
      return work
    },
    stop() {
      if (timer !== null) clearInterval(timer)
      timer = null
      started.clear()
    },
  }
}
type Unanswered = ReturnType<typeof watchUnanswered>

/**
 * Runs a transaction (`run` starts it, tells `begun` when its body starts and `bodyDone` when the body has
 * settled) with its BEGIN and its COMMIT or ROLLBACK watched: they are statements too, and a connection that
 * went silent hangs there as well. The body's own statements are watched where they are bounded.
 */
function watchedTransaction<result>(unanswered: Unanswered, run: (begun: () => void, bodyDone: () => void) => Promise<result>): Promise<result> {
  let begun = () => {}
  unanswered.watch(new Promise<void>((resolve) => (begun = resolve)))
  let ended = () => {}
  const bodyDone = () => {
    unanswered.watch(new Promise<void>((resolve) => (ended = resolve)))
  }
  const whole = run(begun, bodyDone)
  const settled = () => {
    begun()
    ended()
  }
  whole.then(settled, settled)
  return whole
}

/**
 * Options of every postgres.js client. `fetch_types` off: postgres.js runs its array-types query on each
 * new connection and drops the promise, so when that query fails (a connection cut while it starts, as
 * around a database restart) the rejection is unhandled and Node exits (porsager/postgres#1192, #1223).
 * No column or parameter here is an array.
 */
const CLIENT_OPTIONS = { fetch_types: false, onnotice: () => {} } as const

/** The closes of a postgres.js client's connections, counted: the ingest lock's session, or the pool. */
type WatchedSession = {
  closes(): number
  nextClose(): Promise<void>
  /** Closes of several connections are counted: one may be another connection's than a transaction's. */
  pool: boolean
  /**
   * Whether the client was given up for silence: its connections are terminated, so postgres.js refuses the
   * ROLLBACK of a failed body without writing to the socket, but a half-open socket may never close either.
   */
  givenUp(): boolean
}

/** SQLSTATE classes and postgres.js codes of errors after which the connection goes away. */
const CONNECTION_LOST_CODES = new Set(['57P01', '57P02', '57P03', 'CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'CONNECTION_ENDED', 'ECONNRESET', 'EPIPE'])
/** How long a transaction body waits for its connection to close after an error that announces it. */
const CLOSE_AFTER_FATAL_ERROR_MS = 5_000

/** Whether `error` (the driver's, or drizzle's wrapping it) says that the connection is going away. */
function announcesConnectionLoss(error: unknown): boolean {
  const code = sqlState(error)
  return code !== undefined && (CONNECTION_LOST_CODES.has(code) || code.startsWith('08'))
}

/**
 * Runs a postgres.js transaction body. postgres.js 3.4.9 answers a failed body with a ROLLBACK on the same
 * connection; when that connection has just closed, the ROLLBACK is written to a null socket from a
 * setImmediate and the process dies (porsager/postgres#1208, #1154): a restart, a failover or a terminated
 * backend would end the process. `begin()` rejects by itself when its connection closes, so a body that
 * failed because the connection went away is left unsettled, and postgres.js never writes that ROLLBACK.
 */
async function transactionBody<result>(work: () => Promise<result>, session: WatchedSession): Promise<result> {
  // A close before the body started was of an earlier connection: this transaction runs on a new one.
  const closesBefore = session.closes()
  try {
    return await work()
  } catch (error) {
    const announced = announcesConnectionLoss(error)
    // On a pool, the close counted may be another connection's: only an error that says this one is lost counts.
    if (session.pool && !announced) throw error
    let closed = session.closes() > closesBefore
    if (!closed && announced) {
      let timer: NodeJS.Timeout | undefined
      closed = await Promise.race([
        session.nextClose().then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), CLOSE_AFTER_FATAL_ERROR_MS)
        }),
      ])
      clearTimeout(timer)
    }
    // Left unsettled, `begin()` rejects when the socket closes; a session given up for silence may never see that.
    if (closed && !session.givenUp()) return new Promise<never>(() => {})
    throw error
  }
}

/** A count of a client's connection closes, and the next one to come. */
function watchCloses({ pool }: { pool: boolean }): WatchedSession & { closed(): void; giveUp(): void } {
  let closes = 0
  let givenUp = false
  let signalClose = () => {}
  let nextClose = new Promise<void>((resolve) => {
    signalClose = resolve
  })
  return {
    pool,
    closes: () => closes,
    nextClose: () => nextClose,
    givenUp: () => givenUp,
    /** Counted as the close it is: a client that is ended is not seen to close (postgres.js tells only of closes nobody asked for). */
    giveUp() {
      givenUp = true
      this.closed()
    },
    closed() {
      closes++
      signalClose()
      nextClose = new Promise<void>((resolve) => {
        signalClose = resolve
      })
    },
  }
}

/**
 * Distinct statement texts a client prepares; statements past them are sent unprepared. Every query flashgate
 * builds takes its values as parameters, so the texts are few (tens); this bounds what each connection holds
 * should that ever change.
 */
const MAX_PREPARED_TEXTS = 1_000

/**
 * The client that drizzle runs on, with its statements prepared: each distinct text is parsed once per
 * connection, and after five calls Postgres may keep one generic plan for it, instead of parsing and planning
 * on every call. drizzle sends statements unnamed unless a query is built with `.prepare(name)`, and for a
 * small log query parsing and planning cost more than running it (0.6-2 ms against ~0.1 ms, measured on the
 * scale bench's logs). Statements marked `PLAN_FOR_VALUES` stay unnamed. Transactions run on postgres.js's
 * own transaction client, unwrapped. Every statement is watched for one that goes unanswered.
 */
function preparingStatements(client: postgres.Sql, unanswered: Unanswered): postgres.Sql {
  const prepared = new Set<string>()
  const unsafe: postgres.Sql['unsafe'] = (query, parameters, options) => {
    let prepare = prepared.has(query)
    if (!prepare && prepared.size < MAX_PREPARED_TEXTS && !query.includes(PLAN_FOR_VALUES_COMMENT)) {
      prepared.add(query)
      prepare = true
    }
    const statement = client.unsafe(query, parameters, { ...options, prepare })
    // Watching it runs it (a postgres.js query runs once awaited), a turn later: the caller still sets `.values()` first.
    unanswered.watch(statement, statement)
    return statement as never
  }
  // drizzle's transactions: BEGIN and COMMIT watched, and the body's statements (see watchingTransaction).
  const begin = (...parameters: unknown[]) => {
    const body = parameters.pop() as (tx: postgres.TransactionSql) => unknown
    return watchedTransaction(unanswered, (begun, bodyDone) =>
      (client.begin as (...all: unknown[]) => Promise<unknown>)(...parameters, async (tx: postgres.TransactionSql) => {
        begun()
        try {
          return await body(watchingTransaction(tx, unanswered, { bounded: true }))
        } finally {
          bodyDone()
        }
      }),
    )
  }
  return new Proxy(client, { get: (target, key) => (key === 'unsafe' ? unsafe : key === 'begin' ? begin : Reflect.get(target, key)) })
}

/** `set local statement_timeout = 0` (and the like): from it on, a transaction's statements may run for long. */
const UNBOUNDED_STATEMENTS = /\bstatement_timeout\s*(=|to)\s*'?0'?\s*$/i

/**
 * A transaction's client whose statements are watched while the statement timeout bounds them: from a
 * `set local statement_timeout = 0` on (a rewind, sealing), they are not, as a long one is no sign of silence.
 * Savepoints (drizzle's nested transactions) share their transaction's state.
 */
function watchingTransaction(tx: postgres.TransactionSql, unanswered: Unanswered, state: { bounded: boolean }): postgres.TransactionSql {
  return new Proxy(tx, {
    get(target, key) {
      if (key === 'unsafe')
        return (query: string, parameters?: never[], options?: postgres.UnsafeQueryOptions) => {
          if (UNBOUNDED_STATEMENTS.test(query)) state.bounded = false
          const statement = target.unsafe(query, parameters, options)
          if (state.bounded) unanswered.watch(statement, statement)
          return statement
        }
      if (key === 'savepoint')
        return (...parameters: unknown[]) => {
          const body = parameters.pop() as (inner: postgres.TransactionSql) => unknown
          return (target.savepoint as (...all: unknown[]) => Promise<unknown>)(...parameters, (inner: postgres.TransactionSql) =>
            body(watchingTransaction(inner, unanswered, state)),
          )
        }
      return Reflect.get(target, key)
    },
  })
}

/**
 * Statements, COPY and transactions over one postgres.js client (the pool, or the ingest lock's session).
 * `watched` counts the closes of the client's connections (see transactionBody); `lockSession` says the
 * client is the ingest lock's session, whose transactions first check that it still holds the lock.
 */
function postgresSession(
  client: postgres.Sql,
  watched: WatchedSession,
  { lockSession, unanswered }: { lockSession: boolean; unanswered: Unanswered },
): DbSession {
  const preparing = preparingStatements(client, unanswered)
  const drizzle = drizzlePostgres(preparing, { schema })
  const guard = lockSession ? dialect.sqlToQuery(INGEST_LOCK_GUARD) : null
  const watchedStatement = (statement: postgres.PendingQuery<postgres.Row[]>) => unanswered.watch(statement, statement)
  return {
    drizzle: drizzle as unknown as Drizzle,
    async query(statement) {
      if (isSql(statement)) return (await drizzle.execute(statement)) as never
      return (await preparing.unsafe(statement.sql, statement.params as never[])) as never
    },
    transaction(work) {
      return drizzle.transaction((tx) =>
        transactionBody(async () => {
          if (lockSession) await tx.execute(INGEST_LOCK_GUARD)
          return work(tx as unknown as Drizzle)
        }, watched),
      )
    },
    async copyInTransaction(batches, statements = [], { durable = true, before = [] } = {}) {
      await watchedTransaction(unanswered, (begun, bodyDone) =>
        client.begin((tx) => {
          begun()
          return transactionBody(async () => {
            if (guard !== null) await watchedStatement(tx.unsafe(guard.sql, guard.params as never[]))
            if (!durable) await watchedStatement(tx.unsafe(ASYNC_COMMIT))
            for (const statement of before) {
              const query = dialect.sqlToQuery(statement)
              await watchedStatement(tx.unsafe(query.sql, query.params as never[]))
            }
            // Encoding overlaps Postgres taking rows in: a table streams in pieces (each encoded once the one before
            // is on its way), and the first piece of the next table is encoded while Postgres finishes this one.
            const tables = batches.filter((batch) => batch.rows.length > 0)
            let next = tables.length === 0 ? null : startPieces(tables[0]!)
            for (let index = 0; next !== null; index++) {
              const { tableName, columns, format, pieces } = next
              const copy = tx.unsafe(`copy ${tableName} (${columns}) from stdin with (format ${format})`)
              const refused = refusalOf(copy)
              const writable = await copy.writable()
              // One piece ahead at most (`highWaterMark: 1`): a piece is encoded when the one before has left.
              const copied = Promise.race([pipeline(Readable.from(pieces, { highWaterMark: 1 }), writable), refused])
              // Awaited below, after a turn: a failure meanwhile (the connection lost) must not count as unhandled.
              copied.catch(() => {})
              // Let the first piece reach the socket before encoding the next table's on this thread.
              await new Promise<void>((resolve) => setImmediate(resolve))
              next = index + 1 < tables.length ? startPieces(tables[index + 1]!) : null
              await unanswered.watch(copied)
            }
            for (const statement of statements) {
              const query = dialect.sqlToQuery(statement)
              await watchedStatement(tx.unsafe(query.sql, query.params as never[]))
            }
          }, watched).finally(bodyDone)
        }),
      )
    },
  }
}

/** A table's COPY pieces with the first one already encoded (see copyInTransaction), as an iterable. */
function startPieces(batch: CopyRows): Omit<CopyPieces, 'pieces'> & { pieces: Iterable<Uint8Array> } {
  const { pieces, ...shape } = encodeCopyPieces(batch)
  const first = pieces.next()
  return {
    ...shape,
    pieces: {
      *[Symbol.iterator]() {
        if (first.done) return
        yield first.value
        for (let piece = pieces.next(); !piece.done; piece = pieces.next()) yield piece.value
      },
    },
  }
}

/**
 * Rejects when Postgres refuses a COPY's rows (a duplicate key, a block no partition of `logs` takes).
 * postgres.js 3.4.9 settles a COPY statement with its writable stream, so when the refusal comes after the
 * last row was sent it reaches only the statement's `reject`, which no longer settles anything, and the
 * stream never finishes: without this, the transaction would wait forever on a connection that is idle.
 */
function refusalOf(statement: object): Promise<never> {
  const query = statement as { reject(error: unknown): void }
  const reject = query.reject
  const refused = new Promise<never>((_, refuse) => {
    query.reject = (error) => {
      refuse(error)
      reject(error)
    }
  })
  // A failure before the stream opens (the connection closed) reaches the caller through the statement
  // itself; this copy of it must not count as unhandled meanwhile.
  refused.catch(() => {})
  return refused
}

/** A transaction's commit that does not wait for its WAL to be flushed (copyInTransaction's `durable: false`). */
const ASYNC_COMMIT = 'set local synchronous_commit = off'

/** Fails with INGEST_LOCK_LOST_SQLSTATE unless the session running it holds the ingest lock. */
const INGEST_LOCK_GUARD = sql.raw(`do $$ begin
  if not exists (select 1 from pg_locks where locktype = 'advisory' and classid = 0 and objid = ${INGEST_LOCK_ID}
                 and objsubid = 1 and pid = pg_backend_pid() and granted) then
    raise exception 'this session does not hold the flashgate ingest lock' using errcode = '${INGEST_LOCK_LOST_SQLSTATE}';
  end if;
end $$`)

export async function openPostgres(config: DbConfig): Promise<Db> {
  const statementTimeout = config.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS
  if (config.migrate !== false) await migratePostgresOnce(config.databaseUrl)
  // The pool is replaced, shortly after any of its connections closes: postgres.js 3.4.9 keeps the error
  // that a dying server sent during a query and hands it to the first query after the reconnect
  // (porsager/postgres#1223), so a pool that lived through a restart would fail reads long after it.
  // Its connections are not retired by age (no max_lifetime), so only closes nobody asked for count.
  let closing = false
  let renewal: NodeJS.Timeout | null = null
  const unansweredAfterMs = config.unansweredAfterMs ?? (statementTimeout > 0 ? statementTimeout + UNANSWERED_GRACE_MS : Number.POSITIVE_INFINITY)
  // Every close of a pool connection nobody asked for, for transactionBody. A body left unsettled after one
  // is ended with its pool: the renewal that close brings retires the old pool, closing what it still holds.
  const poolCloses = watchCloses({ pool: true })
  function openPool(): postgres.Sql {
    const created: postgres.Sql = postgresClient(config.databaseUrl, {
      max: config.poolSize ?? DEFAULT_POOL_SIZE,
      ...noDelayConnections(),
      max_lifetime: 0,
      connect_timeout: CONNECT_TIMEOUT_S,
      backoff: reconnectBackoff,
      ...CLIENT_OPTIONS,
      onclose: () => {
        if (closing) return
        poolCloses.closed()
        if (created === client) scheduleRenewal()
      },
      connection: { statement_timeout: statementTimeout, application_name: 'flashgate' },
    })
    return created
  }
  function scheduleRenewal() {
    if (renewal !== null || closing) return
    renewal = setTimeout(() => {
      renewal = null
      // Queries under way finish on the old pool (or fail with it, when the database is away).
      renew(POOL_RETIRE_TIMEOUT_S)
    }, POOL_RENEWAL_DELAY_MS)
    renewal.unref()
  }
  function renew(retireTimeoutS: number) {
    if (closing) return
    const retired = client
    poolWatch.stop()
    client = openPool()
    pool = openSession()
    void retired.end({ timeout: retireTimeoutS }).catch(() => {})
  }
  /** The server process of the ingest lock's last session, while it is given up for silence and not yet replaced. */
  let abandonedLockPid: number | null = null
  let poolWatch = watchUnanswered(Number.POSITIVE_INFINITY, () => {})
  function openSession(): DbSession {
    // Given up is this client's state, not the next one's: the closes are counted across renewals.
    let givenUp = false
    const watched: WatchedSession = { pool: true, closes: poolCloses.closes, nextClose: poolCloses.nextClose, givenUp: () => givenUp }
    const unanswered = watchUnanswered(unansweredAfterMs, (waitedMs) => {
      config.onUnanswered?.({ session: 'pool', waitedMs })
      givenUp = true
      // New connections at once; the old pool's statements that do get answers have a moment to.
      renew(UNANSWERED_RETIRE_TIMEOUT_S)
    })
    poolWatch = unanswered
    return postgresSession(client, watched, { lockSession: false, unanswered })
  }
  let client = openPool()
  let pool = openSession()
  return {
    get drizzle() {
      return pool.drizzle
    },
    query: (statement) => pool.query(statement),
    copyInTransaction: (batches, statements, options) => pool.copyInTransaction(batches, statements, options),
    transaction: (work) => pool.transaction(work),
    async tryIngestLock() {
      // A client of its own with one connection, not `client.reserve()`: postgres.js reuses a reserved
      // connection that closed (and crashes writing to it), and retires connections after 30-60 minutes,
      // which would drop a session lock unnoticed. Here nothing retires the session, and its close is seen.
      const closes = watchCloses({ pool: false })
      const session = postgresClient(config.databaseUrl, {
        max: 1,
        ...noDelayConnections(),
        max_lifetime: 0,
        idle_timeout: 0,
        connect_timeout: CONNECT_TIMEOUT_S,
        backoff: reconnectBackoff,
        ...CLIENT_OPTIONS,
        onclose: () => closes.closed(),
        connection: { statement_timeout: statementTimeout, application_name: 'flashgate-ingest' },
      })
      let pid: number
      try {
        // A session given up for silence may still hold the lock on the server, which has not heard of the
        // silence (a network that drops packets, a proxy keeping its side open): that backend is ours, and
        // would keep the lock for hours, until the server's keepalive notices. It is ended first.
        if (abandonedLockPid !== null)
          await session`select pg_terminate_backend(pid) from pg_locks
                        where locktype = 'advisory' and classid = 0 and objid = ${INGEST_LOCK_ID} and objsubid = 1 and granted and pid = ${abandonedLockPid}`
        const [row] = await session`select pg_try_advisory_lock(${INGEST_LOCK_ID}) as locked, pg_backend_pid() as pid`
        if (row?.locked !== true) {
          await session.end({ timeout: 5 })
          return null
        }
        pid = Number(row.pid)
        abandonedLockPid = null
      } catch (error) {
        await session.end({ timeout: 1 }).catch(() => {})
        throw error
      }
      // Unanswered, the session is ended: its lock goes with it, and the ingester takes it again on new connections.
      const unanswered = watchUnanswered(unansweredAfterMs, (waitedMs) => {
        config.onUnanswered?.({ session: 'ingest lock', waitedMs })
        closes.giveUp()
        abandonedLockPid = pid
        void session.end({ timeout: 0 }).catch(() => {})
      })
      return {
        db: postgresSession(session, closes, { lockSession: true, unanswered }),
        held: () => closes.closes() === 0,
        async release() {
          unanswered.stop()
          // Ending the session releases its advisory locks; an explicit unlock would only add a round trip
          // (or a wait for a reconnect when the database is gone).
          await session.end({ timeout: 5 }).catch(() => {})
        },
      }
    },
    async close() {
      closing = true
      poolWatch.stop()
      if (renewal !== null) clearTimeout(renewal)
      await client.end({ timeout: 5 })
    },
  }
}

/** Applies migrations on one connection, under an advisory lock so that concurrent starts do not race. */
async function migratePostgresOnce(databaseUrl: string): Promise<void> {
  const client = postgresClient(databaseUrl, { max: 1, ...CLIENT_OPTIONS })
  try {
    await client`select pg_advisory_lock(${MIGRATION_LOCK_ID})`
    await migratePostgres(drizzlePostgres(client), { migrationsFolder: MIGRATIONS_FOLDER })
    await client`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`
  } finally {
    await client.end({ timeout: 5 })
  }
}
