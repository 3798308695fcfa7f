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

/**
 * Why `url` names no database flashgate can open, or `null`: a URL of another scheme (`mysql://`, a mistyped
 * `postgress://`) would otherwise be taken for a PGlite directory of that name.
 */
export function databaseUrlProblem(url: string): string | null {
  if (isPostgresUrl(url) || url === 'memory://' || url.startsWith('file://')) return null
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1]
  return scheme === undefined
    ? null
    : `${scheme}:// is not a database flashgate opens: postgres://… (or postgresql://…), a PGlite directory, file://… or memory://`
}
