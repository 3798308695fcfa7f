import { keccak256 } from 'viem'
import { afterAll, beforeAll, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { attributionSuffix } from '../src/attribution/index.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, flashblock, signedTransfer, startScriptedFeed } from './fixtures/flashblocks.js'
import { rpc, startTestGateway } from './fixtures/gateway.js'
import { blockHashAt, waitForSameHead } from './fixtures/sync.js'

let anvil: Anvil
let database: TestDatabase
let feed: Awaited<ReturnType<typeof startScriptedFeed>>
let gateway: Gateway

beforeAll(async () => {
  anvil = await startAnvil()
  feed = await startScriptedFeed()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, flashblocksWs: feed.url })
  await waitForSameHead(gateway, anvil.rpcUrl)
  await feed.connected()
})

afterAll(async () => {
  await gateway?.stop()
  await feed?.stop()
  await anvil?.stop()
  await database?.drop()
})

async function pendingCount(code: string): Promise<number> {
  const response = await fetch(`${gateway.url}/v1/builder-codes/${code}/stats`)
  if (response.status === 404) return 0
  return ((await response.json()) as { pending: { transactions: number } }).pending.transactions
}

test('a pre-confirmation the feed drops takes its attribution with it; nothing was stored for it', async () => {
  const agent = DEV_ACCOUNTS[1]!
  const registration = await fetch(`${gateway.url}/v1/agents/builder-codes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ walletAddress: agent.address }),
  })
  const { builderCode } = (await registration.json()) as { builderCode: string }
  const { raw } = await signedTransfer({ from: 1, nonce: 0, to: `0x${'77'.repeat(20)}`, gas: 50_000n, data: attributionSuffix([builderCode]) })
  const head = Number((await rpc(gateway.url, 'eth_blockNumber')).result)
  feed.send(
    flashblock({
      index: 0,
      blockNumber: head + 1,
      parentHash: await blockHashAt(anvil.rpcUrl, head),
      transactions: [{ raw, hash: keccak256(raw), gasUsed: 21_500n }],
    }),
  )
  await expect.poll(() => pendingCount(builderCode)).toBe(1)

  // A gap in the sequence drops the pre-confirmed state, and with it the pending attribution.
  feed.send(flashblock({ index: 3, blockNumber: head + 1 }))
  await expect.poll(() => pendingCount(builderCode)).toBe(0)
  const stats = (await (await fetch(`${gateway.url}/v1/builder-codes/${builderCode}/stats`)).json()) as { confirmed: { transactions: number } }
  expect(stats.confirmed.transactions).toBe(0)
})

test('the leaderboard ranks a code on its confirmed and pending attributions together, with its confirmed figures, though the confirmed alone would not make the top', async () => {
  const [confirmedOnly, withPending] = ['a-leader', 'b-leader']
  const sender = DEV_ACCOUNTS[3]!
  const sendConfirmed = (code: string) =>
    rpc(anvil.rpcUrl, 'eth_sendTransaction', [{ from: sender.address, to: `0x${'78'.repeat(20)}`, data: attributionSuffix([code]), gas: '0xc350' }])
  let last = ''
  for (const code of [confirmedOnly, confirmedOnly, confirmedOnly, withPending]) last = (await sendConfirmed(code)).result as string
  // Mined (anvil's automine may seal after it answers the send), then indexed: the heads compared below are then
  // the block that holds the last one, not the one before it.
  await expect.poll(async () => (await rpc(anvil.rpcUrl, 'eth_getTransactionReceipt', [last])).result).not.toBeNull()
  const head = await waitForSameHead(gateway, anvil.rpcUrl)
  const pendingTransactions = await Promise.all(
    [0, 1, 2].map(async (nonce) => ({
      ...(await signedTransfer({ from: 4, nonce: 100 + nonce, to: `0x${'79'.repeat(20)}`, gas: 50_000n, data: attributionSuffix([withPending]) })),
      gasUsed: 21_500n,
    })),
  )
  feed.send(flashblock({ index: 0, blockNumber: head + 1, parentHash: await blockHashAt(anvil.rpcUrl, head), transactions: pendingTransactions }))
  await expect.poll(() => pendingCount(withPending)).toBe(3)
  const leaderboard = async (limit: number) =>
    ((await (await fetch(`${gateway.url}/v1/builder-codes?limit=${limit}`)).json()) as { builderCodes: Record<string, unknown>[] }).builderCodes
  // 1 confirmed + 3 pending ahead of 3 confirmed; its confirmed figures are its own (they were left out as 0).
  const [first] = await leaderboard(1)
  expect(first).toMatchObject({ builderCode: withPending, transactions: 1, pendingTransactions: 3, reach: 1 })
  expect((await leaderboard(2)).map((entry) => [entry.builderCode, entry.transactions, entry.pendingTransactions])).toEqual([
    [withPending, 1, 3],
    [confirmedOnly, 3, 0],
  ])
})
