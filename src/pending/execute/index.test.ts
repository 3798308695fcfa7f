import { pino } from 'pino'
import { concat, type Hex, keccak256, toHex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { DEV_ACCOUNTS, flashblock, type ScriptedTransaction, signedTransfer } from '../../../test/fixtures/flashblocks.js'
import { startDelayProxy } from '../../../test/fixtures/delay-proxy.js'
import { freePort } from '../../../test/fixtures/ports.js'
import { type Anvil, startAnvil } from '../../devnet/anvil.js'
import { createAnvilClient } from '../../devnet/anvil-client.js'
import { createUpstream } from '../../upstream/index.js'
import { flashblockMessage } from '../message.js'
import { createPendingState } from '../state.js'
import { createFlashblockExecutor, RESULT_TIMEOUT_MS } from './index.js'
import type { PrestateDiff } from '../../ingest/account-diffs.js'

// The executor behind a real pending state, over a real anvil as the upstream: a transfer executed (receipt
// and the balances it left), divergence, a failing upstream, a backlog. OP-Stack blocks:
// test/pending-execute-op-stack.test.ts.

let anvil: Anvil

beforeAll(async () => {
  anvil = await startAnvil({})
}, 30_000)

afterAll(async () => {
  await anvil?.stop()
})

/** A pending state with an executor as its receipt source, reading through `request` (anvil by default). */
function executing(request?: <T>(method: string, params: unknown[]) => Promise<T>) {
  const logger = pino({ level: 'silent' })
  const state = createPendingState({ logger })
  const upstream = createUpstream({ rpcUrl: anvil.rpcUrl })
  const executor = createFlashblockExecutor({
    state,
    chainId: 31337,
    request: request ?? ((method, params) => upstream.batchedRequest(method, params)),
    logger,
  })
  state.setHydrate(executor.hydrate)
  return { state, executor }
}

async function setUp() {
  const { state, executor } = executing()
  const upstream = createUpstream({ rpcUrl: anvil.rpcUrl })
  const head = Number(await upstream.request<Hex>('eth_blockNumber'))
  const parent = await upstream.request<{ hash: Hex; timestamp: Hex }>('eth_getBlockByNumber', [toHex(head), false])
  const apply = async (message: ReturnType<typeof flashblock>) => {
    await state.apply(flashblockMessage.parse(message))
    await executor.idle()
    await state.settled()
  }
  const number = head + 1
  /** Opens the block after the head with `transactions` as its first flashblock; the pending block once executed. */
  const openBlock = async (transactions: ScriptedTransaction[]) => {
    await apply(
      flashblock({ index: 0, blockNumber: number, parentHash: parent.hash, timestamp: Number(parent.timestamp) + 2, format: 'current', transactions }),
    )
    return state.blocks(number - 1).find((candidate) => candidate.number === number)!
  }
  return { state, executor, number, parent, apply, openBlock }
}

/** Sends a transaction to anvil (mining on each) and returns the block that holds it, which must be `number`. */
async function sealedIn(upstream: ReturnType<typeof createUpstream>, raw: Hex, number: number): Promise<{ hash: Hex; parentHash: Hex } & Record<string, Hex>> {
  const hash = await upstream.request<Hex>('eth_sendRawTransaction', [raw])
  let receipt: { blockNumber: Hex } | null = null
  while (receipt === null) receipt = await upstream.request<{ blockNumber: Hex } | null>('eth_getTransactionReceipt', [hash])
  expect(Number(receipt.blockNumber)).toBe(number)
  return upstream.request<{ hash: Hex; parentHash: Hex } & Record<string, Hex>>('eth_getBlockByNumber', [receipt.blockNumber, false])
}

/** Base's builder skips the state root per flashblock. */
const ZERO_HASH: Hex = `0x${'00'.repeat(32)}`
/** A transaction no decoder knows (an unknown EIP-2718 type). */
const UNDECODABLE: Hex = '0x05c0ffee'

type SealedBlock = Awaited<ReturnType<typeof sealedIn>>

/**
 * A flashblock of a block the upstream sealed, in the form Base's builder sends today: its header fields
 * from the sealed block, a zero state root, a `block_hash` of the flashblock's own (never the sealed one),
 * and `previous` as its `prev_flashblock_id`.
 */
function todaysFlashblock(sealed: SealedBlock, index: number, transactions: ScriptedTransaction[], options: { previous?: string; extraRaw?: Hex[] } = {}) {
  const message = flashblock({
    index,
    blockNumber: Number(sealed.number),
    parentHash: sealed.parentHash,
    timestamp: Number(sealed.timestamp),
    format: 'current',
    transactions,
    ...options,
  })
  const payloadId = message.payload_id
  Object.assign(message.diff, { state_root: ZERO_HASH, block_hash: keccak256(concat([payloadId, toHex(index, { size: 8 })])) })
  if (message.base) Object.assign(message.base, { fee_recipient: sealed.miner, base_fee_per_gas: sealed.baseFeePerGas, gas_limit: sealed.gasLimit })
  return message
}

/** A receipt as compared with the sealed one: the block hash aside (zeros while pre-confirmed), the timestamp as a number. */
function comparable(receipt: Record<string, unknown>): Record<string, unknown> {
  const { blockHash: _blockHash, blockTimestamp, logs, ...fields } = receipt
  return {
    ...fields,
    ...(blockTimestamp !== undefined && { blockTimestamp: Number(blockTimestamp) }),
    logs: (logs as Record<string, unknown>[]).map(({ blockHash: _logBlockHash, blockTimestamp: logTimestamp, ...log }) => ({
      ...log,
      ...(logTimestamp !== undefined && { blockTimestamp: Number(logTimestamp) }),
    })),
  }
}

/**
 * Two blocks the upstream sealed, one transfer each from the same sender to the same recipient, fed in today's
 * form: block N in two flashblocks (the second with `tail` after nothing), then N+1's index 0 naming `link(N)`
 * as the flashblock it follows. The executor's status, its upstream reads for N+1, and both blocks' executed
 * receipts beside the sealed ones.
 */
async function twoBlocksInTodaysForm({ link, tail }: { link: (number: number) => string | undefined; tail?: Hex[] }) {
  const upstream = createUpstream({ rpcUrl: anvil.rpcUrl })
  const { state, executor, number, apply } = await setUp()
  const nonce = Number(await upstream.request<Hex>('eth_getTransactionCount', [DEV_ACCOUNTS[1]!.address, 'latest']))
  const recipient = `0x${'d4'.repeat(20)}` as Hex
  const first = await signedTransfer({ from: 1, nonce, to: recipient, value: 1_000n })
  const second = await signedTransfer({ from: 1, nonce: nonce + 1, to: recipient, value: 2_000n })
  const sealedFirst = await sealedIn(upstream, first.raw, number)
  const sealedSecond = await sealedIn(upstream, second.raw, number + 1)
  await apply(todaysFlashblock(sealedFirst, 0, [first], { previous: '0-0' }))
  await apply(todaysFlashblock(sealedFirst, 1, [], { previous: `${number}-0`, ...(tail && { extraRaw: tail }) }))
  const readsBefore = executor.status().upstreamReads
  const previous = link(number)
  await apply(todaysFlashblock(sealedSecond, 0, [second], previous === undefined ? {} : { previous }))
  const pending = state.blocks(number - 1)
  const executed = [number, number + 1].map((blockNumber) => pending.find((block) => block.number === blockNumber)?.receipts[0] ?? null)
  const sealed = await Promise.all([first, second].map((transfer) => upstream.request<Record<string, unknown>>('eth_getTransactionReceipt', [transfer.hash])))
  executor.stop()
  return { status: executor.status(), readsForNext: executor.status().upstreamReads - readsBefore, executed, sealed }
}

describe('flashblock executor', () => {
  test('a transfer is executed on the parent state: its receipt, and the balances it left', async () => {
    const { executor, openBlock } = await setUp()
    const nonce = Number(await createUpstream({ rpcUrl: anvil.rpcUrl }).request<Hex>('eth_getTransactionCount', [DEV_ACCOUNTS[2]!.address, 'latest']))
    const recipient = `0x${'5a'.repeat(20)}` as Hex
    const block = await openBlock([await signedTransfer({ from: 2, nonce, to: recipient, value: 12_345n })])
    expect(block.receipts[0]).toMatchObject({ status: '0x1', gasUsed: '0x5208', cumulativeGasUsed: '0x5208', logs: [], transactionIndex: '0x0' })
    expect(block.balances.get(recipient)).toBe(12_345n)
    expect(executor.status()).toMatchObject({ executedTransactions: 1, failedBlocks: 0, executedDeposits: 0 })
    executor.stop()
  })

  test("BLOCKHASH sees the pending block's ancestors: its parent from the feed, older ones from the upstream", async () => {
    const upstream = createUpstream({ rpcUrl: anvil.rpcUrl })
    await upstream.request('anvil_mine', ['0x6'])
    // Logs blockhash(number - 1) and blockhash(number - 5): NUMBER 1 SWAP1 SUB BLOCKHASH 0 MSTORE …, LOG0(0, 64).
    const probe: Hex = `0x${'b1'.repeat(20)}`
    await upstream.request('anvil_setCode', [probe, '0x436001900340600052436005900340602052604060' + '00a000'])
    const { executor, number, parent, openBlock } = await setUp()
    const nonce = Number(await upstream.request<Hex>('eth_getTransactionCount', [DEV_ACCOUNTS[3]!.address, 'latest']))
    const block = await openBlock([await signedTransfer({ from: 3, nonce, to: probe, value: 0n, gas: 60_000n })])
    const older = await upstream.request<{ hash: Hex }>('eth_getBlockByNumber', [toHex(number - 5), false])
    expect((block.receipts[0] as { logs: { data: Hex }[] }).logs[0]!.data).toBe(`${parent.hash}${older.hash.slice(2)}`)
    executor.stop()
  })

  test("after a block it could not execute to its end, the next starts from the cache caught up with the sealed block's state diffs", async () => {
    const upstream = createUpstream({ rpcUrl: anvil.rpcUrl })
    const { state, executor, number, apply, openBlock } = await setUp()
    const nonce = Number(await upstream.request<Hex>('eth_getTransactionCount', [DEV_ACCOUNTS[0]!.address, 'latest']))
    const recipient = `0x${'c7'.repeat(20)}` as Hex
    // The sealed block holds the transfer with the right nonce; the feed announced one the EVM refuses (its nonce is ahead).
    const sealedTransfer = await signedTransfer({ from: 0, nonce, to: recipient, value: 1_000n })
    const sealedBlock = await sealedIn(upstream, sealedTransfer.raw, number)
    await openBlock([await signedTransfer({ from: 0, nonce: nonce + 7, to: recipient })])
    expect(executor.status().failedBlocks).toBe(1)
    const traces = await upstream.request<{ result: PrestateDiff }[]>('debug_traceBlockByHash', [
      sealedBlock.hash,
      { tracer: 'prestateTracer', tracerConfig: { diffMode: true } },
    ])
    executor.sealed({ number, hash: sealedBlock.hash, block: { parentHash: sealedBlock.parentHash }, stateDiffs: traces.map((trace) => trace.result) })
    // The next block spends from what the sealed one left: the sender's nonce and the recipient's balance.
    const next = await signedTransfer({ from: 0, nonce: nonce + 1, to: recipient, value: 2_000n })
    const sealedNext = await sealedIn(upstream, next.raw, number + 1)
    const opening = flashblock({
      index: 0,
      blockNumber: number + 1,
      parentHash: sealedBlock.hash,
      timestamp: Number(sealedNext.timestamp),
      format: 'current',
      transactions: [next],
    })
    Object.assign(opening.base!, { fee_recipient: sealedNext.miner, base_fee_per_gas: sealedNext.baseFeePerGas, gas_limit: sealedNext.gasLimit })
    await apply(opening)
    expect(executor.status()).toMatchObject({ canonicalBlocks: 1, failedBlocks: 1 })
    const block = state.blocks(number).find((candidate) => candidate.number === number + 1)!
    expect(block.receipts[0]).toMatchObject({ status: '0x1', gasUsed: '0x5208' })
    expect(block.balances.get(recipient)).toBe(3_000n)
    expect(block.balances.get(DEV_ACCOUNTS[0]!.address.toLowerCase() as Hex)).toBe(
      BigInt(await upstream.request<Hex>('eth_getBalance', [DEV_ACCOUNTS[0]!.address, toHex(number + 1)])),
    )
    executor.stop()
  })

  test("today's frames (zero state root, a block_hash per flashblock, linked): the next block runs on the state the one before left, its receipts the sealed ones", async () => {
    const { status, readsForNext, executed, sealed } = await twoBlocksInTodaysForm({ link: (number) => `${number}-1` })
    expect(status).toMatchObject({ carriedBlocks: 1, freshBlocks: 1, failedBlocks: 0, executedTransactions: 2 })
    // Everything the second transfer touches (sender, recipient, fee recipient) the first one left: nothing is read again.
    expect(readsForNext).toBe(0)
    expect(executed.map((receipt) => receipt && comparable(receipt))).toEqual(sealed.map(comparable))
  })

  test("today's frames without a link, or linked to another flashblock than the last one executed, start afresh", async () => {
    const unlinked = await twoBlocksInTodaysForm({ link: () => undefined })
    expect(unlinked.status).toMatchObject({ carriedBlocks: 0, freshBlocks: 2 })
    expect(unlinked.readsForNext).toBeGreaterThan(0)
    expect(unlinked.executed.map((receipt) => receipt && comparable(receipt))).toEqual(unlinked.sealed.map(comparable))
    // "0-0": the builder names none (its first after a restart).
    expect((await twoBlocksInTodaysForm({ link: () => '0-0' })).status).toMatchObject({ carriedBlocks: 0, freshBlocks: 2 })
    // Linked past the last flashblock seen (the block's tail was lost) or to an earlier one.
    for (const link of [(number: number) => `${number}-2`, (number: number) => `${number}-0`]) {
      const broken = await twoBlocksInTodaysForm({ link })
      expect(broken.status).toMatchObject({ carriedBlocks: 0, freshBlocks: 2 })
      expect(broken.executed[1] && comparable(broken.executed[1])).toEqual(comparable(broken.sealed[1]!))
    }
  })

  test("today's frames, linked, after a block whose last transaction could not be executed (undecodable), start afresh", async () => {
    const { status } = await twoBlocksInTodaysForm({ link: (number) => `${number}-1`, tail: [UNDECODABLE] })
    expect(status).toMatchObject({ carriedBlocks: 0, freshBlocks: 2, executedTransactions: 2 })
  })

  test('a block executing on the state of one that diverged from its sealed block is withdrawn with it', async () => {
    const { state, executor, number, parent, apply } = await setUp()
    const withdrawn: number[] = []
    state.events.on('withdrawn', (block) => withdrawn.push(block.number))
    const upstream = createUpstream({ rpcUrl: anvil.rpcUrl })
    const nonce = Number(await upstream.request<Hex>('eth_getTransactionCount', [DEV_ACCOUNTS[1]!.address, 'latest']))
    const first = await signedTransfer({ from: 1, nonce })
    const second = await signedTransfer({ from: 1, nonce: nonce + 1 })
    const firstHash = keccak256('0x0a')
    const timestamp = Number(parent.timestamp) + 2
    const opening = flashblock({ index: 0, blockNumber: number, parentHash: parent.hash, timestamp, format: 'current', transactions: [first] })
    opening.diff.block_hash = firstHash
    await apply(opening)
    await apply(flashblock({ index: 0, blockNumber: number + 1, parentHash: firstHash, timestamp: timestamp + 2, format: 'current', transactions: [second] }))
    const child = state.blocks(number - 1).find((candidate) => candidate.number === number + 1)!
    expect(child.receipts[0]).not.toBeNull()
    expect(executor.status()).toMatchObject({ carriedBlocks: 1, executedTransactions: 2 })
    // Sealed, the first block says the transfer used other gas than executed: a divergence.
    state.confirm({
      number,
      hash: firstHash,
      transactionHashes: [first.hash],
      receipts: [{ status: '0x1', gasUsed: '0x5209', cumulativeGasUsed: '0x5209', logs: [] }],
    })
    expect(state.status().divergences.receipt).toBe(1)
    expect(withdrawn.sort((a, b) => a - b)).toEqual([number, number + 1])
    expect(child.receipts).toEqual([null])
    expect(executor.status().withdrawnBlocks).toBe(1)
    executor.stop()
  })

  test('an upstream that cannot be read stops the block, and its receipts are given up at once, not when they expire', async () => {
    const closed = createAnvilClient(`http://127.0.0.1:${await freePort()}`)
    const { state, executor } = executing((method, params) => closed.request(method, params))
    const transfer = await signedTransfer({ from: 2, nonce: 0 })
    const started = performance.now()
    await state.apply(flashblockMessage.parse(flashblock({ index: 0, blockNumber: 5, format: 'current', transactions: [transfer] })))
    await state.settled()
    expect(performance.now() - started).toBeLessThan(RESULT_TIMEOUT_MS)
    expect(state.blocks(4)[0]!.receipts).toEqual([null])
    expect(executor.status()).toMatchObject({ failedBlocks: 1, executedTransactions: 0 })
    executor.stop()
  })

  test('flashblocks of a block sealed while they waited their turn are not executed', async () => {
    const proxy = await startDelayProxy(anvil.rpcUrl)
    proxy.setDelay(300)
    const slow = createUpstream({ rpcUrl: proxy.url })
    const { state, executor } = executing((method, params) => slow.batchedRequest(method, params))
    const upstream = createUpstream({ rpcUrl: anvil.rpcUrl })
    const head = Number(await upstream.request<Hex>('eth_blockNumber'))
    const parent = await upstream.request<{ hash: Hex; timestamp: Hex }>('eth_getBlockByNumber', [toHex(head), false])
    const nonce = Number(await upstream.request<Hex>('eth_getTransactionCount', [DEV_ACCOUNTS[4]!.address, 'latest']))
    const [first, second] = await Promise.all([signedTransfer({ from: 4, nonce }), signedTransfer({ from: 4, nonce: nonce + 1, to: `0x${'71'.repeat(20)}` })])
    const timestamp = Number(parent.timestamp) + 2
    await state.apply(
      flashblockMessage.parse(flashblock({ index: 0, blockNumber: head + 1, parentHash: parent.hash, timestamp, format: 'current', transactions: [first] })),
    )
    await state.apply(flashblockMessage.parse(flashblock({ index: 1, blockNumber: head + 1, format: 'current', transactions: [second] })))
    // Sealed while the first flashblock's reads are on their way; the second has not started.
    state.confirm({ number: head + 1, hash: keccak256('0x0b'), transactionHashes: [first.hash, second.hash] })
    await executor.idle()
    await state.settled()
    // Only the first flashblock's accounts were read (sender, recipient, fee recipient); the second's recipient never.
    expect(proxy.calls()).toBe(9)
    // The block stopped short of its end: the next does not start from what it left (its second transfer missing).
    await state.apply(
      flashblockMessage.parse(
        flashblock({
          index: 0,
          blockNumber: head + 2,
          parentHash: keccak256('0x0b'),
          timestamp: timestamp + 2,
          format: 'current',
          transactions: [await signedTransfer({ from: 4, nonce: nonce + 2 })],
        }),
      ),
    )
    await executor.idle()
    expect(executor.status()).toMatchObject({ carriedBlocks: 0, freshBlocks: 2 })
    await proxy.stop()
    executor.stop()
  })
})
