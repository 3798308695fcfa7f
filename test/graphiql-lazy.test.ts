import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { freePort } from './fixtures/ports.js'

const BIN = new URL('../bin/flashgate.js', import.meta.url).pathname
/** What the bundle's module is called when it is loaded (@graphql-yoga/render-graphiql's ESM build). */
const BUNDLE = /render-graphiql\/esm\/graphiql\.js$/

/**
 * An `--import` for the child that registers a module `load` hook writing each URL it loads to `log`, one a
 * line (hooks run on a thread of their own: a synchronous append is seen by the test as soon as it returns).
 */
function importRecorder(log: string): string {
  const hooks = `import { appendFileSync } from 'node:fs'
export async function load(url, context, next) {
  appendFileSync(${JSON.stringify(log)}, url + '\\n')
  return next(url, context)
}`
  const register = `import { register } from 'node:module'
register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)})`
  return `data:text/javascript,${encodeURIComponent(register)}`
}

const loaded = (log: string) =>
  readFileSync(log, 'utf8')
    .split('\n')
    .filter((url) => BUNDLE.test(url))

// GraphiQL's bundle (@graphql-yoga/render-graphiql) is imported on the first request for GraphiQL, not at start:
// a serving process that never shows it does not carry its strings.
describe('GraphiQL loaded on first use', () => {
  let anvil: Anvil
  let child: ChildProcess
  let url: string
  let output = ''
  const directory = mkdtempSync(join(tmpdir(), 'flashgate-graphiql-'))
  const log = join(directory, 'loaded.txt')

  beforeAll(async () => {
    anvil = await startAnvil()
    const port = await freePort()
    url = `http://127.0.0.1:${port}`
    const args = ['serve', '--workers', '1', '--port', String(port), '--database-url', 'memory://', '--upstream-rpc', anvil.rpcUrl, '--log-level', 'warn']
    writeFileSync(log, '')
    child = spawn(process.execPath, ['--import', importRecorder(log), BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
    const deadline = Date.now() + 60_000
    while ((await fetch(`${url}/healthz`).catch(() => null))?.status !== 200) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`flashgate serve did not come up:\n${output}`)
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }, 90_000)

  afterAll(async () => {
    child?.kill('SIGTERM')
    await anvil?.stop()
    rmSync(directory, { recursive: true, force: true })
  })

  test('a process that has not shown GraphiQL has not loaded its bundle; the first page loads it and works', async () => {
    // The recorder sees modules load: the server's own are there, the bundle is not.
    expect(readFileSync(log, 'utf8')).toContain('/src/server/graphiql.ts')
    expect(loaded(log)).toEqual([])
    const page = await fetch(`${url}/graphql`, { headers: { accept: 'text/html' } })
    expect(page.status, output).toBe(200)
    const html = await page.text()
    const script = /<script src="([^"]+)"/.exec(html)?.[1]
    expect(script).toMatch(/^\/graphql\/assets\/graphiql\.[\w-]+\.js$/)
    const bundle = await fetch(`${url}${script}`)
    expect(bundle.status).toBe(200)
    expect((await bundle.arrayBuffer()).byteLength).toBeGreaterThan(1_000_000)
    expect(loaded(log)).toHaveLength(1)
  })
})
