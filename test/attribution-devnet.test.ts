import { setTimeout as sleep } from 'node:timers/promises'
import { createWalletClient, type Hex, http, parseGwei } from 'viem'
import { afterAll, beforeAll, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { attributionSuffix } from '../src/attribution/index.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, DEVNET_CHAIN } from './fixtures/flashblocks.js'
import { startTestGateway } from './fixtures/gateway.js'
import { anvilCall } from './fixtures/sync.js'

const AGENTS = [1, 2, 3] as const
const TRANSACTIONS_PER_AGENT = 4
const POLL_MS = 20

let devnet: Devnet
let database: TestDatabase
let gateway: Gateway

type Counts = { confirmed: number; pending: number }

async function counts(code: string): Promise<Counts> {
  const response = await fetch(`${gateway.url}/v1/builder-codes/${code}/stats`)
  if (response.status === 404) return { confirmed: 0, pending: 0 }
  const body = (await response.json()) as { confirmed: { transactions: number }; pending: { transactions: number } }
  return { confirmed: body.confirmed.transactions, pending: body.pending.transactions }
}

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 100 })
  database = await createTestDatabase()
  gateway = await startTestGateway({
    upstreamRpc: devnet.rpcUrl,
    flashblocksWs: devnet.flashblocksUrl,
    databaseUrl: database.databaseUrl,
    registrationRateLimit: 0,
  })
})

afterAll(async () => {
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
})

test('agents register and send with dataSuffix: counts move in pending first, then confirmed, equal to what was sent', async () => {
  const codes: string[] = []
  for (const agent of AGENTS) {
    const response = await fetch(`${gateway.url}/v1/agents/builder-codes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ walletAddress: DEV_ACCOUNTS[agent]!.address }),
    })
    expect(response.status).toBe(201)
    codes.push(((await response.json()) as { builderCode: string }).builderCode)
  }

  // Start right after a block is sealed, so that the transactions spend most of a slot pre-confirmed.
  const sealed = await anvilCall<Hex>(devnet.rpcUrl, 'eth_blockNumber')
  while ((await anvilCall<Hex>(devnet.rpcUrl, 'eth_blockNumber')) === sealed) await sleep(10)
  const sends = AGENTS.map(async (agent, index) => {
    const account = DEV_ACCOUNTS[agent]!
    const wallet = createWalletClient({ account, chain: DEVNET_CHAIN, transport: http(devnet.rpcUrl) })
    let nonce = Number(await anvilCall<Hex>(devnet.rpcUrl, 'eth_getTransactionCount', [account.address, 'pending']))
    for (let sent = 0; sent < TRANSACTIONS_PER_AGENT; sent++)
      await wallet.sendTransaction({
        to: `0x${'5e'.repeat(20)}`,
        value: 1n,
        nonce: nonce++,
        gas: 30_000n,
        maxFeePerGas: parseGwei('20'),
        maxPriorityFeePerGas: parseGwei('1'),
        dataSuffix: attributionSuffix([codes[index]!]),
      })
  })

  const history: Counts[][] = []
  const deadline = Date.now() + 20_000
  let allSent = false
  const sent = Promise.all(sends).then(() => {
    allSent = true
  })
  for (;;) {
    const snapshot = await Promise.all(codes.map(counts))
    history.push(snapshot)
    // Never counted twice while a block moves from pending to confirmed.
    for (const { confirmed, pending } of snapshot) expect(confirmed + pending).toBeLessThanOrEqual(TRANSACTIONS_PER_AGENT)
    if (allSent && snapshot.every(({ confirmed, pending }) => confirmed === TRANSACTIONS_PER_AGENT && pending === 0)) break
    if (Date.now() > deadline) throw new Error(`counts did not settle: ${JSON.stringify(snapshot)}`)
    await sleep(POLL_MS)
  }
  await sent

  codes.forEach((_, index) => {
    const seen = history.map((snapshot) => snapshot[index]!)
    // Pending moved before confirmed did: some snapshot shows pre-confirmed transactions not yet confirmed.
    const firstPending = seen.findIndex(({ pending }) => pending > 0)
    const firstConfirmed = seen.findIndex(({ confirmed }) => confirmed > 0)
    expect(firstPending).toBeGreaterThanOrEqual(0)
    expect(firstPending).toBeLessThan(firstConfirmed)
    expect(seen.some(({ confirmed, pending }) => confirmed + pending === TRANSACTIONS_PER_AGENT && pending > 0)).toBe(true)
  })
  // The leaderboard agrees, with nothing left pending.
  const { builderCodes } = (await (await fetch(`${gateway.url}/v1/builder-codes`)).json()) as {
    builderCodes: { builderCode: string; transactions: number; pendingTransactions: number }[]
  }
  for (const code of codes)
    expect(builderCodes.find((entry) => entry.builderCode === code)).toMatchObject({ transactions: TRANSACTIONS_PER_AGENT, pendingTransactions: 0 })
}, 60_000)
