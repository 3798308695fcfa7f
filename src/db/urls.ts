import { resolve } from 'node:path'

// What a database URL names, read without loading a driver (the configuration checks it).

export function isPostgresUrl(url: string): boolean {
  return url.startsWith('postgres://') || url.startsWith('postgresql://')
}

/** The directory of a PGlite `databaseUrl` (a path, or `file://` and a path); `null` for Postgres and `memory://`. */
export function pgliteDirectory(url: string): string | null {
  if (isPostgresUrl(url) || url === 'memory://') return null
  return resolve(url.replace(/^file:\/\//, ''))
}
