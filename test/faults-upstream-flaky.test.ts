import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startFaultyProxy } from './fixtures/faulty-proxy.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { generateQueries, readChainFacts, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'
import { waitForSameHead } from './fixtures/sync.js'

let anvil: Anvil
let database: TestDatabase
let proxy: Awaited<ReturnType<typeof startFaultyProxy>>
let gateway: TestGateway

beforeAll(async () => {
  anvil = await startAnvil()
  proxy = await startFaultyProxy(anvil.rpcUrl)
  database = await createTestDatabase()
})

afterAll(async () => {
  await gateway?.stop()
  await proxy?.stop()
  await anvil?.stop()
  await database?.drop()
})

test('ingest rides out a flaky upstream and an outage, serves from the index meanwhile, and ends equal to the node', async () => {
  const chain = await generateChain(anvil.rpcUrl, { seed: 21, blocks: 30 })
  proxy.setMode('flaky')
  gateway = await startTestGateway({ upstreamRpc: proxy.url, databaseUrl: database.databaseUrl, ingestBatchSize: 5 })
  await waitForSameHead(gateway, anvil.rpcUrl, 60_000)
  expect(proxy.failures).toBeGreaterThan(10)

  // Outage: the upstream answers nothing useful while the chain moves on.
  proxy.setMode('down')
  const more = await generateChain(anvil.rpcUrl, { seed: 22, blocks: 5 })
  await expect.poll(() => gateway.ingester.status().lastError, { timeout: 20_000 }).not.toBeNull()
  expect((await fetch(`${gateway.url}/readyz`)).status).toBe(503)
  // Reads keep coming from the index.
  expect((await rpc(gateway.url, 'eth_blockNumber')).result).toBe(`0x${Number(chain.headNumber).toString(16)}`)

  proxy.setMode('none')
  await waitForSameHead(gateway, anvil.rpcUrl, 60_000)
  await expect.poll(async () => (await fetch(`${gateway.url}/readyz`)).status, { timeout: 10_000 }).toBe(200)
  const facts = await readChainFacts(anvil.rpcUrl, {
    accounts: [...chain.senders, ...chain.recipients],
    contracts: [...chain.contracts, ...more.contracts],
  })
  await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, [...wholeChainQueries(facts), ...generateQueries(createRandom(21), facts, 300)])
})

test('with a WebSocket upstream, new heads arrive by subscription rather than the slow safety poll', async () => {
  const wsDatabase = await createTestDatabase()
  const ws = await startTestGateway({ upstreamRpc: anvil.rpcUrl, upstreamWs: anvil.wsUrl, databaseUrl: wsDatabase.databaseUrl })
  try {
    await waitForSameHead(ws, anvil.rpcUrl)
    // The safety poll runs every 2 s; each block must show up well before that (by polling alone, five
    // blocks in a row would each land within 1 s with a chance of 1 in 32).
    for (let round = 0; round < 5; round++) {
      await sleep(300)
      await rpc(anvil.rpcUrl, 'evm_mine')
      const started = Date.now()
      await waitForSameHead(ws, anvil.rpcUrl, 5_000)
      expect(Date.now() - started).toBeLessThan(1_000)
    }
  } finally {
    await ws.stop()
    await wsDatabase.drop()
  }
})
