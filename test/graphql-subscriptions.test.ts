import { GraphQLClient } from 'graphql-request'
import { type Address, encodeFunctionData } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Anvil } from '../src/devnet/anvil.js'
import { TRANSFER_TOPIC, tokenAbi } from '../src/devnet/contracts.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { flashblock, signedTransfer, startScriptedFeed } from './fixtures/flashblocks.js'
import { subscribeGraphql } from './fixtures/graphql-sse.js'
import { rpc, startTestGateway, type TestGateway, startManualAnvilWithToken } from './fixtures/gateway.js'
import { anvilCall, blockHashAt, waitForSameHead } from './fixtures/sync.js'

const SENDER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'
const RECIPIENT = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8'
const GAS = '0x30000'
const PENDING_LOG_ADDRESS = `0x${'5c'.repeat(20)}` as const
/** Time for a new SSE subscription to be registered with its event sources. */
const SUBSCRIBE_SETTLE_MS = 200

let anvil: Anvil
let database: TestDatabase
let feed: Awaited<ReturnType<typeof startScriptedFeed>>
let gateway: TestGateway
let token: Address

async function transfer(amount: number) {
  const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(amount)] })
  return anvilCall<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: token, data, gas: GAS }])
}

/** A GraphQL subscription on this file's gateway. */
const subscribe = <item>(query: string, variables?: Record<string, unknown>) => subscribeGraphql<item>(gateway.url, query, variables)

beforeAll(async () => {
  ;({ anvil, token } = await startManualAnvilWithToken(SENDER))
  feed = await startScriptedFeed()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, upstreamWs: anvil.wsUrl, databaseUrl: database.databaseUrl, flashblocksWs: feed.url })
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  await gateway?.stop()
  await feed?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('GraphQL subscriptions over server-sent events', () => {
  test('newHeads streams every new block, equal to eth_getBlockByNumber', async () => {
    const heads = subscribe<{ number: string; hash: string }>('subscription { newHeads { number hash } }')
    await new Promise((resolve) => setTimeout(resolve, SUBSCRIBE_SETTLE_MS))
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    const head = await waitForSameHead(gateway, anvil.rpcUrl)
    const expected = await Promise.all(
      [head - 1, head].map(async (number) => (await rpc(anvil.rpcUrl, 'eth_getBlockByNumber', [`0x${number.toString(16)}`, false])).result as { hash: string }),
    )
    await expect
      .poll(() => heads.items)
      .toEqual([
        { number: String(head - 1), hash: expected[0]!.hash },
        { number: String(head), hash: expected[1]!.hash },
      ])
    await heads.close()
    expect(heads.errors).toEqual([])
  })

  test('logs(filter) streams matching logs, and a reorg sends them again with removed: true', async () => {
    const logs = subscribe<{ transactionHash: string; removed: boolean; topics: string[] }>(
      'subscription ($token: Address!) { logs(filter: { addresses: [$token] }) { transactionHash removed topics } }',
      { token },
    )
    await new Promise((resolve) => setTimeout(resolve, SUBSCRIBE_SETTLE_MS))
    const snapshot = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
    const hash = await transfer(7)
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    await waitForSameHead(gateway, anvil.rpcUrl)
    await expect.poll(() => logs.items.map((log) => [log.transactionHash, log.removed])).toEqual([[hash, false]])
    expect(logs.items[0]?.topics[0]).toBe(TRANSFER_TOPIC)

    await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])
    const replacement = await transfer(9)
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    await waitForSameHead(gateway, anvil.rpcUrl)
    await expect
      .poll(() => logs.items.map((log) => [log.transactionHash, log.removed]))
      .toEqual([
        [hash, false],
        [hash, true],
        [replacement, false],
      ])
    await logs.close()
    expect(logs.errors).toEqual([])
  })

  test('pendingLogs streams pre-confirmed logs, and queries at PENDING see the pre-confirmed block', async () => {
    const pendingLogs = subscribe<{ transactionHash: string; blockHash: string; address: string }>(
      `subscription { pendingLogs(filter: { addresses: ["${PENDING_LOG_ADDRESS}"] }) { transactionHash blockHash address } }`,
    )
    await new Promise((resolve) => setTimeout(resolve, SUBSCRIBE_SETTLE_MS))
    const head = Number((await rpc(gateway.url, 'eth_blockNumber')).result)
    const [plain, logged] = await Promise.all([signedTransfer({ from: 2, nonce: 50 }), signedTransfer({ from: 2, nonce: 51 })])
    await feed.connected()
    feed.send(flashblock({ index: 0, blockNumber: head + 1, parentHash: await blockHashAt(anvil.rpcUrl, head), transactions: [plain] }))
    feed.send(
      flashblock({
        index: 1,
        blockNumber: head + 1,
        cumulativeGasBefore: 21_000n,
        transactions: [{ ...logged, logs: [{ address: PENDING_LOG_ADDRESS, topics: [TRANSFER_TOPIC], data: '0x' }] }],
      }),
    )
    await expect.poll(() => pendingLogs.items.map((log) => log.transactionHash)).toEqual([logged.hash])
    expect(pendingLogs.items[0]!.blockHash).toBe(`0x${'00'.repeat(32)}`)
    await pendingLogs.close()

    // The same pre-confirmed state through queries, as JSON-RPC shows it.
    const client = new GraphQLClient(`${gateway.url}/graphql`)
    const data: any = await client.request(
      `query ($sender: Address!) {
        block(tag: PENDING) { number transactionHashes transactions { hash receipt { status } } }
        logs(filter: { fromBlock: { tag: PENDING }, toBlock: { tag: PENDING } }) { nodes { transactionHash block { number } } }
        account(address: $sender, block: { tag: PENDING }) { transactionCount }
        receipts(block: { tag: PENDING }) { transactionHash }
      }`,
      { sender: logged.from },
    )
    expect(data.block.number).toBe(String(head + 1))
    expect(data.block.transactionHashes).toEqual([plain.hash, logged.hash])
    expect(data.block.transactions.map((transaction: { hash: string }) => transaction.hash)).toEqual([plain.hash, logged.hash])
    expect(data.logs.nodes).toEqual([{ transactionHash: logged.hash, block: { number: String(head + 1) } }])
    expect(data.account.transactionCount).toBe(
      BigInt((await rpc(gateway.url, 'eth_getTransactionCount', [logged.from, 'pending'])).result as string).toString(),
    )
    expect(data.receipts.map((receipt: { transactionHash: string }) => receipt.transactionHash)).toEqual(
      ((await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['pending'])).result as { transactionHash: string }[]).map(
        (receipt) => receipt.transactionHash,
      ),
    )
  })

  test('a bad subscription argument is a BAD_USER_INPUT error', async () => {
    const response = await fetch(`${gateway.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify({ query: 'subscription { logs(filter: { topics: [null, null, null, null, null] }) { logIndex } }' }),
    })
    const answer = (await response.json()) as { errors: { message: string; extensions: { code: string } }[] }
    expect(answer.errors[0]!.extensions.code).toBe('BAD_USER_INPUT')
    expect(answer.errors[0]!.message).toMatch(/exceed max topics/)
  })

  test('a client holds at most 100 open streams: the next is 429 LIMIT_EXCEEDED, and closing one makes room', async () => {
    const open = (signal: AbortSignal) =>
      fetch(`${gateway.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: 'subscription { newHeads { number } }' }),
        signal,
      })
    const streams = Array.from({ length: 100 }, () => new AbortController())
    try {
      const answers = await Promise.all(streams.map((stream) => open(stream.signal)))
      expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200))
      const refused = await open(new AbortController().signal)
      expect(refused.status).toBe(429)
      const body = (await refused.json()) as { errors: { message: string; extensions: { code: string } }[] }
      expect(body.errors[0]!.extensions.code).toBe('LIMIT_EXCEEDED')
      streams.pop()!.abort()
      const extra = new AbortController()
      streams.push(extra)
      await expect.poll(async () => (await open(extra.signal)).status, { timeout: 5_000 }).toBe(200)
    } finally {
      for (const stream of streams) stream.abort()
    }
  })
})
