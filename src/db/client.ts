import postgres from 'postgres'
import { postgresConnection } from './urls.js'

/**
 * A postgres.js client for a `postgres://` URL read as libpq reads it (`postgresConnection` in urls.ts: a
 * Unix-socket directory, libpq's parameters). Every place flashgate connects from goes through here, so that
 * each understands the same URLs.
 */
export function postgresClient(databaseUrl: string, options: postgres.Options<Record<string, postgres.PostgresType>>): postgres.Sql {
  const { url, target } = postgresConnection(databaseUrl)
  return postgres(url, { ...target, ...options })
}
