import { DEFAULT_DATABASE_URL, nonEmpty } from '../config.js'
import { readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { DatabaseInUseError, DIRECTORY_LOCK_FILE, directoryHolder, lockDirectory } from '../db/lock.js'
import { databaseUrlProblem, pgliteDirectory } from '../db/urls.js'
import { CommandLineError } from './flags.js'
import { UsageError } from './usage-error.js'

/** `flashgate dev`'s PGlite, as ephemeral as its chain: wiped at every start (unless another dev holds it). */
export const DEV_DATABASE_DIR = './.flashgate/dev-pglite'

/**
 * The database `flashgate keys` and `migrate` work on: `--database-url`, `DATABASE_URL`, else the default
 * PGlite directory — or, when nothing holds that one and a running `flashgate dev` holds its own, the dev
 * database (what someone running `npm start` means). `note` says how to reach the other one.
 */
export function chooseDatabase(
  flags: Record<string, string | undefined>,
  env: Record<string, string | undefined>,
): { databaseUrl: string; note: string | null } {
  const given = nonEmpty(flags['database-url']) ?? nonEmpty(env.DATABASE_URL)
  if (given !== undefined) return { databaseUrl: openable(given), note: null }
  const dev = directoryHolder(pgliteDirectory(DEV_DATABASE_DIR)!)
  if (dev === null) return { databaseUrl: DEFAULT_DATABASE_URL, note: null }
  if (directoryHolder(pgliteDirectory(DEFAULT_DATABASE_URL)!) === null)
    return {
      databaseUrl: DEV_DATABASE_DIR,
      note: `the running flashgate dev's, as nothing runs on the default ${DEFAULT_DATABASE_URL}: --database-url ${DEFAULT_DATABASE_URL} for that one`,
    }
  return { databaseUrl: DEFAULT_DATABASE_URL, note: `the default: --database-url ${DEV_DATABASE_DIR} for the running flashgate dev's (pid ${dev.pid})` }
}

/** `url` when it names a database flashgate opens; a bad command line (exit 2) when it does not (`mysql://…`). */
export function openable(url: string): string {
  const problem = databaseUrlProblem(url)
  if (problem !== null) throw new CommandLineError(`--database-url ${problem}`)
  return url
}

/**
 * Empties the dev database for a new chain. Its lock is taken first, so a second `flashgate dev` in the same
 * checkout is refused before it deletes anything; the lock then passes to the gateway that opens the directory.
 */
export function wipeDevDatabase() {
  let lock: ReturnType<typeof lockDirectory>
  try {
    lock = lockDirectory(DEV_DATABASE_DIR, 'dev')
  } catch (error) {
    if (!(error instanceof DatabaseInUseError)) throw error
    throw new UsageError(
      `flashgate ${error.holder.command} (pid ${error.holder.pid}) is running on ${DEV_DATABASE_DIR}; stop it first (its data is left as it is) or give this one --database-url`,
    )
  }
  for (const entry of readdirSync(lock.directory)) {
    if (entry !== DIRECTORY_LOCK_FILE) rmSync(join(lock.directory, entry), { recursive: true, force: true })
  }
  lock.handOver()
}

/** Refuses a PGlite directory another live process holds, before anything that would open it is loaded. */
export function refuseHeldDirectory(databaseUrl: string) {
  const directory = pgliteDirectory(databaseUrl)
  const holder = directory === null ? null : directoryHolder(directory)
  if (directory !== null && holder !== null) throw new DatabaseInUseError(directory, holder)
}
