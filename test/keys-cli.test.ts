import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc, startTestGateway } from './fixtures/gateway.js'

const run = promisify(execFile)
const BIN = new URL('../bin/flashgate.js', import.meta.url).pathname

let database: TestDatabase
let anvil: Anvil

/** Runs `flashgate keys …` on the test database; resolves with its output and exit code. */
async function keys(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, 'keys', ...args, '--database-url', database.databaseUrl])
    return { code: 0, stdout, stderr }
  } catch (error) {
    const failure = error as { code: number; stdout: string; stderr: string }
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr }
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
  // Bad options are refused before the database is opened, so these run beside the first create.
  const [created, badName, badPolicy] = await Promise.all([
    keys('create', '--name', 'indexer-1', '--rate', '7'),
    keys('create', '--name', 'has space'),
    keys('create', '--name', 'x', '--policy', 'gold'),
  ])
  expect(created.code).toBe(0)
  const key = created.stdout.split('\n')[0]!
  expect(key).toMatch(/^fg_[A-Za-z0-9_-]{43}$/)
  expect(badName).toMatchObject({ code: 1, stderr: expect.stringMatching(/--name must be/) })
  expect(badPolicy).toMatchObject({ code: 1, stderr: expect.stringMatching(/--policy must be one of dedicated, public/) })
  expect((await keys('create', '--name', 'indexer-1')).stderr).toMatch(/already exists/)

  const listed = await keys('list')
  expect(listed.stdout).toMatch(/indexer-1 +fg_\S+… +dedicated +7 req\/s .* active/)
  expect(listed.stdout).not.toContain(key)

  const gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  try {
    await gateway.ingester.waitForBlock(0)
    expect(await rpc(`${gateway.url}/rpc/${key}`, 'eth_getBlockReceipts', ['latest'])).toMatchObject({ result: [] })
  } finally {
    await gateway.stop()
  }

  const revoked = await keys('revoke', 'indexer-1')
  expect(revoked.stdout).toMatch(/indexer-1 .* revoked /)
  expect((await keys('revoke', 'nobody')).code).toBe(1)

  const again = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  try {
    const response = await fetch(`${again.url}/rpc/${key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' })
    expect(response.status).toBe(401)
  } finally {
    await again.stop()
  }
})
