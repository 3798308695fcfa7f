import { pino, type Logger } from 'pino'
import sonicBoom from 'sonic-boom'
import { loggableError } from './errors.js'

export type { Logger }

type SonicBoom = InstanceType<typeof sonicBoom.SonicBoom>

let stderr: SonicBoom | undefined

/**
 * The process's one stream to stderr, written asynchronously, whose reader may go away (`serve 2>&1 | head`, a
 * log collector that dies): from its first failed write on, logs are dropped and the process goes on. At exit,
 * what is buffered is written once, and a failure to is given up. pino's own destination (sonic-boom 4)
 * retries a failed write at exit every 100 ms for ever, whatever the error: a process exiting with its stderr's
 * reader gone never exited, and ignored SIGTERM.
 */
function stderrDestination(): SonicBoom {
  if (stderr !== undefined) return stderr
  const stream = new sonicBoom.SonicBoom({ fd: 2 })
  stream.on('error', () => {
    stream.write = () => true
    stream.flushSync = () => {}
  })
  process.once('exit', () => {
    try {
      stream.flushSync()
    } catch {
      // Nobody to tell.
    }
  })
  stderr = stream
  return stream
}

/** JSON logs to stderr (stdout stays free for what a command prints for people or scripts). */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'flashgate' } }, stderrDestination())
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
