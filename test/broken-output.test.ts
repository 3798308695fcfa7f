// A process whose output's reader went away (`flashgate serve 2>&1 | head`, a log collector that died): writes
// to stdout and stderr fail with EPIPE. The gateway goes on serving, and stops on SIGTERM as it always does.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { useAnvil } from './fixtures/anvil.js'
import { freePort } from './fixtures/ports.js'

const ROOT = new URL('..', import.meta.url).pathname
const BIN = join(ROOT, 'bin/flashgate.js')
const EXIT_WAIT_MS = 30_000

/** Spawns `args` with stdout and stderr on one pipe whose reader leaves at its first byte; its exit code, awaited. */
function withOutputGone(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  const leave = () => {
    child.stdout!.destroy()
    child.stderr!.destroy()
  }
  child.stdout!.once('data', leave)
  child.stderr!.once('data', leave)
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  return { child, exited }
}

/** The exit code, or `'running'` if the process has not exited within `ms` (then it is killed). */
async function exitWithin(run: ReturnType<typeof withOutputGone>, ms: number): Promise<number | null | 'running'> {
  const outcome = await Promise.race([run.exited, sleep(ms).then(() => 'running' as const)])
  if (outcome === 'running') run.child.kill('SIGKILL')
  return outcome
}

// The same in every pass (no database of the test's): the PGlite pass only, as test/cli.test.ts.
describe.skipIf(process.env.DATABASE_URL !== undefined)('output whose reader went away', () => {
  const anvil = useAnvil()
  let dir: string

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'flashgate-broken-output-'))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  test('serve keeps answering, and exits 0 on SIGTERM', async () => {
    const port = await freePort()
    const run = withOutputGone([BIN, 'serve', '--upstream-rpc', anvil().rpcUrl, '--database-url', 'memory://', '--port', String(port)], { LOG_LEVEL: 'info' })
    const healthy = async () => (await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2_000) }).catch(() => null))?.status ?? null
    try {
      // Up (its banner, on stdout, written after the reader left), and still up while it logs.
      await expect.poll(healthy, { timeout: 60_000, interval: 200 }).toBe(200)
      await sleep(3_000)
      expect(await healthy()).toBe(200)
      run.child.kill('SIGTERM')
      expect(await exitWithin(run, EXIT_WAIT_MS)).toBe(0)
    } finally {
      // A process that hung (as before the fix) holds its port: never left behind.
      if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL')
    }
  })

  test('a process that fails with its stderr gone exits: what the logger buffered is given up, not retried for ever', async () => {
    const script = join(dir, 'fail.ts')
    writeFileSync(
      script,
      `import { createLogger } from ${JSON.stringify(join(ROOT, 'src/logger.ts'))}\n` +
        "const logger = createLogger('info')\n" +
        "for (let line = 0; line < 100; line++) logger.info({ line }, 'a line nobody reads')\n" +
        "throw new Error('an unexpected failure')\n",
    )
    const run = withOutputGone(['--import', 'tsx', script])
    const code = await exitWithin(run, EXIT_WAIT_MS)
    expect(code).not.toBe('running')
    expect(code).not.toBe(0)
  })
})
