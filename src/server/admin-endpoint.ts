import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ApiKeyRecord } from '../resolvers/index.js'

/**
 * A PGlite directory belongs to one process, so `flashgate keys` cannot open it while a gateway runs on it:
 * the gateway offers its key management on loopback instead, to whoever can read this file beside the
 * directory's lock (mode 0600: the address and a random token).
 */
export const ADMIN_FILE = 'flashgate-admin.json'
export type AdminEndpoint = { pid: number; url: string; token: string }

/** What the admin endpoint answers for a key: its record with dates as ISO strings. */
export type AdminKeyRecord = Omit<ApiKeyRecord, 'createdAt' | 'revokedAt'> & { createdAt: string; revokedAt: string | null }

/** The admin endpoint of the process holding `directory`, or `null` when it offers none. */
export function readAdminEndpoint(directory: string): AdminEndpoint | null {
  try {
    const parsed = JSON.parse(readFileSync(join(directory, ADMIN_FILE), 'utf8')) as Partial<AdminEndpoint>
    if (typeof parsed.pid !== 'number' || typeof parsed.url !== 'string' || typeof parsed.token !== 'string') return null
    return { pid: parsed.pid, url: parsed.url, token: parsed.token }
  } catch {
    return null
  }
}
