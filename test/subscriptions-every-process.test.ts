import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { type Address, encodeFunctionData, type Hash } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { WebSocket } from 'ws'
import { isPostgresUrl } from '../src/db/index.js'
import type { Anvil } from '../src/devnet/anvil.js'
import { tokenAbi } from '../src/devnet/contracts.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, signedTransfer } from './fixtures/flashblocks.js'
import { rpc, startTestGateway, type TestGateway, startManualAnvilWithToken } from './fixtures/gateway.js'
import { subscribeGraphql } from './fixtures/graphql-sse.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

/**
 * Two gateways on one Postgres: one holds the ingest lock, the other stands by and only serves. A
 * subscriber on either hears the same heads and logs, in the same order, byte for byte (issue 14).
 */

const SENDER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'
const RECIPIENT = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8'
const GAS = '0x30000'
/** The listening sessions' `application_name` (src/db/notifications.ts). */
const LISTENER_APPLICATION = 'flashgate-listen'
const usesPostgres = isPostgresUrl(process.env.DATABASE_URL ?? '')
if (!usesPostgres) console.warn('subscriptions-every-process: skipped, it needs DATABASE_URL=postgres://… (two processes share one database)')

let anvil: Anvil
let database: TestDatabase
let ingesting: TestGateway
let standingBy: TestGateway
let admin: postgres.Sql
let token: Address

/** One `eth_subscription` message: which subscription, and its result exactly as sent. */
type Notification = { kind: 'newHeads' | 'logs'; result: string }

/** A WebSocket client subscribed to `newHeads` and to every log, keeping each notification as it came. */
async function subscribeAll(gateway: TestGateway) {
  const socket = new WebSocket(gateway.url.replace('http', 'ws'))
  await once(socket, 'open')
  const raw: { subscription: string; result: string }[] = []
  const replies = new Map<number, (result: string) => void>()
  socket.on('message', (data) => {
    const message = JSON.parse(String(data)) as { id?: number; method?: string; result?: string; params?: { subscription: string; result: unknown } }
    if (message.method === 'eth_subscription') raw.push({ subscription: message.params!.subscription, result: JSON.stringify(message.params!.result) })
    else if (message.id !== undefined) replies.get(message.id)?.(message.result!)
  })
  let nextId = 1
  const subscribe = (params: unknown[]) =>
    new Promise<string>((resolve) => {
      const id = nextId++
      replies.set(id, resolve)
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_subscribe', params }))
    })
  const heads = await subscribe(['newHeads'])
  const logs = await subscribe(['logs', {}])
  const kindOf = (subscription: string) => (subscription === heads ? 'newHeads' : subscription === logs ? 'logs' : 'unknown')
  return {
    notifications: (): Notification[] => raw.map(({ subscription, result }) => ({ kind: kindOf(subscription) as Notification['kind'], result })),
    headHashes: () => raw.filter(({ subscription }) => subscription === heads).map(({ result }) => (JSON.parse(result) as { hash: Hash }).hash),
    logs: () =>
      raw
        .filter(({ subscription }) => subscription === logs)
        .map(({ result }) => JSON.parse(result) as { transactionHash: Hash; removed: boolean })
        .map((log) => [log.transactionHash, log.removed] as const),
    close: () => socket.close(),
  }
}

async function transfer(amount: number): Promise<Hash> {
  const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(amount)] })
  return anvilCall<Hash>(anvil.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: token, data, gas: GAS }])
}

/** Mines a block holding `transfers` token transfers; returns its hash and the transfers' hashes. */
async function mine(transfers: number[]): Promise<{ hash: Hash; transactions: Hash[] }> {
  const transactions: Hash[] = []
  for (const amount of transfers) transactions.push(await transfer(amount))
  await anvilCall(anvil.rpcUrl, 'evm_mine')
  const block = await anvilCall<{ hash: Hash }>(anvil.rpcUrl, 'eth_getBlockByNumber', ['latest', false])
  return { hash: block.hash, transactions }
}

async function listenerPids(): Promise<number[]> {
  const rows = await admin<
    { pid: number }[]
  >`select pid from pg_stat_activity where application_name = ${LISTENER_APPLICATION} and datname = current_database()`
  return rows.map((row) => row.pid)
}

async function waitForBoth() {
  await waitForSameHead(ingesting, anvil.rpcUrl)
  await waitForSameHead(standingBy, anvil.rpcUrl)
}

describe.skipIf(!usesPostgres)('subscriptions on a process that does not ingest', () => {
  beforeAll(async () => {
    ;({ anvil, token } = await startManualAnvilWithToken(SENDER))
    database = await createTestDatabase()
    admin = postgres(database.databaseUrl, { max: 1, onnotice: () => {} })
    // The first takes the ingest lock before the second starts, which then stands by.
    ingesting = await startTestGateway({ upstreamRpc: anvil.rpcUrl, upstreamWs: anvil.wsUrl, databaseUrl: database.databaseUrl })
    await waitForSameHead(ingesting, anvil.rpcUrl)
    standingBy = await startTestGateway({ upstreamRpc: anvil.rpcUrl, upstreamWs: anvil.wsUrl, databaseUrl: database.databaseUrl })
    await waitForBoth()
    expect([ingesting.ingester.status().leader, standingBy.ingester.status().leader]).toEqual([true, false])
    // Both listen (expect.poll is for tests only).
    for (const deadline = Date.now() + 10_000; (await listenerPids()).length !== 2; await sleep(50))
      if (Date.now() > deadline) throw new Error('the gateways did not both listen for chain changes')
  })

  afterAll(async () => {
    await standingBy?.stop()
    await ingesting?.stop()
    await admin?.end({ timeout: 5 })
    await anvil?.stop()
    await database?.drop()
  })

  test('a WebSocket subscriber on the standby hears every head and every log, and the logs a reorg undid with removed: true, exactly as a subscriber on the ingester', async () => {
    const [onIngester, onStandby] = await Promise.all([subscribeAll(ingesting), subscribeAll(standingBy)])
    const graphqlHeads = subscribeGraphql<{ hash: Hash }>(standingBy.url, 'subscription { newHeads { hash } }')
    const graphqlLogs = subscribeGraphql<{ transactionHash: Hash; removed: boolean }>(standingBy.url, 'subscription { logs { transactionHash removed } }')
    try {
      await sleep(200)
      const snapshot = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
      const undone = [await mine([1, 2]), await mine([]), await mine([3])]
      await waitForBoth()
      // The standby read them before the reorg (a subscriber only hears back what it heard).
      await expect.poll(() => onStandby.headHashes(), { timeout: 10_000 }).toEqual(undone.map((block) => block.hash))

      await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])
      const replacing = [await mine([4]), await mine([5, 6]), await mine([]), await mine([7])]
      await waitForBoth()
      const after = [await mine([8])]
      await waitForBoth()

      const heads = [...undone, ...replacing, ...after].map((block) => block.hash)
      const logs = [
        ...undone.flatMap((block) => block.transactions.map((hash) => [hash, false] as const)),
        ...undone.flatMap((block) => block.transactions.map((hash) => [hash, true] as const)),
        ...[...replacing, ...after].flatMap((block) => block.transactions.map((hash) => [hash, false] as const)),
      ]
      await expect.poll(() => onIngester.headHashes(), { timeout: 10_000 }).toEqual(heads)
      await expect.poll(() => onStandby.headHashes(), { timeout: 10_000 }).toEqual(heads)
      await expect.poll(() => onStandby.logs(), { timeout: 10_000 }).toEqual(logs)
      // Each socket is read on its own: the ingester's last logs may come after the standby's.
      await expect.poll(() => onIngester.logs(), { timeout: 10_000 }).toEqual(logs)
      // The same messages in the same order, byte for byte.
      await expect.poll(() => onStandby.notifications(), { timeout: 10_000 }).toEqual(onIngester.notifications())

      // GraphQL subscriptions on the standby hear the same stream.
      await expect.poll(() => graphqlHeads.items.map((block) => block.hash), { timeout: 10_000 }).toEqual(heads)
      await expect.poll(() => graphqlLogs.items.map((log) => [log.transactionHash, log.removed]), { timeout: 10_000 }).toEqual(logs)
      expect([...graphqlHeads.errors, ...graphqlLogs.errors]).toEqual([])
    } finally {
      onIngester.close()
      onStandby.close()
      await graphqlHeads.close()
      await graphqlLogs.close()
    }
  })

  test('a listening session cut by pg_terminate_backend is opened again, and the standby’s subscriber hears every head committed meanwhile, once', async () => {
    const [onIngester, onStandby] = await Promise.all([subscribeAll(ingesting), subscribeAll(standingBy)])
    try {
      await sleep(200)
      const cut = await listenerPids()
      expect(cut).toHaveLength(2)
      await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${LISTENER_APPLICATION} and datname = current_database()`
      // Blocks committed while the sessions are gone or coming back.
      const mined = [await mine([11]), await mine([12, 13]), await mine([])]
      await waitForBoth()
      await expect.poll(listenerPids, { timeout: 10_000 }).toHaveLength(2)
      expect((await listenerPids()).filter((pid) => cut.includes(pid))).toEqual([])
      mined.push(await mine([14]))
      await waitForBoth()

      const heads = mined.map((block) => block.hash)
      const logs = mined.flatMap((block) => block.transactions.map((hash) => [hash, false] as const))
      await expect.poll(() => onStandby.headHashes(), { timeout: 10_000 }).toEqual(heads)
      await expect.poll(() => onStandby.logs(), { timeout: 10_000 }).toEqual(logs)
      await expect.poll(() => onIngester.headHashes(), { timeout: 10_000 }).toEqual(heads)
      await expect.poll(() => onIngester.logs(), { timeout: 10_000 }).toEqual(logs)
      await expect.poll(() => onStandby.notifications(), { timeout: 10_000 }).toEqual(onIngester.notifications())
    } finally {
      onIngester.close()
      onStandby.close()
    }
  })

  test('eth_sendRawTransactionSync on the standby (no feed) answers with the receipt once the ingester indexes its block', async () => {
    const from = 3
    const nonce = Number(await anvilCall<string>(anvil.rpcUrl, 'eth_getTransactionCount', [DEV_ACCOUNTS[from]!.address, 'latest']))
    const { raw, hash } = await signedTransfer({ from, nonce })
    const answer = rpc(standingBy.dedicatedUrl, 'eth_sendRawTransactionSync', [raw, 6_000])
    await expect.poll(() => anvilCall(anvil.rpcUrl, 'eth_getTransactionByHash', [hash]), { timeout: 5_000 }).not.toBeNull()
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    const sealed = await anvilCall<{ blockHash: Hash; transactionHash: Hash }>(anvil.rpcUrl, 'eth_getTransactionReceipt', [hash])
    const { result, error } = await answer
    expect(error).toBeUndefined()
    expect(result).toMatchObject({ transactionHash: hash, blockHash: sealed.blockHash, status: '0x1' })
  })
})
