import { Attribution } from 'ox/erc8021'
import { concat, createPublicClient, createWalletClient, type Hex, http } from 'viem'
import { foundry } from 'viem/chains'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { attributionSuffix } from '../src/attribution/index.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { startTestGateway } from './fixtures/gateway.js'
import { waitForSameHead } from './fixtures/sync.js'

const UNREGISTERED = 'ext_wallet'

let anvil: Anvil
let database: TestDatabase
let gateway: Gateway
/** Codes of dev accounts 1, 2 and 3; account 3 never sends an attributed transaction. */
const codes: string[] = []

async function getJson(path: string) {
  const response = await fetch(`${gateway.url}${path}`)
  return { status: response.status, body: (await response.json()) as any }
}

/** One GraphQL request to the running gateway's `/graphql`: the whole JSON answer. */
async function graphql(query: string, variables?: Record<string, unknown>) {
  const response = await fetch(`${gateway.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  })
  return (await response.json()) as { data?: Record<string, any> | null; errors?: { message: string; extensions?: { code?: string } }[] }
}

/** Sends from dev account `from` with viem's `dataSuffix`, on automining anvil; resolves with the hash once mined. */
async function send(from: number, dataSuffix: Hex | undefined, options: { data?: Hex; value?: bigint; to?: Hex } = {}): Promise<Hex> {
  const wallet = createWalletClient({ account: DEV_ACCOUNTS[from]!, chain: foundry, transport: http(anvil.rpcUrl) })
  const hash = await wallet.sendTransaction({ to: options.to ?? `0x${'77'.repeat(20)}`, data: options.data, value: options.value ?? 5n, dataSuffix })
  await createPublicClient({ chain: foundry, transport: http(anvil.rpcUrl) }).waitForTransactionReceipt({ hash, pollingInterval: 20 })
  return hash
}

const FIGURES = `transactions userOperations reach userOperationReach contracts gasUsed userOperationGasUsed suffixGas value byRole { app wallet service code } firstSeen lastSeen`
const STATS = `head confirmed { ${FIGURES} } pending { ${FIGURES} } series { interval bucketSeconds points { timestamp transactions userOperations reach gasUsed } }`

const decimal = (value: number | null) => (value === null ? null : String(value))

function expectedFigures(figures: any) {
  return { ...figures, firstSeen: decimal(figures.firstSeen), lastSeen: decimal(figures.lastSeen) }
}

/** A REST stats answer in the shape GraphQL gives it: numbers that may outgrow 2^31 as decimal strings, enum case. */
function expectedBuilderCode(rest: any, defaults: any) {
  const stats = (body: any) => ({
    head: decimal(body.head),
    confirmed: expectedFigures(body.confirmed),
    pending: expectedFigures(body.pending),
    series: {
      interval: body.series.interval.toUpperCase(),
      bucketSeconds: body.series.bucketSeconds,
      points: body.series.points.map((point: any) => ({ ...point, timestamp: String(point.timestamp) })),
    },
  })
  return { code: rest.builderCode, wallet: rest.walletAddress, registered: rest.registered, stats: stats(rest), defaultStats: stats(defaults) }
}

const BUILDER_CODE = `code wallet registered stats(interval: MINUTE, points: 5) { ${STATS} } defaultStats: stats { ${STATS} }`

beforeAll(async () => {
  anvil = await startAnvil()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, registrationRateLimit: 0 })
  for (const account of DEV_ACCOUNTS.slice(1, 4)) {
    const response = await fetch(`${gateway.url}/v1/agents/builder-codes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ walletAddress: account.address }),
    })
    expect(response.status).toBe(201)
    codes.push(((await response.json()) as { builderCode: string }).builderCode)
  }
  const [first, second] = codes as [string, string]
  await send(1, attributionSuffix([first]), { value: 10n })
  await send(1, attributionSuffix([first]), { data: '0xdeadbeef', to: `0x${'88'.repeat(20)}`, value: 20n })
  await send(2, attributionSuffix([first, second]), { value: 30n })
  // A wallet's code stacked after the agent's: nobody registered it here.
  await send(2, concat([attributionSuffix([second]), Attribution.toDataSuffix({ walletCode: UNREGISTERED })]))
  await send(4, undefined)
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('GraphQL builderCode answers what REST answers for the same code', () => {
  test('by code: registered codes with and without transactions, and a code seen only on chain', async () => {
    for (const code of [...codes, UNREGISTERED]) {
      const rest = await getJson(`/v1/builder-codes/${encodeURIComponent(code)}/stats?interval=minute&points=5`)
      const defaults = await getJson(`/v1/builder-codes/${encodeURIComponent(code)}/stats`)
      expect(rest.status, code).toBe(200)
      const answer = await graphql(`query ($code: String!) { builderCode(code: $code) { ${BUILDER_CODE} } }`, { code })
      expect(answer.errors, code).toBeUndefined()
      expect(answer.data!.builderCode, code).toEqual(expectedBuilderCode(rest.body, defaults.body))
    }
    // The figures are those sent above, not merely equal to REST's.
    const first = (
      await graphql(`{ builderCode(code: "${codes[0]}") { stats { confirmed { transactions reach contracts value } pending { transactions } } } }`)
    ).data!
    expect(first.builderCode.stats).toEqual({ confirmed: { transactions: 3, reach: 2, contracts: 2, value: '60' }, pending: { transactions: 0 } })
    const unregistered = (await graphql(`{ builderCode(code: "${UNREGISTERED}") { wallet registered stats { confirmed { transactions } } } }`)).data!
    expect(unregistered.builderCode).toEqual({ wallet: null, registered: false, stats: { confirmed: { transactions: 1 } } })
  })

  test('by wallet: the code REST registered for it, with the same stats as by code', async () => {
    for (const [index, code] of codes.entries()) {
      const wallet = DEV_ACCOUNTS[index + 1]!.address
      const lookup = await getJson(`/v1/agents/builder-codes/${wallet}`)
      expect(lookup).toMatchObject({ status: 200, body: { builderCode: code, walletAddress: wallet } })
      const rest = await getJson(`/v1/builder-codes/${code}/stats?interval=minute&points=5`)
      const defaults = await getJson(`/v1/builder-codes/${code}/stats`)
      // Any case of the address finds the wallet, as with REST.
      for (const given of [wallet, wallet.toLowerCase()]) {
        const answer = await graphql(`query ($wallet: Address!) { builderCode(wallet: $wallet) { ${BUILDER_CODE} } }`, { wallet: given })
        expect(answer.errors).toBeUndefined()
        expect(answer.data!.builderCode).toEqual(expectedBuilderCode(rest.body, defaults.body))
      }
    }
  })

  test('an unknown code or a wallet without a code is null where REST answers 404', async () => {
    const stranger = DEV_ACCOUNTS[4]!.address
    expect((await getJson('/v1/builder-codes/bc_nobody00/stats')).status).toBe(404)
    expect((await getJson(`/v1/agents/builder-codes/${stranger}`)).status).toBe(404)
    const answer = await graphql(`{ byCode: builderCode(code: "bc_nobody00") { code } byWallet: builderCode(wallet: "${stranger}") { code } }`)
    expect(answer).toEqual({ data: { byCode: null, byWallet: null } })
  })

  test('builderCodes(limit) is the REST leaderboard', async () => {
    for (const limit of [1, 2, 10]) {
      const rest = await getJson(`/v1/builder-codes?limit=${limit}`)
      const answer = await graphql(
        `{ builderCodes(limit: ${limit}) { code registered transactions userOperations pendingTransactions reach gasUsed lastSeen onChain { registered owner } } }`,
      )
      expect(answer.errors).toBeUndefined()
      expect(answer.data!.builderCodes).toEqual(
        rest.body.builderCodes.map(({ builderCode, lastSeen, ...entry }: any) => ({ code: builderCode, ...entry, lastSeen: decimal(lastSeen) })),
      )
    }
    const ranked = (await graphql(`{ builderCodes { code transactions registered } }`)).data!.builderCodes
    expect(ranked).toEqual([
      { code: codes[0], transactions: 3, registered: true },
      { code: codes[1], transactions: 2, registered: true },
      { code: UNREGISTERED, transactions: 1, registered: false },
    ])
  })
})

describe('GraphQL builderCode errors', () => {
  async function expectError(query: string, code: string, message?: RegExp, variables?: Record<string, unknown>) {
    const answer = await graphql(query, variables)
    const error = answer.errors?.[0]
    expect(error, query).toBeDefined()
    expect(error!.extensions?.code, `${query}: ${error!.message}`).toBe(code)
    if (message) expect(error!.message).toMatch(message)
    // The server keeps serving.
    expect((await graphql(`{ builderCode(code: "${codes[0]}") { registered } }`)).data?.builderCode).toEqual({ registered: true })
  }

  test('both or neither argument, a bad address, a malformed code, an out-of-range points or limit: BAD_USER_INPUT', async () => {
    const wallet = DEV_ACCOUNTS[1]!.address
    await expectError(
      `{ builderCode(wallet: "${wallet}", code: "${codes[0]}") { code } }`,
      'BAD_USER_INPUT',
      /^invalid arguments: give exactly one of wallet and code$/,
    )
    await expectError(`{ builderCode { code } }`, 'BAD_USER_INPUT', /exactly one of wallet and code/)
    await expectError(`{ builderCode(wallet: null, code: null) { code } }`, 'BAD_USER_INPUT', /exactly one of wallet and code/)
    await expectError(`{ builderCode(wallet: "0x1234") { code } }`, 'BAD_USER_INPUT', /Address.*20-byte/)
    await expectError(`query ($wallet: Address) { builderCode(wallet: $wallet) { code } }`, 'BAD_USER_INPUT', /20-byte/, { wallet: '0xnothex' })
    await expectError(`{ builderCode(code: "${'x'.repeat(33)}") { code } }`, 'BAD_USER_INPUT', /invalid argument code: a builder code is 1 to 32/)
    await expectError(`{ builderCode(code: "a,b") { code } }`, 'BAD_USER_INPUT', /without commas/)
    await expectError(`{ builderCode(code: "") { code } }`, 'BAD_USER_INPUT', /builder code/)
    await expectError(`{ builderCode(code: "${codes[0]}") { stats(points: 0) { head } } }`, 'BAD_USER_INPUT', /points/)
    await expectError(`{ builderCode(code: "${codes[0]}") { stats(interval: WEEK) { head } } }`, 'GRAPHQL_VALIDATION_FAILED', /WEEK/)
    await expectError(`{ builderCodes(limit: 101) { code } }`, 'BAD_USER_INPUT', /limit/)
  })

  test('a mixed-case address with a wrong EIP-55 checksum is BAD_USER_INPUT wherever an Address is taken, as REST answers 400', async () => {
    const wallet = DEV_ACCOUNTS[1]!.address
    // One letter's case flipped: still mixed case, no longer the checksum.
    const letter = wallet.slice(2).search(/[a-fA-F]/) + 2
    const flipped = wallet[letter]!
    const misspelled = `${wallet.slice(0, letter)}${flipped === flipped.toLowerCase() ? flipped.toUpperCase() : flipped.toLowerCase()}${wallet.slice(letter + 1)}`
    expect((await getJson(`/v1/agents/builder-codes/${misspelled}`)).status).toBe(400)
    await expectError(`{ builderCode(wallet: "${misspelled}") { code } }`, 'BAD_USER_INPUT', /Address.*EIP-55 checksum/)
    await expectError(`query ($wallet: Address) { builderCode(wallet: $wallet) { code } }`, 'BAD_USER_INPUT', /EIP-55 checksum/, { wallet: misspelled })
    await expectError(`{ account(address: "${misspelled}") { balance } }`, 'BAD_USER_INPUT', /EIP-55 checksum/)
    await expectError(`{ logs(filter: { addresses: ["${misspelled}"] }) { nodes { address } } }`, 'BAD_USER_INPUT', /EIP-55 checksum/)
    // Lower and upper case carry no checksum: the same wallet, as in REST.
    for (const spelling of [wallet, wallet.toLowerCase(), `0x${wallet.slice(2).toUpperCase()}`]) {
      expect((await getJson(`/v1/agents/builder-codes/${spelling}`)).body.builderCode, spelling).toBe(codes[0])
      const answer = await graphql(`query ($wallet: Address) { builderCode(wallet: $wallet) { code wallet } }`, { wallet: spelling })
      expect(answer.errors, spelling).toBeUndefined()
      expect(answer.data!.builderCode, spelling).toEqual({ code: codes[0], wallet })
    }
  })
})
