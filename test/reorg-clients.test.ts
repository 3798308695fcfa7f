// Reorgs as clients see them: after anvil replaces blocks (`anvil_reorg`, or a snapshot reverted and mined
// again), every answer a wallet or an indexer reads through flashgate is anvil's for the same chain, though
// the answer cache, the call memo and the upstream reads held answers of the replaced blocks.
import { encodeFunctionData, type Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Anvil } from '../src/devnet/anvil.js'
import { tokenAbi } from '../src/devnet/contracts.js'
import { compareWithReference, type Query } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { result, startManualAnvilWithToken, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

const SENDER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'
const RECIPIENT = '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc'

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
