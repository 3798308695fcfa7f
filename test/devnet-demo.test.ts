// The demo traffic of `flashgate dev` (issue 15): EOA agents and smart-account agents (ERC-4337, the
// published EntryPoint v0.7 and SimpleAccount, user operations bundled by the operator key), some of whose
// codes the demo registers in the builder-codes registry it deploys at start-up. Through the gateway: the
// smart-account agents' operations are attributed to their accounts, and the registry's word is shown.
import { setTimeout as sleep } from 'node:timers/promises'
import { pino } from 'pino'
import { type Address, createPublicClient, getAddress, http, toEventSelector } from 'viem'
import { entryPoint07Abi, entryPoint07Address } from 'viem/account-abstraction'
import { getAbiItem } from 'viem'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { DEVNET_REGISTRY_ADDRESS } from '../src/devnet/registry-contract.js'
import { createTrafficGenerator, type TrafficGenerator } from '../src/devnet/traffic.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'

type Entry = {
  builderCode: string
  registered: boolean
  transactions: number
  userOperations: number
  onChain: { registered: boolean; owner: Address | null; payoutAddress: Address | null } | null
}
type Summary = { walletAddress: Address | null; onChain: Entry['onChain'] }

let devnet: Devnet
let database: TestDatabase
let gateway: TestGateway
let traffic: TrafficGenerator

async function getJson<T>(path: string): Promise<T> {
  const response = await fetch(`${gateway.url}${path}`)
  expect(response.status).toBe(200)
  return (await response.json()) as T
}

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 100 })
  database = await createTestDatabase()
  gateway = await startTestGateway({
    upstreamRpc: devnet.rpcUrl,
    flashblocksWs: devnet.flashblocksUrl,
    databaseUrl: database.databaseUrl,
    builderCodeRegistry: DEVNET_REGISTRY_ADDRESS,
    registrationRateLimit: 0,
  })
  traffic = createTrafficGenerator({ rpcUrl: devnet.rpcUrl, gatewayUrl: gateway.url, logger: pino({ level: 'silent' }), ratePerSecond: 8 })
  await traffic.start()
}, 60_000)

afterAll(async () => {
  await traffic?.stop()
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
})

test('smart-account agents send user operations that are attributed to their accounts; some codes are registered on chain, the rest are not', async () => {
  let board: Entry[] = []
  for (const deadline = Date.now() + 60_000; ; ) {
    board = (await getJson<{ builderCodes: Entry[] }>('/v1/builder-codes?limit=100')).builderCodes
    const operations = board.filter((entry) => entry.userOperations > 0)
    if (operations.length >= 2 && board.filter((entry) => entry.transactions > 0).length >= 3) break
    if (Date.now() > deadline) throw new Error(`the demo did not get going: ${JSON.stringify(board)}`)
    await sleep(250)
  }
  const client = createPublicClient({ transport: http(devnet.rpcUrl) })
  const event = toEventSelector(getAbiItem({ abi: entryPoint07Abi, name: 'UserOperationEvent' }))
  const reported = await client.request({
    method: 'eth_getLogs',
    params: [{ address: entryPoint07Address, topics: [event], fromBlock: '0x0', toBlock: 'latest' }],
  })

  for (const entry of board.filter((candidate) => candidate.userOperations > 0 && candidate.builderCode.startsWith('bc_'))) {
    // The code is the smart account's, registered here by the account's address, on chain to the account.
    const summary = await getJson<Summary>(`/v1/builder-codes/${entry.builderCode}`)
    const account = summary.walletAddress!
    expect(await client.getCode({ address: account })).toMatch(/^0x[0-9a-f]{100,}$/)
    expect(summary.onChain).toMatchObject({ registered: true, owner: account, payoutAddress: account })
    // Never more operations than the EntryPoint reported for the account, and reach is the account, not the bundler.
    const ofAccount = reported.filter((log) => getAddress(`0x${log.topics[2]!.slice(26)}`) === account)
    expect(entry.userOperations).toBeLessThanOrEqual(ofAccount.length)
    const stats = await getJson<{ confirmed: { reach: number; userOperationReach: number } }>(`/v1/builder-codes/${entry.builderCode}/stats`)
    expect(stats.confirmed).toMatchObject({ reach: 1, userOperationReach: 1 })
  }

  // The registry the demo deployed holds some of the EOA agents' codes and not the others'.
  const eoaAgents = board.filter((entry) => entry.builderCode.startsWith('bc_') && entry.transactions > 0)
  expect(eoaAgents.some((entry) => entry.onChain?.registered === true)).toBe(true)
  expect(eoaAgents.some((entry) => entry.onChain?.registered === false)).toBe(true)
}, 90_000)
