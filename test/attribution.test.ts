import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { sql } from 'drizzle-orm'
import { Attribution } from 'ox/erc8021'
import { concat, createPublicClient, createWalletClient, type Hex, http } from 'viem'
import { entryPoint07Abi, entryPoint07Address } from 'viem/account-abstraction'
import { foundry } from 'viem/chains'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { attributionSuffix } from '../src/attribution/index.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { deploySmartAccounts, entryPointNonce, executeCall, signedUserOperation } from '../src/devnet/smart-accounts.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { startTestGateway } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

const run = promisify(execFile)
const UNREGISTERED = 'ext_wallet'

let anvil: Anvil
let database: TestDatabase
let gateway: Gateway
const codes: string[] = []

async function getJson(path: string) {
  const response = await fetch(`${gateway.url}${path}`)
  return { status: response.status, body: (await response.json()) as any }
}

/** Sends from dev account `from` with viem's `dataSuffix`, on automining anvil; resolves with the hash once mined. */
async function send(from: number, dataSuffix: Hex | undefined, options: { data?: Hex; value?: bigint; to?: Hex } = {}): Promise<Hex> {
  const wallet = createWalletClient({ account: DEV_ACCOUNTS[from]!, chain: foundry, transport: http(anvil.rpcUrl) })
  const hash = await wallet.sendTransaction({ to: options.to ?? `0x${'77'.repeat(20)}`, data: options.data, value: options.value ?? 5n, dataSuffix })
  await createPublicClient({ chain: foundry, transport: http(anvil.rpcUrl) }).waitForTransactionReceipt({ hash, pollingInterval: 20 })
  return hash
}

beforeAll(async () => {
  anvil = await startAnvil()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, registrationRateLimit: 0 })
  for (const account of DEV_ACCOUNTS.slice(1, 3)) {
    const response = await fetch(`${gateway.url}/v1/agents/builder-codes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ walletAddress: account.address }),
    })
    codes.push(((await response.json()) as { builderCode: string }).builderCode)
  }
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('confirmed attribution', () => {
  let hashes: Hex[] = []

  test('transactions sent with dataSuffix are counted per code, with reach, gas, suffix gas and value', async () => {
    const [first, second] = codes as [string, string]
    hashes = [
      await send(1, attributionSuffix([first]), { value: 10n }),
      await send(1, attributionSuffix([first]), { data: '0xdeadbeef', to: `0x${'88'.repeat(20)}`, value: 20n }),
      await send(2, attributionSuffix([first, second]), { value: 30n }),
      // A wallet's code stacked after the agent's: nobody registered it here, it is kept all the same.
      await send(2, concat([attributionSuffix([second]), Attribution.toDataSuffix({ walletCode: UNREGISTERED })])),
      await send(3, undefined),
    ]
    await waitForSameHead(gateway, anvil.rpcUrl)
    const { status, body } = await getJson(`/v1/builder-codes/${first}/stats?interval=minute&points=5`)
    expect(status).toBe(200)
    const receipts = await Promise.all(hashes.slice(0, 3).map((hash) => anvilCall<{ gasUsed: Hex }>(anvil.rpcUrl, 'eth_getTransactionReceipt', [hash])))
    const suffixGas = (suffix: Hex) => Buffer.from(suffix.slice(2), 'hex').reduce((gas, byte) => gas + (byte === 0 ? 4 : 16), 0)
    expect(body).toMatchObject({
      builderCode: first,
      registered: true,
      walletAddress: DEV_ACCOUNTS[1]!.address,
      confirmed: {
        transactions: 3,
        reach: 2,
        contracts: 2,
        gasUsed: String(receipts.reduce((sum, receipt) => sum + Number(receipt.gasUsed), 0)),
        suffixGas: String(2 * suffixGas(attributionSuffix([first])) + suffixGas(attributionSuffix([first, second]))),
        value: '60',
      },
      pending: { transactions: 0 },
      series: { interval: 'minute', bucketSeconds: 60 },
    })
    expect(body.series.points).toHaveLength(5)
    expect(body.series.points.reduce((sum: number, point: { transactions: number }) => sum + point.transactions, 0)).toBe(3)
    expect(body.confirmed.firstSeen).toBeLessThanOrEqual(body.confirmed.lastSeen)
  })

  test('a code seen on chain that nobody registered is kept, marked unregistered', async () => {
    const { status, body } = await getJson(`/v1/builder-codes/${UNREGISTERED}/stats`)
    expect(status).toBe(200)
    expect(body).toMatchObject({ builderCode: UNREGISTERED, registered: false, walletAddress: null, confirmed: { transactions: 1, reach: 1 } })
  })

  test('the leaderboard ranks codes by transactions', async () => {
    const { body } = await getJson('/v1/builder-codes?limit=10')
    expect(
      body.builderCodes.map((entry: { builderCode: string; transactions: number; registered: boolean }) => [
        entry.builderCode,
        entry.transactions,
        entry.registered,
      ]),
    ).toEqual([
      [codes[0], 3, true],
      [codes[1], 2, true],
      [UNREGISTERED, 1, false],
    ])
  })

  test('a reorg removes the attributions of the blocks it undoes', async () => {
    const snapshot = await anvilCall<Hex>(anvil.rpcUrl, 'evm_snapshot')
    await send(1, attributionSuffix([codes[0]!]))
    await send(1, attributionSuffix([codes[0]!]))
    await waitForSameHead(gateway, anvil.rpcUrl)
    expect((await getJson(`/v1/builder-codes/${codes[0]}/stats`)).body.confirmed.transactions).toBe(5)
    expect(await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])).toBe(true)
    // A longer competing branch without attribution.
    for (let index = 0; index < 3; index++) await send(4, undefined)
    await waitForSameHead(gateway, anvil.rpcUrl)
    expect((await getJson(`/v1/builder-codes/${codes[0]}/stats`)).body.confirmed.transactions).toBe(3)
    const [row] = await gateway.db.query<{ count: number }>(sql`select count(*)::int as count from attributions where code = ${codes[0]!}`)
    expect(row!.count).toBe(3)
  })

  test('flashgate attribution <txHash> prints the codes of a transaction fetched through the gateway', async () => {
    const { stdout } = await run('node', ['bin/flashgate.js', 'attribution', hashes[3]!, '--url', gateway.url])
    expect(stdout.trim().split('\n')).toEqual([UNREGISTERED, codes[1]])
    await expect(run('node', ['bin/flashgate.js', 'attribution', hashes[4]!, '--url', gateway.url])).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('carries no ERC-8021 attribution'),
    })
  })

  test('flashgate suffix <code…> prints the suffix that viem appends', async () => {
    const { stdout } = await run('node', ['bin/flashgate.js', 'suffix', 'bc_abcd1234', 'bc_efgh5678'])
    expect(stdout.trim()).toBe(Attribution.toDataSuffix({ codes: ['bc_abcd1234', 'bc_efgh5678'] }))
  })
})

describe('schema 2 roles', () => {
  test('a schema 2 suffix counts each code under its role (app, wallet, service); schemas 0 and 1 under code', async () => {
    const suffix = Attribution.toDataSuffix({ appCode: 'role_app', walletCode: 'role_wallet', serviceCodes: ['role_svc'], metadata: { source: 'test' } })
    await send(3, suffix)
    await send(3, attributionSuffix(['role_app']))
    await waitForSameHead(gateway, anvil.rpcUrl)
    const byRole = async (code: string) => (await getJson(`/v1/builder-codes/${code}/stats`)).body.confirmed.byRole
    expect(await byRole('role_app')).toEqual({ app: 1, wallet: 0, service: 0, code: 1 })
    expect(await byRole('role_wallet')).toEqual({ app: 0, wallet: 1, service: 0, code: 0 })
    expect(await byRole('role_svc')).toEqual({ app: 0, wallet: 0, service: 1, code: 0 })
  })
})

describe('user operations and reorgs', () => {
  test('a reorg removes the user operations of the blocks it undoes', async () => {
    const client = createPublicClient({ chain: foundry, transport: http(anvil.rpcUrl) })
    const walletClient = createWalletClient({ chain: foundry, transport: http(anvil.rpcUrl) })
    const mined = (hash: Hex) => client.waitForTransactionReceipt({ hash, pollingInterval: 20 })
    const setCode = async (address: Hex, code: Hex) => void (await anvilCall(anvil.rpcUrl, 'anvil_setCode', [address, code]))
    const [account] = await deploySmartAccounts({ publicClient: client, walletClient, operator: DEV_ACCOUNTS[0]!.address, setCode, count: 1, mined })
    const bundle = async () => {
      const nonce = await entryPointNonce(client, account!.address)
      const operation = await signedUserOperation(
        account!,
        foundry.id,
        nonce,
        concat([executeCall(`0x${'55'.repeat(20)}`, 1n, '0x'), attributionSuffix(['reorg_op'])]),
      )
      await mined(
        await walletClient.writeContract({
          account: DEV_ACCOUNTS[0]!.address,
          chain: foundry,
          address: entryPoint07Address,
          abi: entryPoint07Abi,
          functionName: 'handleOps',
          args: [[operation], DEV_ACCOUNTS[0]!.address],
          gas: 2_000_000n,
        }),
      )
    }
    await bundle()
    await waitForSameHead(gateway, anvil.rpcUrl)
    const snapshot = await anvilCall<Hex>(anvil.rpcUrl, 'evm_snapshot')
    await bundle()
    await waitForSameHead(gateway, anvil.rpcUrl)
    expect((await getJson('/v1/builder-codes/reorg_op/stats')).body.confirmed).toMatchObject({ userOperations: 2, userOperationReach: 1 })
    expect(await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])).toBe(true)
    for (let index = 0; index < 3; index++) await send(4, undefined)
    await waitForSameHead(gateway, anvil.rpcUrl)
    expect((await getJson('/v1/builder-codes/reorg_op/stats')).body.confirmed).toMatchObject({ userOperations: 1, userOperationReach: 1 })
  })
})

describe('stats errors', () => {
  test('an unknown code: 404; a malformed code or query: 400; a wrong method: 405', async () => {
    expect(await getJson('/v1/builder-codes/bc_nobody00/stats')).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } })
    expect(await getJson(`/v1/builder-codes/${'x'.repeat(33)}/stats`)).toMatchObject({ status: 400, body: { error: { code: 'invalid_builder_code' } } })
    expect(await getJson(`/v1/builder-codes/${codes[0]}/stats?interval=week`)).toMatchObject({ status: 400, body: { error: { code: 'invalid_query' } } })
    expect(await getJson(`/v1/builder-codes/${codes[0]}/stats?points=0`)).toMatchObject({ status: 400, body: { error: { code: 'invalid_query' } } })
    // Only decimal digits are a number; a parameter given twice is refused whichever comes first.
    for (const query of [
      'points=0x10',
      'points=1e1',
      'points=%2010',
      'points=10.0',
      'points=20&points=abc',
      'points=abc&points=20',
      'interval=minute&interval=year',
      'interval=year&interval=minute',
    ])
      expect(await getJson(`/v1/builder-codes/${codes[0]}/stats?${query}`), query).toMatchObject({ status: 400, body: { error: { code: 'invalid_query' } } })
    expect(await getJson('/v1/builder-codes?limit=0x5')).toMatchObject({ status: 400, body: { error: { code: 'invalid_query' } } })
    expect(await getJson(`/v1/builder-codes/${codes[0]}/stats?points=010`)).toMatchObject({ status: 200 })
    expect(await getJson('/v1/builder-codes/%E0%A4%A/stats')).toMatchObject({ status: 400 })
    expect(await getJson('/v1/nothing-here')).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } })
    const post = await fetch(`${gateway.url}/v1/builder-codes/${codes[0]}/stats`, { method: 'POST' })
    expect(post.status).toBe(405)
    expect(post.headers.get('allow')).toBe('GET, HEAD')
  })
})
