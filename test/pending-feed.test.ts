import { brotliCompressSync, constants } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { FLASHBLOCK_STALE_MS } from '../src/pending/index.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, type FrameKind, flashblock, signedTransfer, startScriptedFeed } from './fixtures/flashblocks.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, blockHashAt, waitForSameHead } from './fixtures/sync.js'

const SENDER = DEV_ACCOUNTS[3]!.address.toLowerCase() as `0x${string}`
const RECIPIENT = `0x${'7e'.repeat(20)}` as const
const TOKEN = `0x${'5c'.repeat(20)}` as const
const TOPIC = `0x${'ab'.repeat(32)}` as const

let anvil: Anvil
let database: TestDatabase
let feed: Awaited<ReturnType<typeof startScriptedFeed>>
let gateway: TestGateway
let head: number
let payloadCounter = 0

beforeAll(async () => {
  anvil = await startAnvil()
  await anvilCall(anvil.rpcUrl, 'anvil_mine', ['0x5'])
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

async function pendingBlock(kind: FrameKind, nonceBase: number) {
  const [plain, withLog] = await Promise.all([
    signedTransfer({ from: 3, nonce: nonceBase, to: RECIPIENT, value: 5n }),
    signedTransfer({ from: 3, nonce: nonceBase + 1, to: RECIPIENT, value: 6n }),
  ])
  const payloadId = `0x${(++payloadCounter).toString(16).padStart(16, '0')}` as const
  feed.send(
    flashblock({
      payloadId,
      index: 0,
      blockNumber: head + 1,
      parentHash: await blockHashAt(anvil.rpcUrl, head),
      transactions: [plain],
      balances: { [RECIPIENT]: 5n },
    }),
    kind,
  )
  feed.send(
    flashblock({
      payloadId,
      index: 1,
      blockNumber: head + 1,
      cumulativeGasBefore: 21_000n,
      transactions: [{ ...withLog, logs: [{ address: TOKEN, topics: [TOPIC], data: '0x' }] }],
      balances: { [RECIPIENT]: 11n },
    }),
    kind,
  )
  return { plain, withLog, payloadId }
}

describe('pending view from a Flashblocks feed', () => {
  test.each(['brotli', 'binary', 'text'] as const)('%s frames feed all four methods with pre-confirmed data', async (kind) => {
    const confirmedNonce = Number((await rpc(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER, 'latest'])).result)
    const { plain, withLog } = await pendingBlock(kind, confirmedNonce)
    await expect
      .poll(async () => (await rpc(gateway.url, 'eth_getTransactionCount', [SENDER, 'pending'])).result)
      .toBe(`0x${(confirmedNonce + 2).toString(16)}`)
    expect((await rpc(gateway.url, 'eth_getBalance', [RECIPIENT, 'pending'])).result).toBe('0xb')
    expect((await rpc(gateway.url, 'eth_getBalance', [RECIPIENT, 'latest'])).result).toBe('0x0')
    const receipts = (await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['pending'])).result as { transactionHash: string; blockHash: string }[]
    expect(receipts.map((receipt) => receipt.transactionHash)).toEqual([plain.hash, withLog.hash])
    expect(new Set(receipts.map((receipt) => receipt.blockHash))).toEqual(new Set([`0x${'00'.repeat(32)}`]))
    const logs = (await rpc(gateway.url, 'eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending', address: TOKEN }])).result
    expect(logs).toEqual([
      expect.objectContaining({ transactionHash: withLog.hash, logIndex: '0x0', transactionIndex: '0x1', blockNumber: `0x${(head + 1).toString(16)}` }),
    ])
    // `fromBlock` earlier than pending: confirmed logs up to latest, then the pending ones.
    expect((await rpc(gateway.url, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'pending', topics: [TOPIC] }])).result).toEqual(logs)
    expect((await rpc(gateway.url, 'eth_getTransactionByHash', [withLog.hash])).result).toMatchObject({
      hash: withLog.hash,
      from: SENDER,
      transactionIndex: '0x1',
    })
    expect((await rpc(gateway.url, 'eth_getTransactionReceipt', [plain.hash])).result).toMatchObject({ status: '0x1', gasUsed: '0x5208' })
    expect((await rpc(gateway.url, 'eth_getBlockByNumber', ['pending', false])).result).toMatchObject({
      number: `0x${(head + 1).toString(16)}`,
      transactions: [plain.hash, withLog.hash],
    })
  })

  test('an undecodable or invalid frame is skipped and the feed goes on', async () => {
    feed.sendRaw(Buffer.from([1, 2, 3, 4]))
    feed.sendRaw('{"payload_id": 5}')
    const confirmedNonce = Number((await rpc(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER, 'latest'])).result)
    await pendingBlock('brotli', confirmedNonce + 10)
    await expect
      .poll(async () => (await rpc(gateway.url, 'eth_getTransactionCount', [SENDER, 'pending'])).result)
      .toBe(`0x${(confirmedNonce + 12).toString(16)}`)
    expect(gateway.feed?.status().rejected).toBeGreaterThanOrEqual(2)
  })

  test('a bad frame right behind a large one (still inflating) is skipped too, and the process goes on', async () => {
    const rejected = gateway.feed!.status().rejected
    const large = Buffer.concat([Buffer.from('{"payload_id":"0x01","x":"'), Buffer.alloc(16 * 1024 * 1024, 0x20), Buffer.from('"}')])
    feed.sendRaw(brotliCompressSync(large, { params: { [constants.BROTLI_PARAM_QUALITY]: 1 } }))
    feed.sendRaw('not json')
    await expect.poll(() => gateway.feed!.status().rejected).toBe(rejected + 2)
    const confirmedNonce = Number((await rpc(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER, 'latest'])).result)
    await pendingBlock('brotli', confirmedNonce + 20)
    await expect
      .poll(async () => (await rpc(gateway.url, 'eth_getTransactionCount', [SENDER, 'pending'])).result)
      .toBe(`0x${(confirmedNonce + 22).toString(16)}`)
  })

  test("a dropped connection keeps the pending view, as Base's node does: the next linked flashblock after the reconnect goes on with it", async () => {
    const { payloadId } = await pendingBlock('brotli', 100)
    const receiptCount = async () => ((await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['pending'])).result as unknown[]).length
    await expect.poll(receiptCount).toBe(2)
    const accepted = feed.accepted
    feed.dropConnections()
    await expect.poll(() => feed.accepted > accepted && feed.clientCount === 1, { timeout: 5_000 }).toBe(true)
    // Reconnected well within the stale limit: nothing was taken back meanwhile.
    expect(await receiptCount()).toBe(2)
    const third = await signedTransfer({ from: 3, nonce: 102, to: RECIPIENT, value: 7n })
    feed.send(flashblock({ payloadId, index: 2, blockNumber: head + 1, cumulativeGasBefore: 42_000n, transactions: [third], previous: `${head + 1}-1` }))
    await expect.poll(async () => (await rpc(gateway.url, 'eth_getTransactionCount', [SENDER, 'pending'])).result).toBe('0x67')
    expect(await receiptCount()).toBe(3)
  })

  test('a dropped connection after which the feed skips a flashblock drops the pending view until the next index 0', async () => {
    const { payloadId } = await pendingBlock('brotli', 150)
    await expect.poll(async () => (await rpc(gateway.url, 'eth_getTransactionCount', [SENDER, 'pending'])).result).toBe('0x98')
    const accepted = feed.accepted
    feed.dropConnections()
    await expect.poll(() => feed.accepted > accepted && feed.clientCount === 1, { timeout: 5_000 }).toBe(true)
    const skipped = await signedTransfer({ from: 3, nonce: 153, to: RECIPIENT, value: 7n })
    feed.send(flashblock({ payloadId, index: 3, blockNumber: head + 1, cumulativeGasBefore: 63_000n, transactions: [skipped], previous: `${head + 1}-2` }))
    await expect
      .poll(async () => (await rpc(gateway.url, 'eth_getBlockByNumber', ['pending', false])).result)
      .toMatchObject({ number: `0x${head.toString(16)}` })
    await pendingBlock('text', 200)
    await expect.poll(async () => (await rpc(gateway.url, 'eth_getTransactionCount', [SENDER, 'pending'])).result).toBe('0xca')
  })

  test(`after ${FLASHBLOCK_STALE_MS} ms of silence, pending answers as latest`, async () => {
    await pendingBlock('brotli', 300)
    await expect.poll(async () => (await rpc(gateway.url, 'eth_getTransactionCount', [SENDER, 'pending'])).result).toBe('0x12e')
    await new Promise((resolve) => setTimeout(resolve, FLASHBLOCK_STALE_MS + 200))
    const latest = await rpc(gateway.url, 'eth_getTransactionCount', [SENDER, 'latest'])
    expect(await rpc(gateway.url, 'eth_getTransactionCount', [SENDER, 'pending'])).toEqual(latest)
    expect(await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['pending'])).toEqual(await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['latest']))
  })

  // Last: it mines a block, which moves the head the tests above build on.
  test('a flashblock without receipts is hydrated from the upstream, which must place the receipt in the pending block', async () => {
    const hash = await anvilCall<`0x${string}`>(anvil.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: RECIPIENT, value: '0x1' }])
    const raw = await anvilCall<`0x${string}`>(anvil.rpcUrl, 'eth_getRawTransactionByHash', [hash])
    // anvil's automine seals the transaction just after answering the send: wait for its receipt.
    const receipt = () => anvilCall<Record<string, unknown> | null>(anvil.rpcUrl, 'eth_getTransactionReceipt', [hash])
    await expect.poll(receipt).not.toBeNull()
    const upstreamReceipt = (await receipt())!
    // Once indexed, so that confirming that block does not void the pre-confirmation below.
    await waitForSameHead(gateway, anvil.rpcUrl)
    const blockNumber = Number(upstreamReceipt.blockNumber) + 10
    feed.send(
      flashblock({
        payloadId: `0x${(++payloadCounter).toString(16).padStart(16, '0')}`,
        index: 0,
        blockNumber,
        transactions: [{ raw, hash }],
        receiptForm: 'none',
      }),
    )
    // The upstream has this transaction in an older, sealed block: not the pre-confirmation of this one.
    const pendingNumber = async () =>
      ((await rpc(gateway.dedicatedUrl, 'eth_getBlockByNumber', ['pending', false])).result as { number?: string } | null)?.number
    await expect.poll(pendingNumber).toBe(`0x${blockNumber.toString(16)}`)
    await expect.poll(() => gateway.pending!.status().hydration.missingReceipts, { timeout: 5_000 }).toBe(1)
    expect((await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['pending'])).result).toEqual([])
  })
})
