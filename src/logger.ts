import { pino, type Logger } from 'pino'

export type { Logger }

/** JSON logs to stderr (stdout stays free for what a command prints for people or scripts). */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'flashgate' } }, pino.destination(2))
}
