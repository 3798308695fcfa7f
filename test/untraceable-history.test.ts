import { createWalletClient, http, parseEther } from 'viem'
import { foundry } from 'viem/chains'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { result, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilReceipt, waitForSameHead } from './fixtures/sync.js'

// A node that keeps the state of its newest blocks only (a full node below its window; anvil with
// --prune-history): older blocks cannot be traced however often asked. The index takes them without their
// diffs and reads accounts from the node, as it does from a node without tracing, instead of retrying forever.
const KEPT_STATES = 5
const TRANSFERS = 20

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway

beforeAll(async () => {
  anvil = await startAnvil({ extraArgs: ['--prune-history', String(KEPT_STATES)] })
  const wallet = createWalletClient({ account: DEV_ACCOUNTS[0]!, chain: foundry, transport: http(anvil.rpcUrl) })
  for (let sent = 0; sent < TRANSFERS; sent++) {
    const hash = await wallet.sendTransaction({ to: DEV_ACCOUNTS[(sent % 3) + 1]!.address, value: parseEther('0.001') })
    await anvilReceipt(anvil.rpcUrl, hash)
  }
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
}, 120_000)

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

test('blocks the node can no longer trace are indexed, and accounts are read from the node', async () => {
  const head = await waitForSameHead(gateway, anvil.rpcUrl, 30_000)
  expect(head).toBe(TRANSFERS)
  expect((await gateway.resolvers.chain.view()).accountSource).toBe('read-through')
  for (let number = 1; number <= head; number++) {
    const at = `0x${number.toString(16)}`
    expect(await result(gateway.dedicatedUrl, 'eth_getBlockReceipts', [at])).toEqual(await result(anvil.rpcUrl, 'eth_getBlockReceipts', [at]))
  }
  for (const account of DEV_ACCOUNTS.slice(0, 4).map((account) => account.address))
    for (const method of ['eth_getBalance', 'eth_getTransactionCount'])
      expect(await result(gateway.dedicatedUrl, method, [account, 'latest'])).toEqual(await result(anvil.rpcUrl, method, [account, 'latest']))
})
