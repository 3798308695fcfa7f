import WebSocket from 'ws'
import { WebSocketProvider } from 'ethers'
import { type Address, createPublicClient, encodeFunctionData, webSocket } from 'viem'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import type { Anvil } from '../src/devnet/anvil.js'
import { tokenAbi } from '../src/devnet/contracts.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { result, startTestGateway, startManualAnvilWithToken } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

// What a subscriber hears around reorgs and ranges, over a raw socket, against what anvil (the node) answers.

const SENDER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'
const RECIPIENT = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8'

type Notification = { params: { subscription: string; result: { blockNumber?: string; number?: string; removed?: boolean; blockHash?: string } } }

let anvil: Anvil
let database: TestDatabase
let gateway: Gateway
let token: Address
const sockets: WebSocket[] = []

/** A block holding one Transfer of `amount`. */
async function mineTransfer(amount: number): Promise<void> {
  const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(amount)] })
  await anvilCall(anvil.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: token, data, gas: '0x30000' }])
  await anvilCall(anvil.rpcUrl, 'evm_mine')
}

/** A socket to `url` with subscriptions opened in order; what each receives, by the order it was asked. */
async function subscribe(url: string, requests: unknown[][]) {
  const socket = new WebSocket(url)
  sockets.push(socket)
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  const received: Notification['params']['result'][][] = requests.map(() => [])
  const ids: string[] = []
  const answers = new Map<number, (answer: { result?: string; error?: { code: number; message: string } }) => void>()
  socket.on('message', (data) => {
    const message = JSON.parse(String(data))
    if (typeof message.id === 'number') answers.get(message.id)?.(message)
    else if (message.method === 'eth_subscription') received[ids.indexOf((message as Notification).params.subscription)]?.push(message.params.result)
  })
  const call = (id: number, method: string, params: unknown[]) =>
    new Promise<{ result?: string; error?: { code: number; message: string } }>((resolve) => {
      answers.set(id, resolve)
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }))
    })
  for (const [index, params] of requests.entries()) {
    const answer = await call(index + 1, 'eth_subscribe', params)
    if (answer.result === undefined) throw new Error(`eth_subscribe ${JSON.stringify(params)}: ${answer.error?.message}`)
    ids.push(answer.result)
  }
  return { received, call }
}

beforeAll(async () => {
  ;({ anvil, token } = await startManualAnvilWithToken(SENDER))
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, upstreamWs: anvil.wsUrl, databaseUrl: database.databaseUrl })
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterEach(() => {
  for (const socket of sockets.splice(0)) socket.close()
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

const numbers = (items: { blockNumber?: string; number?: string; removed?: boolean }[]) =>
  items.map((item) => `${Number(item.blockNumber ?? item.number)}${item.removed ? ' removed' : ''}`)

describe('a reorg reaching below where the first subscriber came in', () => {
  test('the new branch is sent from where it forked, heads and logs, as the node sends it', async () => {
    const snapshot = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
    for (const amount of [1, 2, 3]) await mineTransfer(amount)
    const head = await waitForSameHead(gateway, anvil.rpcUrl)
    // The first subscribers of the process: its stream starts at `head`, and has announced nothing below it.
    const ours = await subscribe(gateway.url.replace('http', 'ws'), [['newHeads'], ['logs', { address: token }]])
    const node = await subscribe(anvil.wsUrl, [['newHeads'], ['logs', { address: token }]])
    await new Promise((resolve) => setTimeout(resolve, 300))

    // The three blocks under the subscribers are replaced, and one more is mined on top.
    await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])
    for (const amount of [11, 12, 13, 14]) await mineTransfer(amount)
    await waitForSameHead(gateway, anvil.rpcUrl)

    const branch = [head - 2, head - 1, head, head + 1].map(String)
    await expect.poll(() => numbers(node.received[1]!)).toEqual(branch)
    // Before: only head and head + 1, the new blocks below the first one announced never were.
    await expect.poll(() => numbers(ours.received[1]!)).toEqual(branch)
    await expect.poll(() => numbers(ours.received[0]!)).toEqual(numbers(node.received[0]!))
    expect(numbers(ours.received[0]!)).toEqual(branch)
  })
})

describe('a logs subscription with a block range or a block hash', () => {
  test('delivers only the logs of blocks inside it, as geth and reth filter them', async () => {
    const head = await waitForSameHead(gateway, anvil.rpcUrl)
    const inside = { fromBlock: `0x${(head + 2).toString(16)}`, toBlock: `0x${(head + 3).toString(16)}` }
    const ours = await subscribe(gateway.url.replace('http', 'ws'), [
      ['logs', { address: token }],
      ['logs', { address: token, ...inside }],
      ['logs', { address: token, fromBlock: `0x${(head + 3).toString(16)}` }],
      ['logs', { address: token, fromBlock: '0x1', toBlock: '0x2' }],
      ['logs', { blockHash: `0x${'ab'.repeat(32)}` }],
    ])
    await new Promise((resolve) => setTimeout(resolve, 300))
    for (const amount of [21, 22, 23, 24]) await mineTransfer(amount)
    await waitForSameHead(gateway, anvil.rpcUrl)
    await expect.poll(() => numbers(ours.received[0]!)).toEqual([head + 1, head + 2, head + 3, head + 4].map(String))
    expect(numbers(ours.received[1]!)).toEqual([head + 2, head + 3].map(String))
    expect(numbers(ours.received[2]!)).toEqual([head + 3, head + 4].map(String))
    expect(ours.received[3]).toEqual([])
    expect(ours.received[4]).toEqual([])
  })
})

describe('newPendingTransactions on a chain without a Flashblocks feed', () => {
  test("each transaction once, as its block seals, by hash and whole, as the HTTP pending filter reports them and as viem's and ethers' watchers ask", async () => {
    const ours = await subscribe(gateway.url.replace('http', 'ws'), [['newPendingTransactions'], ['newPendingTransactions', true]])
    const client = createPublicClient({ transport: webSocket(gateway.url.replace('http', 'ws')) })
    const viemHashes: string[] = []
    const unwatch = client.watchPendingTransactions({ onTransactions: (hashes) => void viemHashes.push(...hashes) })
    const provider = new WebSocketProvider(gateway.url.replace('http', 'ws'), 31337)
    const ethersHashes: string[] = []
    await provider.on('pending', (hash: string) => void ethersHashes.push(hash))
    const filter = await result<string>(gateway.url, 'eth_newPendingTransactionFilter')
    try {
      await new Promise((resolve) => setTimeout(resolve, 300))
      const sent: string[] = []
      for (const amount of [31, 32]) {
        const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(amount)] })
        for (const gas of ['0x30000', '0x30001'])
          sent.push(await anvilCall<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: token, data, gas }]))
        await anvilCall(anvil.rpcUrl, 'evm_mine')
      }
      await waitForSameHead(gateway, anvil.rpcUrl)
      await expect.poll(() => ours.received[0]).toEqual(sent)
      await expect.poll(() => ours.received[1]!.map((transaction) => (transaction as { hash: string }).hash)).toEqual(sent)
      const byNode = await Promise.all(sent.map((hash) => anvilCall(anvil.rpcUrl, 'eth_getTransactionByHash', [hash])))
      expect(ours.received[1]).toEqual(byNode)
      await expect.poll(() => viemHashes).toEqual(sent)
      await expect.poll(() => ethersHashes).toEqual(sent)
      expect(await result(gateway.url, 'eth_getFilterChanges', [filter])).toEqual(sent)
    } finally {
      unwatch()
      await provider.destroy()
    }
  })
})

describe("eth_subscribe's and eth_unsubscribe's arguments", () => {
  test('each wrong one is -32602 naming it, the accepted ones as anvil accepts them', async () => {
    const { call } = await subscribe(gateway.url.replace('http', 'ws'), [])
    const cases: [unknown[], string | null][] = [
      [[], 'missing value for required argument 0'],
      [
        ['nonsense'],
        'invalid argument 0: expected a subscription: one of newHeads, logs, newPendingTransactions, newFlashblocks, pendingLogs, newFlashblockTransactions',
      ],
      [['newHeads', {}], null],
      [['newHeads', true], null],
      [['newHeads', 'x'], 'invalid argument 1: expected no argument'],
      [['logs', {}, 1], 'too many arguments, want at most 2'],
      [['logs', null], null],
      [['logs', { fromBlock: '0x5', toBlock: '0x4' }], 'invalid from and to block combination'],
      [['newPendingTransactions', 'x'], 'invalid argument 1: expected a boolean (true for whole transactions)'],
      [['newPendingTransactions', false], null],
    ]
    let id = 100
    for (const [params, message] of cases) {
      const answer = await call(id++, 'eth_subscribe', params)
      if (message === null) expect(answer.result, JSON.stringify(params)).toMatch(/^0x[1-9a-f][0-9a-f]{0,31}$/)
      else expect(answer.error, JSON.stringify(params)).toEqual({ code: -32602, message })
    }
    expect((await call(id++, 'eth_unsubscribe', [])).error).toEqual({ code: -32602, message: 'missing value for required argument 0' })
    expect((await call(id++, 'eth_unsubscribe', [1])).error).toEqual({ code: -32602, message: 'invalid argument 0: expected a subscription id' })
    expect((await call(id++, 'eth_unsubscribe', [`0x${'00'.repeat(16)}`])).result).toBe(false)
  })
})
