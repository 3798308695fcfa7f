import { pino, type Logger } from 'pino'
import { loggableError } from './errors.js'

export type { Logger }

/** JSON logs to stderr (stdout stays free for what a command prints for people or scripts). */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'flashgate' } }, pino.destination(2))
}

/** Kinds of failure a limiter keeps track of; past them it starts over (the kinds are few: names and codes). */
const MAX_REPEAT_KINDS = 1_000

/**
 * Logs a failure of one kind at most once per `intervalMs`, saying how many of that kind went unlogged since
 * (`suppressed`): with the database away, thousands of requests fail each second, and a line for each would
 * bury the log.
 */
export function createRepeatLimiter(intervalMs = 1_000) {
  const kinds = new Map<string, { loggedAt: number; suppressed: number }>()
  return function limited(kind: string, log: (suppressed: number) => void): void {
    const now = Date.now()
    const seen = kinds.get(kind)
    if (seen !== undefined && now - seen.loggedAt < intervalMs) {
      seen.suppressed++
      return
    }
    if (seen === undefined && kinds.size >= MAX_REPEAT_KINDS) kinds.clear()
    kinds.set(kind, { loggedAt: now, suppressed: 0 })
    log(seen?.suppressed ?? 0)
  }
}

/** The fields an unexpected error is logged with, and the kind a repeat limiter counts it as. */
export function unexpectedErrorKind(logged: { name: string; code?: string | number }): string {
  return `${logged.name}:${logged.code ?? ''}`
}

/**
 * Logs unexpected errors as `message`, each kind (message, name and code) at most once a second with how many
 * went unlogged since, and never with more than `loggableError` keeps (no parameters, a bounded message).
 */
export function createUnexpectedErrorLog(logger: Logger) {
  const repeats = createRepeatLimiter()
  return function logUnexpected(error: unknown, message: string): void {
    const err = loggableError(error)
    repeats(`${message}:${unexpectedErrorKind(err)}`, (suppressed) => logger.error({ err, ...(suppressed > 0 && { suppressed }) }, message))
  }
}
