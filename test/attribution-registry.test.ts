// The on-chain Builder Codes registry (issue 15): flashgate follows the registry's events and shows, for
// each code, whether and since when it is registered there, its owner and payout address; in the stats,
// the leaderboard, `GET /v1/builder-codes/{code}` and GraphQL. Register, transfer and payout changes are
// followed, a reorg undoes them, and a gateway whose index starts above the registrations reads them from
// the upstream.
import { sql } from 'drizzle-orm'
import { type Address, createPublicClient, createWalletClient, encodeFunctionData, type Hex, http } from 'viem'
import { foundry } from 'viem/chains'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { attributionSuffix } from '../src/attribution/index.js'
import { registryAbi, registryTokenId } from '../src/attribution/registry.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { REGISTRY_DEPLOY_BYTECODE } from '../src/devnet/registry-contract.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

const [ALICE, BOB, CAROL, DAVE] = DEV_ACCOUNTS as unknown as [
  (typeof DEV_ACCOUNTS)[number],
  (typeof DEV_ACCOUNTS)[number],
  (typeof DEV_ACCOUNTS)[number],
  (typeof DEV_ACCOUNTS)[number],
]

let anvil: Anvil
let registry: Address
const databases: TestDatabase[] = []
const gateways: TestGateway[] = []
let gateway: TestGateway

const publicClient = () => createPublicClient({ chain: foundry, transport: http(anvil.rpcUrl) })

async function send(from: (typeof DEV_ACCOUNTS)[number], request: { to: Address; data?: Hex; dataSuffix?: Hex }) {
  const wallet = createWalletClient({ account: from, chain: foundry, transport: http(anvil.rpcUrl) })
  const hash = await wallet.sendTransaction({ ...request, gas: 300_000n })
  const receipt = await publicClient().waitForTransactionReceipt({ hash, pollingInterval: 20 })
  expect(receipt.status).toBe('success')
  return receipt
}
const register = (code: string, owner: Address, payout: Address) =>
  send(ALICE, { to: registry, data: encodeFunctionData({ abi: registryAbi, functionName: 'register', args: [code, owner, payout] }) })

async function startGateway(options: { startBlock?: string; builderCodeRegistry?: string; database?: TestDatabase } = {}) {
  const database = options.database ?? (await createTestDatabase())
  if (options.database === undefined) databases.push(database)
  const started = await startTestGateway({
    upstreamRpc: anvil.rpcUrl,
    databaseUrl: database.databaseUrl,
    builderCodeRegistry: options.builderCodeRegistry ?? registry,
    startBlock: options.startBlock,
  })
  gateways.push(started)
  return { gateway: started, database }
}

async function getJson(base: TestGateway, path: string) {
  const response = await fetch(`${base.url}${path}`)
  return { status: response.status, body: (await response.json()) as any }
}

beforeAll(async () => {
  anvil = await startAnvil()
  const wallet = createWalletClient({ account: ALICE, chain: foundry, transport: http(anvil.rpcUrl) })
  const hash = await wallet.deployContract({ abi: registryAbi, bytecode: REGISTRY_DEPLOY_BYTECODE })
  registry = (await publicClient().waitForTransactionReceipt({ hash })).contractAddress!
  gateway = (await startGateway()).gateway
})

afterAll(async () => {
  for (const started of gateways) await started.stop().catch(() => {})
  await anvil?.stop()
  for (const database of databases) await database.drop()
})

describe('the on-chain registry', () => {
  let registeredBlock: number

  test('a registration shows in the code, its stats, the leaderboard and GraphQL; codes the registry cannot hold are marked', async () => {
    registeredBlock = Number((await register('agent_one', BOB.address, CAROL.address)).blockNumber)
    await send(DAVE, { to: `0x${'77'.repeat(20)}`, dataSuffix: attributionSuffix(['agent_one']) })
    await send(DAVE, { to: `0x${'77'.repeat(20)}`, dataSuffix: attributionSuffix(['Not-Valid']) })
    await waitForSameHead(gateway, anvil.rpcUrl)
    const timestamp = Number((await publicClient().getBlock({ blockNumber: BigInt(registeredBlock) })).timestamp)
    const onChain = {
      registry: expect.stringMatching(new RegExp(`^${registry}$`, 'i')),
      validCode: true,
      registered: true,
      tokenId: `0x${registryTokenId('agent_one').toString(16).padStart(64, '0')}`,
      registeredBlock,
      registeredAt: timestamp,
      owner: BOB.address,
      payoutAddress: CAROL.address,
      complete: true,
    }
    const code = await getJson(gateway, '/v1/builder-codes/agent_one')
    expect(code).toMatchObject({ status: 200, body: { builderCode: 'agent_one', registered: false, seen: true, onChain } })
    expect((await getJson(gateway, '/v1/builder-codes/agent_one/stats')).body).toMatchObject({ onChain, confirmed: { transactions: 1 } })

    const invalid = await getJson(gateway, '/v1/builder-codes/Not-Valid')
    expect(invalid.body.onChain).toMatchObject({ validCode: false, registered: false, owner: null })

    const board = (await getJson(gateway, '/v1/builder-codes')).body.builderCodes as {
      builderCode: string
      onChain: { registered: boolean; validCode: boolean }
    }[]
    expect(board.find((entry) => entry.builderCode === 'agent_one')?.onChain).toMatchObject({ registered: true, owner: BOB.address })
    expect(board.find((entry) => entry.builderCode === 'Not-Valid')?.onChain).toMatchObject({ registered: false, validCode: false })

    // Registered on chain, never seen nor registered here: known all the same.
    await register('quiet_code', ALICE.address, ALICE.address)
    await waitForSameHead(gateway, anvil.rpcUrl)
    expect(await getJson(gateway, '/v1/builder-codes/quiet_code')).toMatchObject({
      status: 200,
      body: { seen: false, onChain: { registered: true, owner: ALICE.address } },
    })
    expect((await getJson(gateway, '/v1/builder-codes/quiet_code/stats')).status).toBe(200)
    expect((await getJson(gateway, '/v1/builder-codes/never_seen')).status).toBe(404)

    const graphql = await fetch(`${gateway.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        query:
          '{ builderCode(code: "agent_one") { code onChain { registered owner payoutAddress registeredBlock tokenId } } builderCodes { code onChain { registered validCode } } }',
      }),
    })
    const { data, errors } = (await graphql.json()) as { data: any; errors?: unknown }
    expect(errors).toBeUndefined()
    expect(data.builderCode.onChain).toEqual({
      registered: true,
      owner: BOB.address,
      payoutAddress: CAROL.address,
      registeredBlock: String(registeredBlock),
      tokenId: onChain.tokenId,
    })
    expect(data.builderCodes).toContainEqual({ code: 'Not-Valid', onChain: { registered: false, validCode: false } })
  })

  test('a transfer and a payout change are followed', async () => {
    const tokenId = registryTokenId('agent_one')
    await send(BOB, { to: registry, data: encodeFunctionData({ abi: registryAbi, functionName: 'transferFrom', args: [BOB.address, DAVE.address, tokenId] }) })
    await send(DAVE, { to: registry, data: encodeFunctionData({ abi: registryAbi, functionName: 'updatePayoutAddress', args: ['agent_one', DAVE.address] }) })
    await waitForSameHead(gateway, anvil.rpcUrl)
    expect((await getJson(gateway, '/v1/builder-codes/agent_one')).body.onChain).toMatchObject({
      registered: true,
      owner: DAVE.address,
      payoutAddress: DAVE.address,
      registeredBlock,
    })
  })

  test('a reorg undoes the registrations, transfers and payout changes of the blocks it removes', async () => {
    const snapshot = await anvilCall<Hex>(anvil.rpcUrl, 'evm_snapshot')
    await register('short_lived', BOB.address, BOB.address)
    await send(DAVE, { to: registry, data: encodeFunctionData({ abi: registryAbi, functionName: 'updatePayoutAddress', args: ['agent_one', CAROL.address] }) })
    await waitForSameHead(gateway, anvil.rpcUrl)
    expect((await getJson(gateway, '/v1/builder-codes/short_lived')).status).toBe(200)
    expect((await getJson(gateway, '/v1/builder-codes/agent_one')).body.onChain.payoutAddress).toBe(CAROL.address)
    expect(await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])).toBe(true)
    for (let index = 0; index < 4; index++) await send(CAROL, { to: `0x${'66'.repeat(20)}` })
    await waitForSameHead(gateway, anvil.rpcUrl)
    expect((await getJson(gateway, '/v1/builder-codes/short_lived')).status).toBe(404)
    expect((await getJson(gateway, '/v1/builder-codes/agent_one')).body.onChain).toMatchObject({ owner: DAVE.address, payoutAddress: DAVE.address })
  })

  test('an index that starts above the registrations reads them from the upstream; turning the registry off and on again starts over', async () => {
    const head = await waitForSameHead(gateway, anvil.rpcUrl)
    const late = await startGateway({ startBlock: String(head - 1) })
    await waitForSameHead(late.gateway, anvil.rpcUrl)
    const expected = (await getJson(gateway, '/v1/builder-codes/agent_one')).body.onChain
    for (const deadline = Date.now() + 20_000; ; ) {
      const { body } = await getJson(late.gateway, '/v1/builder-codes/agent_one')
      if (body.onChain?.complete === true) {
        expect(body.onChain).toEqual(expected)
        break
      }
      if (Date.now() > deadline) throw new Error(`not read below the index: ${JSON.stringify(body)}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect((await getJson(late.gateway, '/v1/builder-codes/quiet_code')).body.onChain).toMatchObject({ registered: true, owner: ALICE.address })

    // Off: no registry, no events kept; a code known only from the registry is unknown again.
    await late.gateway.stop()
    const off = await startGateway({ database: late.database, builderCodeRegistry: 'off' })
    const events = async () =>
      ((await off.gateway.db.query<{ count: number }>(sql`select count(*)::int as count from builder_code_registry_events`)) as [{ count: number }])[0].count
    for (const deadline = Date.now() + 20_000; (await events()) > 0; ) {
      if (Date.now() > deadline) throw new Error('the registry is still followed')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect((await getJson(off.gateway, '/v1/builder-codes/quiet_code')).status).toBe(404)
    await off.gateway.stop()
    // On again: everything read again, the same answer.
    const again = await startGateway({ database: late.database })
    for (const deadline = Date.now() + 20_000; ; ) {
      const { body } = await getJson(again.gateway, '/v1/builder-codes/agent_one')
      if (body.onChain?.complete === true) {
        expect(body.onChain).toEqual(expected)
        break
      }
      if (Date.now() > deadline) throw new Error(`not read again: ${JSON.stringify(body)}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  })
})
