// Smart-account agents (issue 15): real EntryPoint v0.7 and SimpleAccount bytecode from the published
// @account-abstraction/contracts artifacts, on the devnet; a bundler key sends handleOps with user
// operations whose callData ends in an ERC-8021 suffix. flashgate attributes each operation to its smart
// account (never to the bundler), with the gas the EntryPoint reported for it: pending first, then
// confirmed, never both at once.
import { execFile } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { type Address, concat, createPublicClient, createWalletClient, decodeEventLog, type Hex, http } from 'viem'
import { entryPoint07Abi, entryPoint07Address } from 'viem/account-abstraction'
import { afterAll, beforeAll, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { attributionSuffix } from '../src/attribution/index.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { deploySmartAccounts, entryPointNonce, executeCall, type SmartAccount, signedUserOperation } from '../src/devnet/smart-accounts.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, DEVNET_CHAIN } from './fixtures/flashblocks.js'
import { startTestGateway } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

const CHAIN_ID = 31337
const DEPLOYER = DEV_ACCOUNTS[0]!
const BUNDLER = DEV_ACCOUNTS[4]!
const RECEIVER = `0x${'5e'.repeat(20)}` as Address

let devnet: Devnet
let database: TestDatabase
let gateway: Gateway
let accounts: SmartAccount[]

const publicClient = () => createPublicClient({ chain: DEVNET_CHAIN, transport: http(devnet.rpcUrl) })
const walletOf = (account: (typeof DEV_ACCOUNTS)[number]) => createWalletClient({ account, chain: DEVNET_CHAIN, transport: http(devnet.rpcUrl) })

async function mined(hash: Hex) {
  const receipt = await publicClient().waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 20_000 })
  expect(receipt.status).toBe('success')
  return receipt
}

type Figures = { transactions: number; userOperations: number; reach: number; userOperationReach: number; gasUsed: string; userOperationGasUsed: string }
type SeriesPoint = { timestamp: number; transactions: number; userOperations: number; reach: number; gasUsed: string }
type Stats = { confirmed: Figures; pending: Figures; series: { points: SeriesPoint[] } }

async function stats(code: string): Promise<Stats | null> {
  const response = await fetch(`${gateway.url}/v1/builder-codes/${code}/stats`)
  if (response.status === 404) return null
  expect(response.status).toBe(200)
  return (await response.json()) as Stats
}

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 100 })
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
  // The EntryPoint at its canonical address and two funded SimpleAccounts, from the published artifacts.
  accounts = await deploySmartAccounts({
    publicClient: publicClient(),
    walletClient: createWalletClient({ chain: DEVNET_CHAIN, transport: http(devnet.rpcUrl) }),
    operator: DEPLOYER.address,
    setCode: (address, code) => anvilCall(devnet.rpcUrl, 'anvil_setCode', [address, code]).then(() => undefined),
    count: 2,
    mined,
  })
}, 60_000)

afterAll(async () => {
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
})

const execFileAsync = promisify(execFile)

test('user operations with suffixes are attributed to their smart accounts, pending first, then confirmed, with their own gas', async () => {
  const [firstAccount, secondAccount] = accounts as [SmartAccount, SmartAccount]
  const [first, second] = [firstAccount.address.toLowerCase() as Address, secondAccount.address.toLowerCase() as Address]
  const [firstNonce, secondNonce] = await Promise.all([entryPointNonce(publicClient(), first), entryPointNonce(publicClient(), second)])
  const userOperation = (account: SmartAccount, nonce: bigint, callData: Hex) => signedUserOperation(account, CHAIN_ID, nonce, callData)
  const execute = executeCall
  const operations = [
    // One account, two operations in the bundle, one code.
    await userOperation(firstAccount, firstNonce, concat([execute(RECEIVER, 1n, '0x'), attributionSuffix(['agent_one'])])),
    await userOperation(firstAccount, firstNonce + 1n, concat([execute(RECEIVER, 2n, '0x'), attributionSuffix(['agent_one'])])),
    // An operation whose call reverts (the EntryPoint has no such function): still paid for, still attributed.
    await userOperation(secondAccount, secondNonce, concat([execute(entryPoint07Address, 0n, '0xdeadbeef'), attributionSuffix(['agent_two'])])),
    // No suffix: not attributed.
    await userOperation(secondAccount, secondNonce + 1n, execute(RECEIVER, 3n, '0x')),
  ]

  // Right after a block is sealed, so that the bundle spends most of a slot pre-confirmed.
  const sealed = await anvilCall<Hex>(devnet.rpcUrl, 'eth_blockNumber')
  while ((await anvilCall<Hex>(devnet.rpcUrl, 'eth_blockNumber')) === sealed) await sleep(10)
  // The bundle carries a suffix of its own too: the bundler's code counts the transaction, not the operations.
  const bundle = await walletOf(BUNDLER).writeContract({
    address: entryPoint07Address,
    abi: entryPoint07Abi,
    functionName: 'handleOps',
    args: [operations, BUNDLER.address],
    gas: 3_000_000n,
    dataSuffix: attributionSuffix(['bundler_co']),
  })

  const seen: { one: Stats | null; two: Stats | null }[] = []
  for (const deadline = Date.now() + 20_000; ; ) {
    const snapshot = { one: await stats('agent_one'), two: await stats('agent_two') }
    seen.push(snapshot)
    if ((snapshot.one?.confirmed.userOperations ?? 0) === 2 && (snapshot.two?.confirmed.userOperations ?? 0) === 1) break
    if (Date.now() > deadline) throw new Error(`not confirmed in time: ${JSON.stringify(snapshot)}`)
    await sleep(20)
  }
  // Pending first, and never counted in both at once.
  expect(seen.some((snapshot) => (snapshot.one?.pending.userOperations ?? 0) === 2 && snapshot.one!.confirmed.userOperations === 0)).toBe(true)
  for (const snapshot of seen) {
    expect((snapshot.one?.pending.userOperations ?? 0) + (snapshot.one?.confirmed.userOperations ?? 0)).toBeLessThanOrEqual(2)
    expect((snapshot.two?.pending.userOperations ?? 0) + (snapshot.two?.confirmed.userOperations ?? 0)).toBeLessThanOrEqual(1)
  }

  // The gas of each operation is what the EntryPoint reported in the bundle's receipt.
  const receipt = await publicClient().getTransactionReceipt({ hash: bundle })
  const reported = receipt.logs
    .filter((log) => log.address.toLowerCase() === entryPoint07Address.toLowerCase())
    .flatMap((log) => {
      try {
        const event = decodeEventLog({ abi: entryPoint07Abi, topics: log.topics, data: log.data })
        return event.eventName === 'UserOperationEvent' ? [event.args] : []
      } catch {
        return []
      }
    })
  expect(reported).toHaveLength(4)
  const gasOf = (sender: Address) => reported.filter((event) => event.sender.toLowerCase() === sender).reduce((sum, event) => sum + event.actualGasUsed, 0n)
  expect(reported.find((event) => event.sender.toLowerCase() === second && event.nonce === secondNonce)?.success).toBe(false)

  const one = (await stats('agent_one'))!
  expect(one.confirmed).toMatchObject({
    transactions: 0,
    userOperations: 2,
    reach: 1,
    userOperationReach: 1,
    userOperationGasUsed: gasOf(first).toString(),
    gasUsed: gasOf(first).toString(),
  })
  const two = (await stats('agent_two'))!
  const revertedGas = reported.find((event) => event.sender.toLowerCase() === second && event.nonce === secondNonce)!.actualGasUsed
  expect(two.confirmed).toMatchObject({ transactions: 0, userOperations: 1, reach: 1, userOperationReach: 1, userOperationGasUsed: revertedGas.toString() })
  // Counted like an operation that succeeded: the answer has nothing that says it reverted (README says so).
  expect(JSON.stringify(two)).not.toMatch(/success|fail|revert/i)
  // The bundler's own suffix: one transaction, its sender the bundler, its gas the whole bundle's.
  const bundler = (await stats('bundler_co'))!
  expect(bundler.confirmed).toMatchObject({ transactions: 1, userOperations: 0, reach: 1, userOperationReach: 0, gasUsed: receipt.gasUsed.toString() })

  // The series counts as the figures do: user operations apart from transactions, in REST and GraphQL alike.
  const sum = (points: SeriesPoint[], key: 'transactions' | 'userOperations') => points.reduce((total, point) => total + point[key], 0)
  for (const [code, figures] of [
    ['agent_one', one],
    ['agent_two', two],
    ['bundler_co', bundler],
  ] as const) {
    const points = figures.series.points
    expect({ transactions: sum(points, 'transactions'), userOperations: sum(points, 'userOperations') }, code).toEqual({
      transactions: figures.confirmed.transactions,
      userOperations: figures.confirmed.userOperations,
    })
    const answer = (await (
      await fetch(`${gateway.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          query: `{ builderCode(code: "${code}") { stats { series { points { timestamp transactions userOperations reach gasUsed } } } } }`,
        }),
      })
    ).json()) as { data: { builderCode: { stats: { series: { points: (Omit<SeriesPoint, 'timestamp'> & { timestamp: string })[] } } } } }
    // The buckets with anything in them: a head that moves into the next bucket between the two reads shifts the rest.
    const filled = <point extends { transactions: number; userOperations: number }>(list: point[]) =>
      list.filter((point) => point.transactions + point.userOperations > 0)
    expect(filled(answer.data.builderCode.stats.series.points), code).toEqual(filled(points).map((point) => ({ ...point, timestamp: String(point.timestamp) })))
  }

  // `flashgate attribution` names what the index counts: the bundle's own code, then its operations'.
  const cli = await execFileAsync('node', ['bin/flashgate.js', 'attribution', bundle, '--url', gateway.url])
  expect(cli.stdout.trim().split('\n')).toEqual(['bundler_co', 'agent_one', 'agent_two'])

  // The leaderboard ranks by transactions and operations.
  const board = (await (await fetch(`${gateway.url}/v1/builder-codes?limit=10`)).json()) as { builderCodes?: unknown[] } | unknown[]
  const entries = (Array.isArray(board) ? board : (board.builderCodes ?? [])) as { builderCode: string; transactions: number; userOperations: number }[]
  expect(entries.find((entry) => entry.builderCode === 'agent_one')).toMatchObject({ transactions: 0, userOperations: 2 })

  // A gateway told that the chain's EntryPoint v0.7 lives elsewhere reads the same bundle for its own suffix only.
  const elsewhere = await createTestDatabase()
  const other = await startTestGateway({
    upstreamRpc: devnet.rpcUrl,
    databaseUrl: elsewhere.databaseUrl,
    entryPoints: '0.7=0x0000000000000000000000000000000000e0e0e0',
  })
  try {
    await waitForSameHead(other, devnet.rpcUrl)
    expect((await fetch(`${other.url}/v1/builder-codes/agent_one/stats`)).status).toBe(404)
    expect(((await (await fetch(`${other.url}/v1/builder-codes/bundler_co/stats`)).json()) as Stats).confirmed).toMatchObject({
      transactions: 1,
      userOperations: 0,
    })
  } finally {
    await other.stop()
    await elsewhere.drop()
  }
})
