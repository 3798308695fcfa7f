import { setTimeout as sleep } from 'node:timers/promises'
import { brotliDecompressSync } from 'node:zlib'
import { type Address, type Hash, type Hex, keccak256, numberToHex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { WebSocket } from 'ws'
import { decodeAttribution } from '../src/attribution/index.js'
import { TRANSFER_TOPIC } from '../src/devnet/contracts.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import type { FlashblockWireMessage } from '../src/pending/message.js'
import { SWAP_TOPIC, SYNC_TOPIC } from '../src/devnet/pool.js'
import { BASE_TRANSACTIONS_PER_BLOCK } from '../src/devnet/profile.js'
import { PROFILE_BUILDER_CODES } from '../src/devnet/base-mix.js'
import { type Query, compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall } from './fixtures/sync.js'

/** Base's timing, the devnet's defaults: ten flashblocks a block. */
const FLASHBLOCKS_PER_BLOCK = 10
/** Whole blocks checked, after the first whole block seen (the profile may have started mid-block). */
const BLOCKS_CHECKED = 3
const TARGET_LOGS_PER_BLOCK = 1_500
const TRANSACTION_TOLERANCE = 0.2
const LOG_TOLERANCE = 0.25
/** ERC-8021 suffixes go on 10% of transactions; over 750 transactions the share stays well inside this. */
const SUFFIX_SHARE_RANGE = [0.05, 0.16] as const
/** No flashblock takes more than this share of its block's transactions: the sends are spread. */
const MAX_FLASHBLOCK_SHARE = 0.4
const POLL_MS = 50
/** 4 whole 2 s blocks take ~10 s; on a machine busy with other test files the devnet's sends fall behind (25 s was missed twice). */
const FEED_TIMEOUT_MS = 60_000

type Block = { number: Hex; hash: Hash; transactions: { hash: Hash; from: Address; to: Address | null; input: Hex }[] }
type Receipt = { status: Hex; logs: { address: Address; topics: Hash[] }[] }

let devnet: Devnet
let database: TestDatabase
let gateway: TestGateway
let socket: WebSocket
/** Flashblocks by block number, in arrival order. */
const frames = new Map<number, FlashblockWireMessage[]>()
/** The blocks checked: whole in the feed, sealed, with their receipts. */
const checked: { number: number; flashblocks: FlashblockWireMessage[]; block: Block; receipts: Receipt[] }[] = []

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, profile: 'base' })
  socket = new WebSocket(devnet.flashblocksUrl)
  socket.on('message', (data: Buffer) => {
    const message = JSON.parse(brotliDecompressSync(data).toString('utf8')) as FlashblockWireMessage
    const number = message.metadata.block_number
    frames.set(number, [...(frames.get(number) ?? []), message])
  })
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })

  // Whole blocks: their flashblocks seen from index 0; the first one is skipped (sends may have begun mid-block).
  const whole = () =>
    [...frames.entries()].filter(([, messages]) => messages[0]?.index === 0 && messages.length === FLASHBLOCKS_PER_BLOCK).map(([number]) => number)
  const deadline = Date.now() + FEED_TIMEOUT_MS
  while (whole().length < BLOCKS_CHECKED + 1) {
    if (Date.now() > deadline) throw new Error(`the feed did not carry ${BLOCKS_CHECKED + 1} whole blocks within ${FEED_TIMEOUT_MS} ms`)
    await sleep(POLL_MS)
  }
  for (const number of whole().slice(1, BLOCKS_CHECKED + 1)) {
    const block = await anvilCall<Block>(devnet.rpcUrl, 'eth_getBlockByNumber', [numberToHex(number), true])
    const receipts = await anvilCall<Receipt[]>(devnet.rpcUrl, 'eth_getBlockReceipts', [numberToHex(number)])
    checked.push({ number, flashblocks: frames.get(number)!, block, receipts })
  }
}, 120_000)

afterAll(async () => {
  socket?.close()
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
})

describe('the base load profile on the devnet', () => {
  test(`each block carries ~${BASE_TRANSACTIONS_PER_BLOCK} transactions and ~${TARGET_LOGS_PER_BLOCK} logs, spread over its ten flashblocks`, () => {
    for (const { number, flashblocks, block, receipts } of checked) {
      expect(
        flashblocks.map((message) => message.index),
        `block ${number}`,
      ).toEqual([...Array(FLASHBLOCKS_PER_BLOCK).keys()])
      const perFlashblock = flashblocks.map((message) => message.diff.transactions.length)
      // The feed announced exactly the sealed block's transactions, in order.
      expect(flashblocks.flatMap((message) => message.diff.transactions.map((raw) => keccak256(raw)))).toEqual(block.transactions.map((tx) => tx.hash))
      const transactions = block.transactions.length
      expect(transactions, `block ${number}`).toBeGreaterThanOrEqual(BASE_TRANSACTIONS_PER_BLOCK * (1 - TRANSACTION_TOLERANCE))
      expect(transactions, `block ${number}`).toBeLessThanOrEqual(BASE_TRANSACTIONS_PER_BLOCK * (1 + TRANSACTION_TOLERANCE))
      expect(perFlashblock.filter((count) => count > 0).length, `block ${number}: ${perFlashblock.join(' ')}`).toBeGreaterThanOrEqual(FLASHBLOCKS_PER_BLOCK - 2)
      expect(Math.max(...perFlashblock), `block ${number}: ${perFlashblock.join(' ')}`).toBeLessThanOrEqual(transactions * MAX_FLASHBLOCK_SHARE)
      const logs = receipts.reduce((sum, receipt) => sum + receipt.logs.length, 0)
      expect(logs, `block ${number}`).toBeGreaterThanOrEqual(TARGET_LOGS_PER_BLOCK * (1 - LOG_TOLERANCE))
      expect(logs, `block ${number}`).toBeLessThanOrEqual(TARGET_LOGS_PER_BLOCK * (1 + LOG_TOLERANCE))
    }
  })

  test('the mix: swaps on the hot pools, token transfers, a few reverts, many senders and recipients', () => {
    const { contracts } = devnet.profile!
    const all = checked.flatMap(({ block, receipts }) => block.transactions.map((tx, index) => ({ tx, receipt: receipts[index]! })))
    const logs = all.flatMap(({ receipt }) => receipt.logs)
    const pools = new Set(contracts.pools.map((pool) => pool.toLowerCase()))
    const tokens = new Set(contracts.tokens.map((token) => token.toLowerCase()))
    expect(logs.filter((log) => log.topics[0] === SWAP_TOPIC && pools.has(log.address)).length).toBeGreaterThan(0)
    expect(logs.filter((log) => log.topics[0] === SYNC_TOPIC).length).toBe(logs.filter((log) => log.topics[0] === SWAP_TOPIC).length)
    expect(logs.filter((log) => log.topics[0] === TRANSFER_TOPIC && tokens.has(log.address)).length).toBeGreaterThan(logs.length / 3)
    const reverted = all.filter(({ receipt }) => receipt.status === '0x0').length
    expect(reverted).toBeGreaterThan(0)
    expect(reverted).toBeLessThan(all.length * 0.1)
    // A long tail: no dev account sends, and many distinct senders.
    expect(new Set(all.map(({ tx }) => tx.from)).size).toBeGreaterThan(50)
  })

  test('a share of the transactions carries ERC-8021 suffixes with the profile builder codes', () => {
    const transactions = checked.flatMap(({ block }) => block.transactions)
    const attributed = transactions.map((tx) => decodeAttribution(tx.input)).filter((decoded) => decoded !== null && decoded.codes.length > 0)
    const share = attributed.length / transactions.length
    expect(share).toBeGreaterThanOrEqual(SUFFIX_SHARE_RANGE[0])
    expect(share).toBeLessThanOrEqual(SUFFIX_SHARE_RANGE[1])
    const codes = new Set(attributed.flatMap((decoded) => decoded!.codes))
    expect(codes.has(PROFILE_BUILDER_CODES[0])).toBe(true)
    for (const code of codes) expect([...PROFILE_BUILDER_CODES, 'profile_wallet']).toContain(code)
  })

  test('a gateway following the devnet answers those blocks exactly as the node does', async () => {
    const last = checked.at(-1)!.number
    await gateway.ingester.waitForBlock(last)
    const { contracts, senders } = devnet.profile!
    const first = numberToHex(checked[0]!.number)
    const queries: Query[] = [
      { method: 'eth_getLogs', params: [{ fromBlock: first, toBlock: numberToHex(last), address: contracts.pools[0], topics: [SWAP_TOPIC] }] },
      { method: 'eth_getLogs', params: [{ fromBlock: first, toBlock: numberToHex(last), address: contracts.tokens, topics: [TRANSFER_TOPIC, null, null] }] },
    ]
    for (const { number, block } of checked) {
      const tag = numberToHex(number)
      queries.push(
        { method: 'eth_getBlockByNumber', params: [tag, false] },
        { method: 'eth_getBlockByNumber', params: [tag, true] },
        { method: 'eth_getBlockByHash', params: [block.hash, false] },
        { method: 'eth_getBlockReceipts', params: [tag] },
        { method: 'eth_getLogs', params: [{ blockHash: block.hash }] },
        { method: 'eth_getLogs', params: [{ fromBlock: tag, toBlock: tag, topics: [[SWAP_TOPIC, SYNC_TOPIC]] }] },
      )
      for (const tx of block.transactions.filter((_, index) => index % 10 === 0)) {
        queries.push({ method: 'eth_getTransactionByHash', params: [tx.hash] }, { method: 'eth_getTransactionReceipt', params: [tx.hash] })
      }
      for (const account of [...senders.slice(0, 10), ...contracts.tokens, ...contracts.pools, block.transactions[0]!.to!]) {
        queries.push({ method: 'eth_getBalance', params: [account, tag] }, { method: 'eth_getTransactionCount', params: [account, tag] })
      }
    }
    const { compared, errors, nonEmpty } = await compareWithReference(gateway.dedicatedUrl, devnet.rpcUrl, queries, { chunk: 20 })
    expect(compared).toBe(queries.length)
    expect(errors).toBe(0)
    expect(nonEmpty.eth_getLogs).toBe(2 + 2 * BLOCKS_CHECKED)
    expect(nonEmpty.eth_getBlockReceipts).toBe(BLOCKS_CHECKED)
  })
})
