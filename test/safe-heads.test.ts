import type { Hex } from 'viem'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { result, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

// anvil's safe head is 32 blocks behind its head and its finalized 64: both move with every block.
const BLOCKS_BEFORE = 70
const ROUNDS = 12

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway

beforeAll(async () => {
  anvil = await startAnvil()
  await anvilCall(anvil.rpcUrl, 'anvil_mine', [`0x${BLOCKS_BEFORE.toString(16)}`])
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  await waitForSameHead(gateway, anvil.rpcUrl)
}, 120_000)

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

const numberAt = async (url: string, tag: string) => (await result<{ number: Hex } | null>(url, 'eth_getBlockByNumber', [tag, false]))?.number ?? null

test('safe and finalized move with the head: the first read that shows a new block shows the node’s safe and finalized heads with it', async () => {
  for (let round = 0; round < ROUNDS; round++) {
    await anvilCall(anvil.rpcUrl, 'anvil_mine', ['0x1'])
    const head = await result<Hex>(anvil.rpcUrl, 'eth_blockNumber')
    // As soon as the gateway shows the new block, its safe and finalized heads (no block comes meanwhile).
    while ((await numberAt(gateway.dedicatedUrl, 'latest')) !== head) await new Promise((resolve) => setTimeout(resolve, 5))
    const [safe, finalized] = await Promise.all(['safe', 'finalized'].map((tag) => numberAt(gateway.dedicatedUrl, tag)))
    expect({ round, safe, finalized }).toEqual({ round, safe: await numberAt(anvil.rpcUrl, 'safe'), finalized: await numberAt(anvil.rpcUrl, 'finalized') })
  }
})
