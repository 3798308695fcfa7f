import { connect } from 'node:net'
import { WebSocketProvider } from 'ethers'
import { type Address, createPublicClient, encodeFunctionData, type Log, webSocket } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import type { Anvil } from '../src/devnet/anvil.js'
import { TRANSFER_TOPIC, tokenAbi } from '../src/devnet/contracts.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, flashblock, signedTransfer, startScriptedFeed } from './fixtures/flashblocks.js'
import { rpc, startTestGateway, startManualAnvilWithToken } from './fixtures/gateway.js'
import { anvilCall, blockHashAt, waitForSameHead } from './fixtures/sync.js'

const SENDER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'
const RECIPIENT = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8'
const GAS = '0x30000'

let anvil: Anvil
let database: TestDatabase
let feed: Awaited<ReturnType<typeof startScriptedFeed>>
let gateway: Gateway
let client: ReturnType<typeof createPublicClient>
let token: Address

async function transfer(amount: number) {
  const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(amount)] })
  return anvilCall<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: token, data, gas: GAS }])
}

beforeAll(async () => {
  ;({ anvil, token } = await startManualAnvilWithToken(SENDER))
  feed = await startScriptedFeed()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, upstreamWs: anvil.wsUrl, databaseUrl: database.databaseUrl, flashblocksWs: feed.url })
  await waitForSameHead(gateway, anvil.rpcUrl)
  client = createPublicClient({ transport: webSocket(gateway.url.replace('http', 'ws')) })
})

afterAll(async () => {
  await client?.transport
    .getRpcClient?.()
    .then((socket: { close(): void }) => socket.close())
    .catch(() => {})
  await gateway?.stop()
  await feed?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('eth_subscribe over WebSocket, through viem', () => {
  test('watchBlocks sees every new head with its hash', async () => {
    const seen: string[] = []
    const unwatch = client.watchBlocks({ onBlock: (block) => void seen.push(block.hash!) })
    await new Promise((resolve) => setTimeout(resolve, 200))
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    const head = await waitForSameHead(gateway, anvil.rpcUrl)
    const expected = await Promise.all(
      [head - 1, head].map(async (number) => (await rpc(anvil.rpcUrl, 'eth_getBlockByNumber', [`0x${number.toString(16)}`, false])).result as { hash: string }),
    )
    await expect.poll(() => seen).toEqual(expected.map((block) => block.hash))
    unwatch()
  })

  test('watchEvent gets the logs of new blocks, and a reorg sends them back with removed: true', async () => {
    const logs: Log[] = []
    const unwatch = client.watchEvent({ address: token, onLogs: (batch) => void logs.push(...batch) })
    await new Promise((resolve) => setTimeout(resolve, 200))
    const snapshot = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
    const hash = await transfer(7)
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    await waitForSameHead(gateway, anvil.rpcUrl)
    await expect.poll(() => logs.map((log) => [log.transactionHash, log.removed])).toEqual([[hash, false]])
    expect(logs[0]?.topics[0]).toBe(TRANSFER_TOPIC)

    await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])
    const replacement = await transfer(9)
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    await waitForSameHead(gateway, anvil.rpcUrl)
    await expect
      .poll(() => logs.map((log) => [log.transactionHash, log.removed]))
      .toEqual([
        [hash, false],
        [hash, true],
        [replacement, false],
      ])
    unwatch()
  })

  test('pendingLogs, newFlashblockTransactions and newFlashblocks stream pre-confirmations', async () => {
    const pendingLogs: { transactionHash: string }[] = []
    const transactions: string[] = []
    const whole: { hash: string; blockNumber: string; logs?: { transactionHash: string }[] }[] = []
    const flashblocks: { number: string }[] = []
    const socket = client.transport
    const subscriptions = await Promise.all([
      socket.subscribe({
        params: ['pendingLogs', { address: `0x${'5c'.repeat(20)}` }],
        onData: ({ result }: { result: { transactionHash: string } }) => void pendingLogs.push(result),
        onError: () => {},
      }),
      socket.subscribe({
        params: ['newFlashblockTransactions'],
        onData: ({ result }: { result: string }) => void transactions.push(result),
        onError: () => {},
      }),
      socket.subscribe({
        params: ['newFlashblockTransactions', true],
        onData: ({ result }: { result: (typeof whole)[number] }) => void whole.push(result),
        onError: () => {},
      }),
      socket.subscribe({
        params: ['newFlashblocks'],
        onData: ({ result }: { result: { number: string } }) => void flashblocks.push(result),
        onError: () => {},
      }),
    ])
    const head = Number((await rpc(gateway.url, 'eth_blockNumber')).result)
    const [plain, logged] = await Promise.all([signedTransfer({ from: 2, nonce: 50 }), signedTransfer({ from: 2, nonce: 51 })])
    await feed.connected()
    feed.send(flashblock({ index: 0, blockNumber: head + 1, parentHash: await blockHashAt(anvil.rpcUrl, head), transactions: [plain] }))
    feed.send(
      flashblock({
        index: 1,
        blockNumber: head + 1,
        cumulativeGasBefore: 21_000n,
        transactions: [{ ...logged, logs: [{ address: `0x${'5c'.repeat(20)}`, topics: [TRANSFER_TOPIC], data: '0x' }] }],
      }),
    )
    // Each stream is published on its own: transactions as a frame arrives, logs with its receipts, and the
    // flashblock once its header is built (asynchronously, in order); so each is awaited.
    await expect.poll(() => transactions).toEqual([plain.hash, logged.hash])
    await expect.poll(() => pendingLogs.map((log) => log.transactionHash)).toEqual([logged.hash])
    // Whole, as Base's node sends them: each transaction with its logs, once its receipt is known.
    await expect
      .poll(() => whole.map((transaction) => [transaction.hash, transaction.logs?.map((log) => log.transactionHash)]))
      .toEqual([
        [plain.hash, []],
        [logged.hash, [logged.hash]],
      ])
    expect(whole[0]!.blockNumber).toBe(`0x${(head + 1).toString(16)}`)
    await expect.poll(() => flashblocks.map((block) => block.number)).toEqual([`0x${(head + 1).toString(16)}`, `0x${(head + 1).toString(16)}`])
    for (const { unsubscribe } of subscriptions) await unsubscribe()
  })

  test("newPendingTransactions, as viem's watchPendingTransactions and ethers' WebSocketProvider ask for it: each transaction at pre-confirmation, as a hash or whole", async () => {
    const hashes: string[] = []
    const unwatch = client.watchPendingTransactions({ onTransactions: (batch) => void hashes.push(...batch) })
    const provider = new WebSocketProvider(gateway.url.replace('http', 'ws'), Number((await rpc(anvil.rpcUrl, 'eth_chainId')).result))
    const ethersHashes: string[] = []
    await provider.on('pending', (hash: string) => void ethersHashes.push(hash))
    const whole: { hash: string; from: string }[] = []
    const subscription = await client.transport.subscribe({
      params: ['newPendingTransactions', true],
      onData: ({ result }: { result: { hash: string; from: string } }) => void whole.push(result),
      onError: () => {},
    })
    try {
      // A fresh block to pre-confirm, once every subscription is in place.
      await anvilCall(anvil.rpcUrl, 'evm_mine')
      const head = await waitForSameHead(gateway, anvil.rpcUrl)
      await new Promise((resolve) => setTimeout(resolve, 200))
      const sent = await Promise.all([signedTransfer({ from: 3, nonce: 60 }), signedTransfer({ from: 3, nonce: 61 })])
      await feed.connected()
      feed.send(flashblock({ index: 0, blockNumber: head + 1, parentHash: await blockHashAt(anvil.rpcUrl, head), transactions: sent }))
      const expected = sent.map((transaction) => transaction.hash)
      await expect.poll(() => hashes).toEqual(expected)
      await expect.poll(() => ethersHashes).toEqual(expected)
      await expect.poll(() => whole.map((transaction) => transaction.hash)).toEqual(expected)
      expect(whole.map((transaction) => transaction.from.toLowerCase())).toEqual([
        DEV_ACCOUNTS[3]!.address.toLowerCase(),
        DEV_ACCOUNTS[3]!.address.toLowerCase(),
      ])
    } finally {
      unwatch()
      await subscription.unsubscribe()
      await provider.destroy()
    }
  })

  test('newPendingTransactions sends a transaction pre-confirmed, then sealed, once; one no flashblock showed, as it seals', async () => {
    const hashes: string[] = []
    const subscription = await client.transport.subscribe({
      params: ['newPendingTransactions'],
      onData: ({ result }: { result: string }) => void hashes.push(result),
      onError: () => {},
    })
    try {
      await anvilCall(anvil.rpcUrl, 'evm_mine')
      const head = await waitForSameHead(gateway, anvil.rpcUrl)
      await new Promise((resolve) => setTimeout(resolve, 200))
      const nonce = Number(await anvilCall<string>(anvil.rpcUrl, 'eth_getTransactionCount', [DEV_ACCOUNTS[4]!.address, 'latest']))
      const [shown, unshown] = await Promise.all([signedTransfer({ from: 4, nonce }), signedTransfer({ from: 4, nonce: nonce + 1 })])
      for (const { raw } of [shown, unshown]) await anvilCall(anvil.rpcUrl, 'eth_sendRawTransaction', [raw])
      await feed.connected()
      feed.send(flashblock({ index: 0, blockNumber: head + 1, parentHash: await blockHashAt(anvil.rpcUrl, head), transactions: [shown] }))
      await expect.poll(() => hashes).toEqual([shown.hash])
      await anvilCall(anvil.rpcUrl, 'evm_mine')
      await waitForSameHead(gateway, anvil.rpcUrl)
      await expect.poll(() => hashes).toEqual([shown.hash, unshown.hash])
      await anvilCall(anvil.rpcUrl, 'evm_mine')
      await waitForSameHead(gateway, anvil.rpcUrl)
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(hashes).toEqual([shown.hash, unshown.hash])
    } finally {
      await subscription.unsubscribe()
    }
  })

  test('a bad subscription is a -32602 error and plain calls work on the socket', async () => {
    await expect(client.transport.request({ method: 'eth_subscribe', params: ['nonsense'] })).rejects.toThrow()
    expect(await client.getBlockNumber()).toBe(BigInt((await rpc(anvil.rpcUrl, 'eth_blockNumber')).result as string))
  })
})

describe('a WebSocket upgrade the client resets', () => {
  /** Opens a raw connection, asks for a WebSocket on `path`, waits for the first bytes of the answer (or `waitMs`), then resets it. */
  async function upgradeAndReset(path: string, waitMs: number): Promise<string> {
    const { port } = new URL(gateway.url)
    const socket = connect(Number(port), '127.0.0.1')
    let answer = ''
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')))
    socket.on('error', () => {})
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    )
    const deadline = Date.now() + waitMs
    while (answer === '' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
    socket.resetAndDestroy()
    return answer.split('\r\n')[0]!
  }

  test('an unknown key refused, then the connection reset: the server goes on answering', async () => {
    for (let round = 0; round < 5; round++) {
      expect(await upgradeAndReset(`/rpc/fg_unknown_${round}`, 2_000)).toBe('HTTP/1.1 401 Unauthorized')
      // Reset at once, before the key is even looked up.
      await upgradeAndReset(`/rpc/fg_unknown_again_${round}`, 0)
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(await rpc(gateway.url, 'eth_chainId')).toMatchObject({ result: '0x7a69' })
  })
})
