import { afterAll, beforeAll, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { attributionSuffix } from '../src/attribution/index.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { rpc, startTestGateway } from './fixtures/gateway.js'
import { waitForSameHead } from './fixtures/sync.js'

let anvil: Anvil
let database: TestDatabase
let gateway: Gateway

beforeAll(async () => {
  anvil = await startAnvil()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

test('codes tied on transactions rank in one order at every limit: the first of a longer leaderboard is the first of a shorter one', async () => {
  // Codes seen on chain are any printable ASCII: upper case, digits and `_` order differently by code point
  // (how the database cuts the list at the limit) than by locale.
  const codes = ['a_tie', 'B_tie', 'tie_9', 'tie__']
  const sender = DEV_ACCOUNTS[2]!
  let last = ''
  for (const code of codes)
    last = (
      await rpc(anvil.rpcUrl, 'eth_sendTransaction', [{ from: sender.address, to: `0x${'7a'.repeat(20)}`, data: attributionSuffix([code]), gas: '0xc350' }])
    ).result as string
  await expect.poll(async () => (await rpc(anvil.rpcUrl, 'eth_getTransactionReceipt', [last])).result).not.toBeNull()
  await waitForSameHead(gateway, anvil.rpcUrl)
  const leaderboard = async (limit: number) =>
    ((await (await fetch(`${gateway.url}/v1/builder-codes?limit=${limit}`)).json()) as { builderCodes: { builderCode: string }[] }).builderCodes.map(
      (entry) => entry.builderCode,
    )
  const full = await leaderboard(codes.length)
  expect([...full].sort()).toEqual([...codes].sort())
  for (let limit = 1; limit < codes.length; limit++) expect(await leaderboard(limit)).toEqual(full.slice(0, limit))
})
