import { ConfigError } from '../config.js'
import { DatabaseDirectoryError, DatabaseInUseError } from '../db/lock.js'
import { CommandLineError } from './flags.js'
import { explainListenFailure, UsageError } from './usage-error.js'

const DEBUG_LOG_LEVELS = new Set(['debug', 'trace'])

/** `--log-level` as the command line gave it, which wins over LOG_LEVEL as everywhere else. */
let logLevelFlag: string | undefined

/** Tells `fail` the command line's `--log-level`, once it is read. */
export function failAtLogLevel(level: string | undefined): void {
  logLevelFlag = level === '' ? undefined : level
}

/**
 * Every failure is one line on stderr and a non-zero exit: 2 for a bad command line or configuration, 1 for
 * the rest. An unexpected error shows its stack only when asked for (`--log-level debug` or LOG_LEVEL=debug).
 */
export function fail(error: unknown): never {
  if (error instanceof ConfigError || error instanceof CommandLineError || error instanceof DatabaseDirectoryError) {
    console.error(`flashgate: ${error.message}`)
    process.exit(2)
  }
  const explained = explainListenFailure(error, [])
  if (explained instanceof UsageError || explained instanceof DatabaseInUseError) {
    console.error(`flashgate: ${explained.message}`)
    process.exit(1)
  }
  if (DEBUG_LOG_LEVELS.has(logLevelFlag ?? process.env.LOG_LEVEL ?? '')) console.error(error)
  else {
    const message = error instanceof Error ? error.message : String(error)
    console.error(`flashgate: ${message.split('\n')[0]} (--log-level debug shows the details)`)
  }
  process.exit(1)
}
