import { type SQL, sql } from 'drizzle-orm'
import type { Logger } from 'pino'
import type postgres from 'postgres'
import type { Hash } from 'viem'
import { isPostgresUrl } from './index.js'
import { postgresClient } from './client.js'

/**
 * The channel on which the ingester announces each commit and each rewind. The NOTIFY is part of the
 * transaction that writes (or deletes) the blocks: Postgres delivers it at commit, never for a rollback.
 * https://www.postgresql.org/docs/current/sql-notify.html
 */
export const CHAIN_CHANNEL = 'flashgate_chain'
/** Wait before opening the listening session again after it closed or failed to open, doubling up to the maximum. */
const RELISTEN_MIN_MS = 100
const RELISTEN_MAX_MS = 5_000
/** How long opening the listening session may take before it is tried again. */
const CONNECT_TIMEOUT_S = 10

/**
 * What the ingester announces: blocks up to `head` were committed, or every block above `rewoundTo` was
 * removed. Numbers and hashes only (a payload holds at most 8000 bytes): listeners read the rest from the
 * database. One shape for the producer (src/ingest/store.ts) and the consumer (`listenForChainChanges`).
 */
export type ChainNotification = { head: number; hash: Hash } | { rewoundTo: number }

/** The statement that announces `notification`; run it in the transaction it announces. */
export function notifyChain(notification: ChainNotification): SQL {
  return sql`select pg_notify(${CHAIN_CHANNEL}, ${JSON.stringify(notification)})`
}

/**
 * What a listener learns: the chain changed, whether blocks were removed (or may have been, unheard), and
 * the head the ingester committed, when it says so.
 */
export type ChainChange = { reorg: boolean; head?: number }

export type ChainListener = { close(): Promise<void> }

/**
 * Listens on `CHAIN_CHANNEL` from a session of its own, so that a process that does not ingest hears of
 * every commit and rewind of the one that does (on any number of processes sharing one Postgres). When the
 * session goes (the database restarted, the backend was terminated), it opens a new one and reports a
 * change with `reorg: true`: what was announced meanwhile went unheard, and readers catch up from what
 * they last saw. A fresh client each time, not postgres.js's `listen`: that one re-listens once after a
 * close and gives up silently when that fails (as it does while the database restarts).
 *
 * `null` for PGlite: it belongs to one process, whose ingester tells its readers directly.
 */
export function listenForChainChanges(options: { databaseUrl: string; onChange(change: ChainChange): void; logger: Logger }): ChainListener | null {
  const { databaseUrl, onChange, logger } = options
  if (!isPostgresUrl(databaseUrl)) return null
  let session: postgres.Sql | null = null
  let closed = false
  let failures = 0
  let listenedBefore = false
  let timer: NodeJS.Timeout | null = null

  function open() {
    timer = null
    if (closed) return
    const opened: postgres.Sql = postgresClient(databaseUrl, {
      // postgres.js's own `listen` takes notifications through this option; its types leave it out.
      ...{
        onnotify(channel: string, payload: string) {
          if (opened === session && channel === CHAIN_CHANNEL) onChange(changeOf(payload))
        },
      },
      max: 1,
      idle_timeout: 0,
      max_lifetime: 0,
      connect_timeout: CONNECT_TIMEOUT_S,
      fetch_types: false,
      onnotice: () => {},
      connection: { application_name: 'flashgate-listen' },
      onclose: () => {
        if (opened === session) reopen('the listening session closed')
      },
    })
    session = opened
    opened.unsafe(`listen ${CHAIN_CHANNEL}`).then(
      () => {
        if (opened !== session) return
        failures = 0
        if (listenedBefore) logger.info('listening for chain changes again')
        listenedBefore = true
        // Commits and rewinds announced while nobody listened went unheard: readers look for themselves.
        onChange({ reorg: true })
      },
      (error: unknown) => {
        if (opened === session) reopen('could not listen for chain changes', error)
      },
    )
  }

  function reopen(reason: string, error?: unknown) {
    const retired = session
    session = null
    void retired?.end({ timeout: 0 }).catch(() => {})
    if (closed || timer !== null) return
    const delay = Math.min(RELISTEN_MIN_MS * 2 ** failures++, RELISTEN_MAX_MS)
    logger.warn({ err: error, retryInMs: delay }, reason)
    timer = setTimeout(open, delay)
    timer.unref()
  }

  open()
  return {
    async close() {
      closed = true
      if (timer !== null) clearTimeout(timer)
      const retired = session
      session = null
      await retired?.end({ timeout: 1 }).catch(() => {})
    },
  }
}

function changeOf(payload: string): ChainChange {
  try {
    const notification = JSON.parse(payload) as ChainNotification
    return 'rewoundTo' in notification ? { reorg: true } : { reorg: false, head: notification.head }
  } catch {
    // Not ours to read: assume the most the chain can have done.
    return { reorg: true }
  }
}
