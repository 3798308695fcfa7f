import { type ChildProcess, spawn } from 'node:child_process'
import { afterEach, describe, expect, test } from 'vitest'

const MODULE = new URL('../bin/idle-heap.js', import.meta.url).href
/**
 * How long a quiet process may take to shrink its heap: V8's memory reducer, due 200 ms after it is armed
 * here, finds the process still allocating then and looks again every 8 s (9 s or 17 s on Node 20).
 */
const REDUCED_WITHIN_MS = 45_000
/**
 * How much the burst allocates: ~22 MB, a count rather than a time, so a loaded machine does not change it.
 * Too little (60 rounds) and no full collection arms the reducer; too much (a 400 ms burst on a fast machine
 * allocated ~1 GB) and V8 reads the allocation rate as high for several 8 s rounds after the process went
 * quiet (it averages over the last samples, the burst's among them), which on a loaded CI machine outlasted 45 s.
 * Measured with six busy loops on two cores: 120 and 200 rounds shrank at ~9 s every time, 60 never.
 */
const BURST_ROUNDS = 200
/** After the plain process shrank its heap, how much longer the other, started with it, is watched. */
const MARGIN_MS = 2_000

/**
 * A child process that allocates a fixed amount, as a burst of requests does (buffers and objects), then goes
 * quiet but for a timer (`keep`: having imported bin/idle-heap.js first, as bin/flashgate.js does), its memory
 * reducer due 200 ms after a collection arms it. Prints what `--trace-gc` says.
 */
function quietProcess(keep: boolean): { child: ChildProcess; output: () => string } {
  const script = `
    ${keep ? `await import(${JSON.stringify(MODULE)})` : ''}
    const burst = []
    for (let i = 0; i < ${BURST_ROUNDS}; i++) burst.push(Buffer.alloc(100_000), new Array(1000).fill(Math.random()))
    burst.length = 0
    setInterval(() => { globalThis.tick = new Array(100).fill(1) }, 100)
    setTimeout(() => process.exit(0), ${REDUCED_WITHIN_MS})`
  const child = spawn(process.execPath, ['--trace-gc', '--gc-memory-reducer-start-delay-ms=200', '--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  return { child, output: () => output }
}

const children: ChildProcess[] = []
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL')
})

describe('bin/idle-heap.js', () => {
  test(
    'a process that goes quiet keeps its heap: V8\u2019s memory reducer, which shrinks it, does not run',
    async () => {
      const plain = quietProcess(false)
      const kept = quietProcess(true)
      children.push(plain.child, kept.child)
      // The same process without it shrinks its heap once quiet (what makes the test able to fail).
      await expect.poll(() => plain.output(), { timeout: REDUCED_WITHIN_MS, interval: 100 }).toMatch(/Mark-Compact \(reduce\)/)
      await new Promise((resolve) => setTimeout(resolve, MARGIN_MS))
      expect(kept.output()).not.toMatch(/\(reduce\)/)
      // It did collect while it allocated: the trace was on.
      expect(kept.output()).toMatch(/Scavenge|Mark-Compact/)
    },
    REDUCED_WITHIN_MS + 10_000,
  )
})
