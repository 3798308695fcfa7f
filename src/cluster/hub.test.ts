import cluster from 'node:cluster'
import { fileURLToPath } from 'node:url'
import pino from 'pino'
import { expect, test } from 'vitest'
import { createClusterHub } from './hub.js'

const LEAVER = fileURLToPath(new URL('../../test/fixtures/worker-that-leaves.mjs', import.meta.url))

/** Blocks this thread for `ms`: events (a worker's exit, its channel closing) wait until it is over. */
function hold(ms: number) {
  for (const until = Date.now() + ms; Date.now() < until; );
}

test('a message to a worker whose channel has just closed is logged, never an uncaught error that would end the primary', async () => {
  const lines: { msg: string; worker?: number }[] = []
  const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) })
  const hub = createClusterHub({ logger, status: () => ({}) as never, ownMetrics: async () => [] })
  cluster.setupPrimary({ exec: LEAVER, silent: true })
  const worker = cluster.fork()
  // Before the hub's own listener: by the time the hub answers `listening`, the worker has exited and its end
  // of the channel is closed, though this process has not yet heard so (isConnected() is still true).
  worker.on('message', () => hold(500))
  hub.add(worker)
  await new Promise((resolve) => worker.once('exit', resolve))
  // Errors of a write are reported on the next tick; give them several.
  await new Promise((resolve) => setTimeout(resolve, 200))
  hub.close()
  expect(lines.some((line) => line.msg === 'could not reach a worker' && line.worker === worker.id)).toBe(true)
})

test('before any worker listens, the status is not asked for: the gateway it comes from may still be starting', async () => {
  let asked = 0
  const hub = createClusterHub({
    logger: pino({ level: 'silent' }),
    status: () => {
      asked++
      // As the primary's gateway before startGateway resolves (a slow migration, a Redis that does not answer).
      throw new TypeError("Cannot read properties of null (reading 'primaryStatus')")
    },
    ownMetrics: async () => [],
  })
  try {
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    expect(asked).toBe(0)
  } finally {
    hub.close()
  }
})
