import { once } from 'node:events'
import { GraphQLClient } from 'graphql-request'
import type { Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { WebSocket } from 'ws'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { flashblock, signedTransfer, startScriptedFeed } from './fixtures/flashblocks.js'
import { result, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, blockHashAt, waitForSameHead } from './fixtures/sync.js'

// Today's frames (no receipts, no balances) with an upstream that is an ordinary node (anvil): it has no
// receipts for pre-confirmed transactions. flashgate says so and serves what the frames alone give.
const SENDER_INDEX = 4

let anvil: Anvil
let database: TestDatabase
let feed: Awaited<ReturnType<typeof startScriptedFeed>>
let gateway: TestGateway
let head: number

const call = <value>(method: string, params: unknown[] = []) => result<value>(gateway.dedicatedUrl, method, params)

beforeAll(async () => {
  anvil = await startAnvil()
  await anvilCall(anvil.rpcUrl, 'anvil_mine', ['0x3'])
  feed = await startScriptedFeed()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, flashblocksWs: feed.url })
  head = await waitForSameHead(gateway, anvil.rpcUrl)
  await feed.connected()
})

afterAll(async () => {
  await gateway?.stop()
  await feed?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('pending with an upstream that is not flashblocks-aware', () => {
  test('auto finds out, says so in /readyz and /metrics, and serves transactions and nonces from the frames, no receipts', async () => {
    const readyz = async () => ((await (await fetch(`${gateway.url}/readyz`)).json()) as { pending: Record<string, unknown> }).pending
    expect((await readyz()).source).toBe('probing')
    const sender = (await signedTransfer({ from: SENDER_INDEX, nonce: 0 })).from
    const confirmedNonce = BigInt(await call<Hex>('eth_getTransactionCount', [sender, 'latest']))
    const transactions = await Promise.all(
      Array.from({ length: 4 }, (_, offset) => signedTransfer({ from: SENDER_INDEX, nonce: Number(confirmedNonce) + offset })),
    )
    const payloadId = '0x00000000000000aa'
    let index = 0
    const parentHash = await blockHashAt(anvil.rpcUrl, head)
    const send = (sent: typeof transactions) =>
      feed.send(flashblock({ payloadId, index: index++, blockNumber: head + 1, parentHash, transactions: sent, format: 'current' }))
    for (const transaction of transactions) send([transaction])
    // A live feed sends a flashblock every 200 ms, with or without transactions (silence would be stale).
    const ticking = setInterval(() => send([]), 200)
    try {
      await expect.poll(async () => (await readyz()).source, { timeout: 10_000, interval: 50 }).toBe('frames')
      expect(await readyz()).toMatchObject({ mode: 'auto', upstreamFlashblocksAware: false, hydrationFailures: 0 })
      expect(await (await fetch(`${gateway.url}/metrics`)).text()).toMatch(/flashgate_pending_source\{source="frames"\} 1/)

      // What the frames give: every transaction, at its position, and the nonce after them.
      expect(BigInt(await call<Hex>('eth_getTransactionCount', [sender, 'pending']))).toBe(confirmedNonce + 4n)
      const pendingBlock = await call<{ number: Hex; transactions: Hex[] }>('eth_getBlockByNumber', ['pending', false])
      expect(pendingBlock.number).toBe(`0x${(head + 1).toString(16)}`)
      expect(pendingBlock.transactions).toEqual(transactions.map((transaction) => transaction.hash))
      expect(await call('eth_getTransactionByHash', [transactions[2]!.hash])).toMatchObject({
        transactionIndex: '0x2',
        blockNumber: `0x${(head + 1).toString(16)}`,
        blockHash: null,
      })
      // What they do not: no receipt or log is made up.
      expect(await call('eth_getBlockReceipts', ['pending'])).toEqual([])
      expect(await call('eth_getTransactionReceipt', [transactions[0]!.hash])).toBeNull()
      expect(await call('eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending' }])).toEqual([])

      // From now on the upstream is not asked for receipts at all.
      const asked = gateway.pending!.status().hydration.completed
      const next = await signedTransfer({ from: SENDER_INDEX, nonce: Number(confirmedNonce) + 4 })
      send([next])
      await expect.poll(async () => BigInt(await call<Hex>('eth_getTransactionCount', [sender, 'pending']))).toBe(confirmedNonce + 5n)
      await gateway.pending!.settled()
      expect(gateway.pending!.status().hydration).toMatchObject({ completed: asked, inFlight: 0 })
    } finally {
      clearInterval(ticking)
    }
  })

  test('a transaction no decoder knows keeps its position: the count includes it, and those after it are found at their own index', async () => {
    const first = await signedTransfer({ from: SENDER_INDEX, nonce: 100 })
    const after = await signedTransfer({ from: SENDER_INDEX, nonce: 101 })
    const payloadId = '0x00000000000000bb'
    let index = 0
    const parentHash = await blockHashAt(anvil.rpcUrl, head)
    const send = (sent: (typeof first)[], extraRaw?: Hex[]) =>
      feed.send(flashblock({ payloadId, index: index++, blockNumber: head + 1, parentHash, transactions: sent, format: 'current', extraRaw }))
    // A type-0x05 envelope (EIP-2718 leaves types open) between two transfers.
    send([first], ['0x05c0ffee'])
    send([after])
    const ticking = setInterval(() => send([]), 200)
    try {
      const pending = `0x${(head + 1).toString(16)}`
      await expect
        .poll(async () => (await call<{ transactions: Hex[] }>('eth_getBlockByNumber', ['pending', false])).transactions)
        .toEqual([first.hash, after.hash])
      expect(await call('eth_getBlockTransactionCountByNumber', ['pending'])).toBe('0x3')
      // Its signed bytes, as the frame carried them: the node has yet to see it.
      expect(await call('eth_getRawTransactionByHash', [after.hash])).toBe(after.raw)
      expect(await anvilCall(anvil.rpcUrl, 'eth_getRawTransactionByHash', [after.hash])).toBeNull()
      // GraphQL counts as JSON-RPC does, and lists what JSON-RPC lists.
      const graphql = new GraphQLClient(`${gateway.url}/graphql`)
      expect(await graphql.request('{ block(tag: PENDING) { transactionCount transactionHashes } }')).toEqual({
        block: { transactionCount: 3, transactionHashes: [first.hash, after.hash] },
      })
      expect(await call('eth_getTransactionByBlockNumberAndIndex', ['pending', '0x0'])).toMatchObject({ hash: first.hash, transactionIndex: '0x0' })
      expect(await call('eth_getTransactionByBlockNumberAndIndex', ['pending', '0x1'])).toBeNull()
      expect(await call('eth_getTransactionByBlockNumberAndIndex', ['pending', '0x2'])).toMatchObject({
        hash: after.hash,
        transactionIndex: '0x2',
        blockNumber: pending,
      })
      expect(await call('eth_getTransactionByBlockNumberAndIndex', ['pending', '0x3'])).toBeNull()
    } finally {
      clearInterval(ticking)
    }
  })

  test('newFlashblockTransactions sends whole transactions at once, without logs, where no receipt will come', async () => {
    // The first test found the upstream unaware, so no receipt is hydrated and none comes with the frames.
    expect(gateway.pending!.receiptsComing).toBe(false)
    const socket = new WebSocket(gateway.url.replace('http', 'ws'))
    await once(socket, 'open')
    const messages: { id?: number; result?: unknown; params?: { subscription: string; result: unknown } }[] = []
    socket.on('message', (data) => void messages.push(JSON.parse(String(data))))
    socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newFlashblockTransactions', true] }))
    socket.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'eth_subscribe', params: ['newFlashblockTransactions'] }))
    await expect.poll(() => messages.filter((message) => message.id !== undefined).length).toBe(2)
    const whole = messages.find((message) => message.id === 1)!.result as string
    const hashes = messages.find((message) => message.id === 2)!.result as string
    try {
      const sent = await signedTransfer({ from: SENDER_INDEX, nonce: 200 })
      const parentHash = await blockHashAt(anvil.rpcUrl, head)
      feed.send(flashblock({ payloadId: '0x00000000000000cc', index: 0, blockNumber: head + 1, parentHash, transactions: [sent], format: 'current' }))
      const of = (subscription: string) => messages.filter((message) => message.params?.subscription === subscription).map((message) => message.params!.result)
      await expect.poll(() => of(whole).length).toBe(1)
      expect(of(whole)[0]).toMatchObject({ hash: sent.hash, blockNumber: `0x${(head + 1).toString(16)}`, blockHash: null, transactionIndex: '0x0' })
      expect(of(whole)[0]).not.toHaveProperty('logs')
      await expect.poll(() => of(hashes)).toEqual([sent.hash])
    } finally {
      socket.close()
    }
  })
})
