import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { keysCommand } from '../src/cli/keys.js'
import { CommandLineError } from '../src/cli/flags.js'
import { UsageError } from '../src/cli/usage-error.js'
import { isPostgresUrl } from '../src/db/index.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc, startTestGateway } from './fixtures/gateway.js'

const run = promisify(execFile)
const BIN = new URL('../bin/flashgate.js', import.meta.url).pathname

let database: TestDatabase
let anvil: Anvil

/** `flashgate keys …` in-process on the test database: its printed lines, or the usage error it raised. */
async function keys(...args: string[]): Promise<{ lines: string[]; error: string | null }> {
  const lines: string[] = []
  const flags: Record<string, string> = { 'database-url': database.databaseUrl }
  const positionals: string[] = []
  for (let i = 0; i < args.length; i++) {
    if (args[i]!.startsWith('--')) flags[args[i]!.slice(2)] = args[++i]!
    else positionals.push(args[i]!)
  }
  try {
    await keysCommand({ action: positionals[0], argument: positionals[1], flags, env: {}, print: (line) => lines.push(...line.split('\n')), inform: () => {} })
    return { lines, error: null }
  } catch (error) {
    if (!(error instanceof UsageError) && !(error instanceof CommandLineError)) throw error
    return { lines, error: error.message }
  }
}

beforeAll(async () => {
  database = await createTestDatabase()
  anvil = await startAnvil()
})

afterAll(async () => {
  await anvil?.stop()
  await database?.drop()
})

test('flashgate keys create, list and revoke; the key opens a dedicated endpoint until revoked', async () => {
  const created = await keys('create', '--name', 'indexer-1', '--rate', '7')
  expect(created.error).toBeNull()
  const key = created.lines[0]!
  expect(key).toMatch(/^fg_[A-Za-z0-9_-]{43}$/)
  expect((await keys('create', '--name', 'indexer-1')).error).toMatch(/already exists/)
  expect((await keys('create', '--name', 'has space')).error).toMatch(/^--name must be/)
  expect((await keys('create', '--name', 'x', '--policy', 'gold')).error).toBe('--policy must be one of dedicated, public')
  const wholeNumber = '--rate must be a whole number of requests per second (0 for no limit)'
  expect((await keys('create', '--name', 'x', '--rate', '-1')).error).toBe(wholeNumber)
  // An unset shell variable is no rate, not "no limit"; a rate past the column's 32 bits is refused, not a database error.
  expect((await keys('create', '--name', 'x', '--rate', '')).error).toBe(wholeNumber)
  expect((await keys('create', '--name', 'x', '--rate', '1.5')).error).toBe(wholeNumber)
  expect((await keys('create', '--name', 'x', '--rate', '2147483648')).error).toBe('--rate must be at most 2147483647 (0 for no limit)')
  // `keys revoke 2` means the key with id 2: no key may be named so.
  expect((await keys('create', '--name', '2')).error).toBe('--name must not be digits alone (revoke takes those as a key id)')
  expect((await keys('frobnicate')).error).toBe('usage: flashgate keys create|list|revoke')

  const listed = await keys('list')
  expect(listed.lines.join('\n')).toMatch(/indexer-1 +fg_\S+… +dedicated +7 req\/s .* active/)
  expect(listed.lines.join('\n')).not.toContain(key)

  const gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  try {
    await gateway.ingester.waitForBlock(0)
    expect(await rpc(`${gateway.url}/rpc/${key}`, 'eth_getBlockReceipts', ['latest'])).toMatchObject({ result: [] })
  } finally {
    await gateway.stop()
  }

  expect((await keys('revoke', 'indexer-1')).lines[0]).toMatch(/indexer-1 .* revoked /)
  expect((await keys('revoke', 'nobody')).error).toBe('no API key named or numbered "nobody"')
  // A name that looks like an id: revoking it takes that key only, not the key with that number too.
  const idOf = async (name: string) =>
    (await keys('list')).lines
      .find((line) => line.includes(` ${name} `))!
      .trim()
      .split(/\s+/)[0]!
  expect((await keys('create', '--name', 'indexer-2')).error).toBeNull()
  // A name that reads as its id is refused: `revoke <id>` can never mean another key.
  expect((await keys('create', '--name', await idOf('indexer-2'))).error).toMatch(/must not be digits alone/)
  // An id that is no key's name revokes the key with that id.
  expect((await keys('create', '--name', 'indexer-3')).error).toBeNull()
  expect((await keys('revoke', await idOf('indexer-3'))).lines[0]).toMatch(/indexer-3 .* revoked /)

  const again = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  try {
    const response = await fetch(`${again.url}/rpc/${key}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}',
    })
    expect(response.status).toBe(401)
  } finally {
    await again.stop()
  }
})

test('the flashgate binary runs the keys command: output on stdout, a bad option is one line on stderr and exit 2', async () => {
  const [listed, refused] = await Promise.all([
    run(process.execPath, [BIN, 'keys', 'list', '--database-url', database.databaseUrl]),
    run(process.execPath, [BIN, 'keys', 'create', '--name', 'bad name', '--database-url', database.databaseUrl]).catch(
      (error: { code: number; stderr: string }) => error,
    ),
  ])
  expect(listed.stdout).toMatch(/indexer-1 .* revoked /)
  expect(refused).toMatchObject({ code: 2, stderr: expect.stringMatching(/^flashgate: --name must be 1 to 64 letters/) })
}, 60_000)

test('flashgate keys says on stderr which database it used, a Postgres password masked', async () => {
  const listed = await run(process.execPath, [BIN, 'keys', 'list', '--database-url', database.databaseUrl])
  let shown = database.databaseUrl
  if (isPostgresUrl(shown)) {
    const url = new URL(shown)
    if (url.password !== '') url.password = '***'
    shown = url.toString()
  }
  expect(listed.stderr).toBe(`database: ${shown}\n`)
}, 60_000)

test.skipIf(isPostgresUrl(process.env.DATABASE_URL ?? ''))(
  'on PGlite, keys refuses in one line a directory another process holds without an admin endpoint, and never opens it',
  async () => {
    // This process holds the directory (a gateway embedded without the CLI's admin endpoint).
    const gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
    try {
      const refused = await run(process.execPath, [BIN, 'keys', 'list', '--database-url', database.databaseUrl]).catch(
        (error: { code: number; stderr: string }) => error,
      )
      expect(refused).toMatchObject({
        code: 1,
        stderr: expect.stringMatching(new RegExp(`^flashgate: the PGlite database \\S+ is in use by flashgate \\S+ \\(pid ${process.pid}\\)[^\\n]*\\n$`)),
      })
      expect(await rpc(gateway.url, 'eth_chainId')).toMatchObject({ result: expect.any(String) })
    } finally {
      await gateway.stop()
    }
  },
  60_000,
)
