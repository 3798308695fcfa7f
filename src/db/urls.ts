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
  if (isPostgresUrl(url)) {
    const { port } = postgresConnection(url).target
    return port === undefined || (Number.isInteger(port) && port > 0 && port < 65_536) ? null : 'its port must be a number from 1 to 65535'
  }
  if (url === 'memory://' || url.startsWith('file://')) return null
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1]
  return scheme === undefined
    ? null
    : `${scheme}:// is not a database flashgate opens: postgres://… (or postgresql://…), a PGlite directory, file://… or memory://`
}

/** Where and as whom postgres.js connects, when the URL alone would not say it to postgres.js (below). */
export type PostgresTarget = { host?: string; port?: number; user?: string; pass?: string; database?: string }

/** The connection parameters a libpq URI may give in its query string; any other is a server setting. */
const URI_PARAMETERS = ['host', 'port', 'user', 'password', 'dbname'] as const

/**
 * What to hand postgres.js for a `postgres://` URL read as libpq reads a connection URI (psql's
 * `postgresql://user@/db?host=/var/run/postgresql`, or the socket directory percent-encoded as the host:
 * `postgresql://%2Fvar%2Frun%2Fpostgresql/db`). postgres.js reads the URL with WHATWG's parser, which
 * refuses a user with an empty host, and sends every query parameter to the server as a setting (`host`
 * is then "unrecognized configuration parameter"): these forms are rewritten into its options, where a
 * host starting with `/` is a Unix-socket directory (`<dir>/.s.PGSQL.<port>`). Any other URL is returned
 * as it is. As in libpq, a parameter in the query string wins over the same one before it.
 */
export function postgresConnection(url: string): { url: string; target: PostgresTarget } {
  const parts = /^(postgres(?:ql)?:\/\/)([^/?#]*)(\/[^?#]*)?(\?[^#]*)?$/i.exec(url)
  if (parts === null) return { url, target: {} }
  const [, scheme, authority, path = '', search = ''] = parts as unknown as [string, string, string, string?, string?]
  const at = authority.lastIndexOf('@')
  const userinfo = at === -1 ? '' : authority.slice(0, at)
  const hostspec = authority.slice(at + 1)
  const query = new URLSearchParams(search)
  const socketHost = decode(hostspec).startsWith('/')
  const emptyHostWithUser = hostspec === '' && userinfo !== ''
  if (!socketHost && !emptyHostWithUser && !URI_PARAMETERS.some((name) => query.has(name))) return { url, target: {} }

  const target: PostgresTarget = {}
  if (userinfo !== '') {
    const colon = userinfo.indexOf(':')
    target.user = decode(colon === -1 ? userinfo : userinfo.slice(0, colon))
    if (colon !== -1) target.pass = decode(userinfo.slice(colon + 1))
  }
  // A socket directory may carry a port (`%2Ftmp:5433`); a TCP host (or several, `a:5432,b:5433`, or
  // `[::1]:5432`) stays in the URL for postgres.js to read.
  if (socketHost) {
    const [, directory = '', socketPort] = /^(.*?)(?::(\d+))?$/.exec(decode(hostspec)) ?? []
    target.host = directory
    if (socketPort !== undefined) target.port = Number(socketPort)
  }
  if (path.length > 1) target.database = decode(path.slice(1))
  const host = query.get('host')
  if (host !== null && host !== '') target.host = host
  const port = query.get('port')
  if (port !== null && port !== '') target.port = Number(port)
  const user = query.get('user')
  if (user !== null) target.user = user
  const password = query.get('password')
  if (password !== null) target.pass = password
  const dbname = query.get('dbname')
  if (dbname !== null) target.database = dbname
  for (const name of URI_PARAMETERS) query.delete(name)
  const rest = query.toString()
  const keptHost = socketHost ? '' : hostspec
  return { url: `${scheme}${keptHost}/${rest === '' ? '' : `?${rest}`}`, target }
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** `url` fit to print: a Postgres password, in the user part or as `password=`, is masked. */
export function maskedDatabaseUrl(url: string): string {
  if (!isPostgresUrl(url)) return url
  const parts = /^([a-z]+:\/\/)([^/?#]*)(.*)$/i.exec(url)
  if (parts === null) return url
  const [, scheme, authority, rest] = parts as unknown as [string, string, string, string]
  const at = authority.lastIndexOf('@')
  const colon = authority.indexOf(':')
  const shownAuthority = at !== -1 && colon !== -1 && colon < at ? `${authority.slice(0, colon)}:***${authority.slice(at)}` : authority
  return `${scheme}${shownAuthority}${rest.replace(/([?&]password=)[^&#]*/gi, '$1***')}`
}
