import { BaseError } from 'viem'
import { isIngestLockLost } from '../db/index.js'
import { InconsistentBlockError } from './block-data.js'

export type IngesterStatus = {
  /** Holds the ingest lock (on Postgres, another process may be the ingester). */
  leader: boolean
  head: number | null
  upstreamHead: number | null
  /** The last upstream or database failure, cleared by the next success. */
  lastError: string | null
  /** Where `lastError` came from: the upstream node, the database (or the ingest lock), or the ingest itself. */
  lastErrorSource: 'upstream' | 'database' | 'ingest' | null
  /** When the upstream last answered the ingester (ms since the epoch); `null` before it first did. */
  lastUpstreamContactAt: number | null
}

export function createStatus(): IngesterStatus {
  return {
    leader: false,
    head: null,
    upstreamHead: null,
    lastError: null,
    lastErrorSource: null,
    lastUpstreamContactAt: null,
  }
}

/** Keeps a failed step's message, and whether the upstream, the database or the ingest itself failed. */
export function recordFailure(status: IngesterStatus, error: unknown) {
  status.lastError = error instanceof Error ? error.message : String(error)
  status.lastErrorSource = errorSource(error)
}

export function recordSuccess(status: IngesterStatus) {
  status.lastError = null
  status.lastErrorSource = null
}

function errorSource(error: unknown): NonNullable<IngesterStatus['lastErrorSource']> {
  if (error instanceof BaseError || error instanceof InconsistentBlockError) return 'upstream'
  // postgres.js and PGlite errors carry a string `code` (a SQLSTATE, or ECONNREFUSED, CONNECTION_CLOSED, …).
  if (isIngestLockLost(error) || typeof (error as { code?: unknown } | null)?.code === 'string') return 'database'
  return 'ingest'
}
