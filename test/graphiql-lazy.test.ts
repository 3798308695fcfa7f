import { type ChildProcess, spawn } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { freePort } from './fixtures/ports.js'

const BIN = new URL('../bin/flashgate.js', import.meta.url).pathname
/** The bundle's strings in the heap: its ~9 MB source (two bytes a character) and the ~10 MB text it exports. */
const BUNDLE_HEAP_BYTES = 20 * 2 ** 20

/** V8's large-object space, where strings of that size live, as the process reports it on `/metrics`. */
async function largeObjectBytes(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const line = text.split('\n').find((each) => each.startsWith('flashgate_nodejs_heap_space_size_used_bytes{space="large_object"}'))
  if (line === undefined) throw new Error('no large_object_space figure on /metrics')
  return Number(line.split(' ').at(-1))
}

// GraphiQL's bundle (@graphql-yoga/render-graphiql) is imported on the first request for GraphiQL, not at start:
// a serving process that never shows it does not carry its strings.
describe('GraphiQL loaded on first use', () => {
  let anvil: Anvil
  let child: ChildProcess
  let url: string
  let output = ''

  beforeAll(async () => {
    anvil = await startAnvil()
    const port = await freePort()
    url = `http://127.0.0.1:${port}`
    const args = ['serve', '--workers', '1', '--port', String(port), '--database-url', 'memory://', '--upstream-rpc', anvil.rpcUrl, '--log-level', 'warn']
    child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
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
  })

  test('a process that has not shown GraphiQL holds none of its bundle; the first page loads it and works', async () => {
    const before = await largeObjectBytes(url)
    const page = await fetch(`${url}/graphql`, { headers: { accept: 'text/html' } })
    expect(page.status, output).toBe(200)
    const html = await page.text()
    const script = /<script src="([^"]+)"/.exec(html)?.[1]
    expect(script).toMatch(/^\/graphql\/assets\/graphiql\.[\w-]+\.js$/)
    const bundle = await fetch(`${url}${script}`)
    expect(bundle.status).toBe(200)
    expect((await bundle.arrayBuffer()).byteLength).toBeGreaterThan(1_000_000)
    const after = await largeObjectBytes(url)
    expect(after - before).toBeGreaterThan(BUNDLE_HEAP_BYTES)
  })
})
