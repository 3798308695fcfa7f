import type { Logger } from 'pino'

/** How often backfill progress is shown: a redrawn line on a TTY, a log line otherwise. */
const TTY_REFRESH_MS = 1_000
const LOG_REFRESH_MS = 10_000

export type Progress = {
  record(blocks: number, logs: number, head: number, target: number): void
  done(): void
}

export function createProgress({ logger, stream = process.stderr }: { logger: Logger; stream?: NodeJS.WriteStream }): Progress {
  const isTty = stream.isTTY === true
  const startedAt = Date.now()
  let lastShownAt = startedAt
  let blocks = 0
  let logs = 0
  let shownOnTty = false

  function line(head: number, target: number) {
    const seconds = Math.max((Date.now() - startedAt) / 1000, 0.001)
    const blocksPerSecond = blocks / seconds
    const remaining = Math.max(target - head, 0)
    const etaSeconds = blocksPerSecond > 0 ? Math.round(remaining / blocksPerSecond) : null
    return {
      head,
      target,
      blocksPerSecond: Math.round(blocksPerSecond),
      logsPerSecond: Math.round(logs / seconds),
      etaSeconds,
    }
  }

  return {
    record(newBlocks, newLogs, head, target) {
      blocks += newBlocks
      logs += newLogs
      const now = Date.now()
      if (now - lastShownAt < (isTty ? TTY_REFRESH_MS : LOG_REFRESH_MS)) return
      lastShownAt = now
      const figures = line(head, target)
      if (isTty) {
        const eta = figures.etaSeconds === null ? '?' : `${figures.etaSeconds}s`
        stream.write(`\r\x1b[Kbackfill ${figures.head}/${figures.target}  ${figures.blocksPerSecond} blocks/s  ${figures.logsPerSecond} logs/s  ETA ${eta}`)
        shownOnTty = true
      } else logger.info(figures, 'backfill progress')
    },
    done() {
      if (shownOnTty) stream.write('\n')
      shownOnTty = false
    },
  }
}
