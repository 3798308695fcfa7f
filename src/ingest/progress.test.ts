import { PassThrough } from 'node:stream'
import { pino } from 'pino'
import { describe, expect, test, vi } from 'vitest'
import { createProgress } from './progress.js'

function terminal() {
  const stream = Object.assign(new PassThrough(), { isTTY: true }) as unknown as NodeJS.WriteStream & PassThrough
  let written = ''
  stream.on('data', (chunk: Buffer) => {
    written += chunk.toString()
  })
  return { stream, written: () => written }
}

describe('backfill progress', () => {
  test('on a TTY it redraws one line with blocks/s, logs/s and an ETA, then ends it', () => {
    vi.useFakeTimers({ now: 0 })
    try {
      const { stream, written } = terminal()
      const progress = createProgress({ logger: pino({ level: 'silent' }), stream })
      vi.setSystemTime(2_000)
      progress.record(100, 5_000, 100, 300)
      progress.done()
      expect(written()).toBe('\r\x1b[Kbackfill 100/300  50 blocks/s  2500 logs/s  ETA 4s\n')
    } finally {
      vi.useRealTimers()
    }
  })

  test('off a TTY it logs the same figures at a slower pace instead', () => {
    vi.useFakeTimers({ now: 0 })
    try {
      const lines: unknown[] = []
      const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) })
      const stream = new PassThrough() as unknown as NodeJS.WriteStream
      const progress = createProgress({ logger, stream })
      vi.setSystemTime(2_000)
      progress.record(10, 10, 10, 20)
      expect(lines).toHaveLength(0)
      vi.setSystemTime(20_000)
      progress.record(10, 10, 20, 20)
      expect(lines).toEqual([expect.objectContaining({ msg: 'backfill progress', head: 20, target: 20, blocksPerSecond: 1, etaSeconds: 0 })])
    } finally {
      vi.useRealTimers()
    }
  })
})
