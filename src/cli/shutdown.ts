import { DEFAULT_STOP_TIMEOUT_S } from '../config.js'
import { fail } from './fail.js'

/** A signal during start-up waits this long for it to finish (a database that never answers), then exits 1. */
const STOP_WHILE_STARTING_MS = 10_000

/**
 * Stopping takes at most `serve --stop-timeout` (connections drain for 10 s, the workers of a cluster for 15 s),
 * then the process exits 1: a half-open database connection would hold the ingester's last step forever. The
 * commands without the option (`dev`, `devnet`) take its default.
 */
const STOP_TIMEOUT_MS = DEFAULT_STOP_TIMEOUT_S * 1_000

/**
 * Drains and exits 0 on SIGINT, SIGTERM or SIGHUP (a closed terminal). Heard from the start: a signal while
 * the process is starting stops it as soon as `stopWith` names how, so that start-up (a migration, a
 * database's first write) is not cut short. Signals after the first are ignored: a cluster worker hears its
 * terminal's SIGINT and then its primary's SIGTERM, and drains once.
 */
export function listenForShutdown({ stopTimeoutMs = STOP_TIMEOUT_MS }: { stopTimeoutMs?: number } = {}) {
  let stop: (() => Promise<void>) | null = null
  let asked = false
  let giveUp: NodeJS.Timeout | undefined
  const stopAndExit = () => {
    setTimeout(() => {
      console.error(`flashgate: did not stop within ${stopTimeoutMs / 1000} s (a database or upstream that no longer answers); exiting`)
      process.exit(1)
    }, stopTimeoutMs).unref()
    return stop!().then(
      () => process.exit(0),
      (error: unknown) => fail(error),
    )
  }
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      if (asked) return
      asked = true
      if (stop !== null) void stopAndExit()
      else
        giveUp = setTimeout(() => {
          console.error(`flashgate: ${signal} while starting, and start-up did not finish within ${STOP_WHILE_STARTING_MS / 1000} s; exiting`)
          process.exit(1)
        }, STOP_WHILE_STARTING_MS)
    })
  }
  return {
    stopWith(stopping: () => Promise<void>) {
      clearTimeout(giveUp)
      stop = stopping
      if (asked) void stopAndExit()
    },
  }
}

export type Shutdown = ReturnType<typeof listenForShutdown>
