// Reorgs as clients see them: after anvil replaces blocks (`anvil_reorg`, or a snapshot reverted and mined
// again), every answer a wallet or an indexer reads through flashgate is anvil's for the same chain, though
// the answer cache, the call memo and the upstream reads held answers of the replaced blocks.
import { setTimeout as sleep } from 'node:timers/promises'
import { Contract, JsonRpcProvider } from 'ethers'
import { createPublicClient, encodeFunctionData, type Hex, http, webSocket } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Anvil } from '../src/devnet/anvil.js'
import { tokenAbi } from '../src/devnet/contracts.js'
import { FILTER_REORG_DEPTH } from '../src/resolvers/filters.js'
import { compareWithReference, type Query } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { result, startManualAnvilWithToken, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

const SENDER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'
const RECIPIENT = '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc'
/** Long enough for a watcher polling every 100 ms (viem, ethers) to have polled a few times. */
const WATCHERS_SETTLE_MS = 1_500

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let token: Hex
let amount = 1

const quantity = (number: number) => `0x${number.toString(16)}`
const headOf = async (url: string) => Number(await anvilCall<Hex>(url, 'eth_blockNumber'))

/** `blocks` blocks of `perBlock` token transfers from SENDER, each a new amount (so a replaced block differs). */
async function mineTransfers(blocks: number, perBlock = 2): Promise<void> {
  for (let block = 0; block < blocks; block++) {
    for (let index = 0; index < perBlock; index++) {
      const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(amount++)] })
      await anvilCall(anvil.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: token, data, gas: '0x30000' }])
    }
    await anvilCall(anvil.rpcUrl, 'evm_mine')
  }
}

/**
 * Replaces the newest `depth` blocks with as many others (`anvil_reorg`: the head's number stays, so no client
 * sees it go down), each holding `perBlock` transfers of new amounts from SENDER.
 */
async function reorgWithTransfers(depth: number, perBlock = 2): Promise<void> {
  const head = await headOf(anvil.rpcUrl)
  const nonce = Number(await anvilCall<Hex>(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER, quantity(head - depth)]))
  const transactions = Array.from({ length: depth * perBlock }, (_, index) => [
    {
      from: SENDER,
      to: token,
      input: encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(amount++)] }),
      gas: '0x30000',
      nonce: quantity(nonce + index),
    },
    Math.floor(index / perBlock),
  ])
  await anvilCall(anvil.rpcUrl, 'anvil_reorg', [depth, transactions])
}

/** What a wallet and an indexer ask around the head: every block answer from `from` to one past the head. */
async function readsAroundHead(from: number, extra: Query[] = []): Promise<Query[]> {
  const head = await headOf(anvil.rpcUrl)
  const queries: Query[] = [
    { method: 'eth_blockNumber', params: [] },
    { method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: 'latest' }] },
    { method: 'eth_getLogs', params: [{ address: token, fromBlock: quantity(from) }] },
    ...['latest', 'pending'].flatMap((tag) => [
      { method: 'eth_getTransactionCount', params: [SENDER, tag] },
      { method: 'eth_getBalance', params: [SENDER, tag] },
    ]),
    // Not `pending`: without a feed flashgate's is `latest`, anvil's the next block it would mine.
    { method: 'eth_getBlockByNumber', params: ['latest', false] },
    ...extra,
  ]
  for (let number = from; number <= head + 1; number++)
    queries.push(
      { method: 'eth_getBlockByNumber', params: [quantity(number), true] },
      { method: 'eth_getBlockReceipts', params: [quantity(number)] },
      { method: 'eth_getLogs', params: [{ fromBlock: quantity(number), toBlock: quantity(number) }] },
      { method: 'eth_getTransactionCount', params: [SENDER, quantity(number)] },
      { method: 'eth_getBalance', params: [SENDER, quantity(number)] },
    )
  return queries
}

/** The reads a client makes of blocks by hash and of their transactions: what it kept of blocks since replaced. */
async function readsOfBlocks(from: number, to: number): Promise<Query[]> {
  const queries: Query[] = []
  for (let number = from; number <= to; number++) {
    const block = await anvilCall<{ hash: Hex; transactions: Hex[] }>(anvil.rpcUrl, 'eth_getBlockByNumber', [quantity(number), false])
    queries.push(
      { method: 'eth_getBlockByHash', params: [block.hash, false] },
      { method: 'eth_getLogs', params: [{ blockHash: block.hash }] },
      { method: 'eth_getBlockReceipts', params: [block.hash] },
      { method: 'eth_getBlockTransactionCountByHash', params: [block.hash] },
      ...block.transactions.flatMap((hash) => [
        { method: 'eth_getTransactionReceipt', params: [hash] },
        { method: 'eth_getTransactionByHash', params: [hash] },
      ]),
    )
  }
  return queries
}

beforeAll(async () => {
  ;({ anvil, token } = await startManualAnvilWithToken(SENDER))
  await mineTransfers(3)
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, upstreamWs: anvil.wsUrl, databaseUrl: database.databaseUrl })
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('answers after a reorg', () => {
  test.each([1, 3])(
    "anvil_reorg %i deep: every answer is anvil's, those of the replaced blocks (by number and by hash) included, after the caches held the old ones",
    async (depth) => {
      await mineTransfers(depth + 1)
      const head = await waitForSameHead(gateway, anvil.rpcUrl)
      const from = head - depth - 1
      const replaced = await readsOfBlocks(head - depth + 1, head)
      // Twice: the answer cache and the call memo hold every answer of the branch about to be replaced.
      for (let round = 0; round < 2; round++) await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, await readsAroundHead(from, replaced))

      // The replaced blocks' transactions are mined again in other blocks, one block later each.
      const transactions = await Promise.all(
        replaced
          .filter((query) => query.method === 'eth_getTransactionByHash')
          .map((query) => anvilCall<Record<string, unknown>>(anvil.rpcUrl, 'eth_getTransactionByHash', query.params)),
      )
      const again = transactions.map((transaction) => [
        { from: transaction.from, to: transaction.to, input: transaction.input, gas: transaction.gas, nonce: transaction.nonce },
        Math.min(depth - 1, Number(transaction.blockNumber) - (head - depth + 1) + 1),
      ])
      await anvilCall(anvil.rpcUrl, 'anvil_reorg', [depth, again])
      await waitForSameHead(gateway, anvil.rpcUrl)
      const outcome = await compareWithReference(
        gateway.dedicatedUrl,
        anvil.rpcUrl,
        await readsAroundHead(from, [...replaced, ...(await readsOfBlocks(head - depth + 1, head))]),
      )
      expect(outcome.nonEmpty.eth_getTransactionReceipt).toBeGreaterThan(0)
    },
  )

  test('the head never goes down while a branch of 20 blocks replaces the indexed one at the same height, as on the node', async () => {
    await mineTransfers(20, 1)
    const head = await waitForSameHead(gateway, anvil.rpcUrl)
    const replaced = await readsOfBlocks(head - 19, head)
    await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, await readsAroundHead(head - 21, replaced))
    const seen: number[] = []
    let watching = true
    const watcher = (async () => {
      while (watching) seen.push(await headOf(gateway.url))
    })()
    try {
      await reorgWithTransfers(20, 1)
      await waitForSameHead(gateway, anvil.rpcUrl)
      // A few more reads after the new branch shows: the head must not step back after it either.
      await sleep(200)
    } finally {
      watching = false
      await watcher
    }
    expect(seen.length).toBeGreaterThan(10)
    // The rewind to the fork and the new branch's blocks are one commit: the index is never seen at the fork.
    expect(Math.min(...seen)).toBe(head)
    expect(await headOf(gateway.url)).toBe(head)
    // Deeper than the reorgs above, with the answers of the replaced blocks read (and kept) before it.
    await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, await readsAroundHead(head - 21, replaced))
  })

  test("the pending nonce is the new branch's as soon as the head is, not the upstream's pending count read before the reorg", async () => {
    await mineTransfers(3)
    await waitForSameHead(gateway, anvil.rpcUrl)
    // Read (and kept for a moment: it is a floor under the pending nonce) while the replaced blocks were canonical.
    expect(await result(gateway.url, 'eth_getTransactionCount', [SENDER, 'pending'])).toBe(
      await anvilCall(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER, 'pending']),
    )
    // anvil drops the replaced blocks' transactions (geth would return them to its pool): SENDER's nonce goes back by 6.
    await anvilCall(anvil.rpcUrl, 'anvil_reorg', [3, []])
    await waitForSameHead(gateway, anvil.rpcUrl)
    const [ours, node] = await Promise.all([
      result(gateway.url, 'eth_getTransactionCount', [SENDER, 'pending']),
      anvilCall(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER, 'pending']),
    ])
    expect(ours).toBe(node)
  })
})

type ClientLog = {
  blockHash: string
  blockNumber?: Hex | bigint | number
  transactionHash: string
  logIndex?: number | string | null
  index?: number
  removed?: boolean
}

/** What a client keeps of the logs it is told of: added as they come, taken out when they come again `removed`. */
function logBook() {
  const kept = new Map<string, ClientLog>()
  const heard: string[] = []
  const keyOf = (log: ClientLog) => `${log.blockHash}:${Number(log.logIndex ?? log.index)}`
  return {
    kept,
    heard,
    take(log: ClientLog) {
      heard.push(`${keyOf(log)}${log.removed ? ' removed' : ''}`)
      if (log.removed) kept.delete(keyOf(log))
      else kept.set(keyOf(log), log)
    },
    keys: () => [...kept.keys()].sort(),
  }
}

describe('event watchers across reorgs', () => {
  const stops: (() => unknown)[] = []
  const books = new Map<string, ReturnType<typeof logBook>>()
  let from = 0

  beforeAll(async () => {
    from = (await waitForSameHead(gateway, anvil.rpcUrl)) + 1
    for (const [name, url] of [
      ['flashgate', gateway.url],
      ['anvil', anvil.rpcUrl],
    ] as const) {
      for (const transport of ['http', 'ws'] as const) {
        const book = logBook()
        books.set(`viem ${transport} ${name}`, book)
        const client = createPublicClient({
          transport: transport === 'http' ? http(url) : webSocket(url.replace('http', 'ws'), { reconnect: false }),
          pollingInterval: 100,
        })
        stops.push(
          client.watchContractEvent({
            address: token,
            abi: tokenAbi,
            eventName: 'Transfer',
            onLogs: (logs) => {
              for (const log of logs) book.take(log as ClientLog)
            },
          }),
        )
      }
      const book = logBook()
      books.set(`ethers http ${name}`, book)
      const provider = new JsonRpcProvider(url, 31337, { staticNetwork: true, polling: true, pollingInterval: 100 })
      const contract = new Contract(token, ['event Transfer(address indexed from, address indexed to, uint256 value)'], provider)
      await contract.on('Transfer', (...args: unknown[]) => book.take((args.at(-1) as { log: ClientLog }).log))
      stops.push(() => provider.destroy())
    }
    // Every watcher has installed its filter or subscription before the first block it must hear of.
    await sleep(WATCHERS_SETTLE_MS)
  })

  afterAll(async () => {
    for (const stop of stops) await stop()
  })

  /** Waits until flashgate has the head and every watcher has had time to hear of it. */
  async function settled() {
    await waitForSameHead(gateway, anvil.rpcUrl)
    await sleep(WATCHERS_SETTLE_MS)
  }

  test.each([1, 3, 20])(
    "anvil_reorg %i deep, new logs in every replaced block: viem over HTTP (filters) and over a socket ends with the chain's logs, and ethers hears the blocks after it",
    async (depth) => {
      await mineTransfers(depth)
      await settled()
      await reorgWithTransfers(depth)
      await mineTransfers(1)
      await settled()
      const logs = await anvilCall<ClientLog[]>(anvil.rpcUrl, 'eth_getLogs', [{ address: token, fromBlock: quantity(from), toBlock: 'latest' }])
      const chain = logs.map((log) => `${log.blockHash}:${Number(log.logIndex)}`).sort()
      // Through flashgate each viem watcher is told of the replaced logs again with `removed: true` (anvil tells
      // neither its filters nor its subscribers, so a client of anvil keeps them): it ends with the chain's.
      // Filters find a reorg up to FILTER_REORG_DEPTH blocks deep, subscriptions up to 64.
      if (depth <= FILTER_REORG_DEPTH) expect(books.get('viem http flashgate')!.keys()).toEqual(chain)
      expect(books.get('viem ws flashgate')!.keys()).toEqual(chain)
      expect(books.get('viem ws anvil')!.heard.some((log) => log.endsWith('removed'))).toBe(false)
      // ethers v6 reads eth_getLogs past the highest block it has seen and takes nothing back (from anvil as
      // from flashgate): it does not hear the replaced blocks' new logs, but goes on with the blocks after them.
      const head = await headOf(anvil.rpcUrl)
      const newest = logs.filter((log) => Number(log.blockNumber) === head)
      expect(newest.length).toBeGreaterThan(0)
      for (const log of newest) expect(books.get('ethers http flashgate')!.kept.has(`${log.blockHash}:${Number(log.logIndex)}`)).toBe(true)
    },
  )
})
