import { pino } from 'pino'
import { beforeAll, describe, expect, test } from 'vitest'
import { DEV_ACCOUNTS, flashblock, type ScriptedTransaction, signedTransfer } from '../../test/fixtures/flashblocks.js'
import { sealedForm } from '../objects/receipt.js'
import { formatPendingTransaction } from '../objects/transaction.js'
import { flashblockMessage } from './message.js'
import { AWAIT_PARENT_MS, createPendingState, FLASHBLOCK_STALE_MS } from './state.js'

const logger = pino({ level: 'silent' })
const parse = (message: Record<string, unknown>) => flashblockMessage.parse(message)
const TOPIC = `0x${'ab'.repeat(32)}` as const

let transactions: ScriptedTransaction[]

beforeAll(async () => {
  transactions = await Promise.all(Array.from({ length: 6 }, (_, nonce) => signedTransfer({ nonce })))
  transactions[1] = { ...transactions[1]!, logs: [{ address: `0x${'5c'.repeat(20)}`, topics: [TOPIC], data: '0x01' }], gasUsed: 30_000n }
})

function createState() {
  let clock = 1_000
  const state = createPendingState({ logger, now: () => clock })
  return { state, advance: (ms: number) => (clock += ms) }
}

describe('pending state: sequence rules', () => {
  test('index 0 opens a block, the next index appends, and receipts get block-wide indexes', async () => {
    const { state } = createState()
    expect(await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) })))).toBe('started')
    expect(await state.apply(parse(flashblock({ index: 1, blockNumber: 10, transactions: transactions.slice(1, 3), cumulativeGasBefore: 21_000n })))).toBe(
      'appended',
    )
    const [block] = state.blocks(9)
    expect(block?.transactions.map((transaction) => transaction.hash)).toEqual(transactions.slice(0, 3).map((transaction) => transaction.hash))
    expect(block?.receipts.map((receipt) => [receipt?.transactionIndex, receipt?.gasUsed, receipt?.cumulativeGasUsed])).toEqual([
      ['0x0', '0x5208', '0x5208'],
      ['0x1', '0x7530', '0xc738'],
      ['0x2', '0x5208', '0x11940'],
    ])
    expect(block?.receipts[1]?.logs).toEqual([
      expect.objectContaining({ logIndex: '0x0', transactionIndex: '0x1', blockNumber: '0xa', topics: [TOPIC], removed: false }),
    ])
    expect(block?.transactions[0]?.from).toBe(DEV_ACCOUNTS[0]!.address.toLowerCase())
  })

  test('the older {"Eip1559": {…}} receipt form reads the same as the typed one', async () => {
    const typed = createState()
    const enumForm = createState()
    await typed.state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 2) })))
    await enumForm.state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 2), receiptForm: 'enum' })))
    expect(enumForm.state.blocks(0)[0]?.receipts).toEqual(typed.state.blocks(0)[0]?.receipts)
  })

  test('a duplicate index is ignored', async () => {
    const { state } = createState()
    const first = parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) }))
    await state.apply(first)
    expect(await state.apply(first)).toBe('duplicate')
    await state.apply(parse(flashblock({ index: 1, blockNumber: 10, transactions: transactions.slice(1, 2) })))
    expect(await state.apply(parse(flashblock({ index: 1, blockNumber: 10, transactions: transactions.slice(1, 2) })))).toBe('duplicate')
    expect(state.blocks(0)[0]?.transactions).toHaveLength(2)
  })

  test('a gap drops the pending state until the next index 0', async () => {
    const { state } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) })))
    expect(await state.apply(parse(flashblock({ index: 2, blockNumber: 10, transactions: transactions.slice(2, 3) })))).toBe('dropped')
    expect(state.blocks(0)).toEqual([])
    expect(await state.apply(parse(flashblock({ index: 3, blockNumber: 10, transactions: transactions.slice(3, 4) })))).toBe('ignored')
    expect(state.blocks(0)).toEqual([])
    expect(await state.apply(parse(flashblock({ index: 0, blockNumber: 11, transactions: transactions.slice(4, 5) })))).toBe('started')
    expect(state.blocks(0).map((block) => block.number)).toEqual([11])
  })

  test('a link to another flashblock than the last applied drops the pending state, as Base does; a matching or empty link is followed', async () => {
    const { state } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1), previous: '9-4' })))
    expect(await state.apply(parse(flashblock({ index: 1, blockNumber: 10, transactions: transactions.slice(1, 2), previous: '10-0' })))).toBe('appended')
    // The builder's first after a restart names none.
    expect(await state.apply(parse(flashblock({ index: 2, blockNumber: 10, transactions: transactions.slice(2, 3), previous: '0-0' })))).toBe('appended')
    // The next index, but following a flashblock this view never applied.
    expect(await state.apply(parse(flashblock({ index: 3, blockNumber: 10, transactions: transactions.slice(3, 4), previous: '10-1' })))).toBe('dropped')
    expect(state.blocks(9)).toEqual([])
  })

  test('an index 0 that follows a later flashblock of the block before (its tail was lost): what the view has of that block stays, the new one starts', async () => {
    const { state } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) })))
    await state.apply(parse(flashblock({ index: 1, blockNumber: 10, transactions: transactions.slice(1, 2) })))
    // Block 10's index 2 was lost: block 11 says it follows 10-2. Block 10 is sealed, and what the view has of it
    // (its first two flashblocks) is the sealed block's: its receipts stay found until the index has it.
    const opened = { index: 0, blockNumber: 11, parentHash: `0x${'0a'.repeat(32)}`, transactions: transactions.slice(3, 4) } as const
    expect(await state.apply(parse(flashblock({ ...opened, previous: '10-2' })))).toBe('started')
    expect(state.blocks(9).map((block) => [block.number, block.transactions.length])).toEqual([
      [10, 2],
      [11, 1],
    ])

    // One that follows an earlier flashblock than the view's newest (the builder sealed less than the view shows): that block goes.
    const shorter = createState()
    await shorter.state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) })))
    await shorter.state.apply(parse(flashblock({ index: 1, blockNumber: 10, transactions: transactions.slice(1, 2) })))
    expect(await shorter.state.apply(parse(flashblock({ ...opened, previous: '10-0' })))).toBe('started')
    expect(shorter.state.blocks(9).map((block) => block.number)).toEqual([11])

    const linked = createState()
    await linked.state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) })))
    await linked.state.apply(parse(flashblock({ index: 1, blockNumber: 10, transactions: transactions.slice(1, 2) })))
    expect(await linked.state.apply(parse(flashblock({ ...opened, previous: '10-1' })))).toBe('started')
    expect(linked.state.blocks(9).map((block) => block.number)).toEqual([10, 11])
  })

  test('an index from another payload (out of order) drops the pending state', async () => {
    const { state } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10 })))
    expect(await state.apply(parse(flashblock({ index: 1, blockNumber: 10, payloadId: '0x00000000000000ff' })))).toBe('dropped')
    expect(state.blocks(0)).toEqual([])
  })

  test('a new block before the last one is sealed keeps both; sealing drops the older', async () => {
    const { state } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 2) })))
    await state.apply(parse(flashblock({ index: 0, blockNumber: 11, parentHash: `0x${'0a'.repeat(32)}`, transactions: transactions.slice(2, 3) })))
    expect(state.blocks(9).map((block) => block.number)).toEqual([10, 11])
    state.confirm({ number: 10, hash: `0x${'0a'.repeat(32)}`, transactionHashes: transactions.slice(0, 2).map((transaction) => transaction.hash) })
    expect(state.blocks(10).map((block) => block.number)).toEqual([11])
    // A late message for a sealed block is ignored.
    expect(await state.apply(parse(flashblock({ index: 0, blockNumber: 10 })))).toBe('ignored')
  })

  test('a reader whose head is still the one before the sealed block sees that block pre-confirmed, not a gap', async () => {
    // The ingester confirms block 10 as it commits it; a reader's view of the head loaded just before (or a
    // worker told of the seal before the database's notification) is still 9. Without block 10 it would count
    // the sender's nonce from 9 and then 11 alone, and hand a wallet the nonce it just used.
    const { state, advance } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 2) })))
    state.confirm({ number: 10, hash: `0x${'0a'.repeat(32)}`, transactionHashes: transactions.slice(0, 2).map((transaction) => transaction.hash) })
    expect(state.blocks(9).map((block) => block.number)).toEqual([10])
    expect(state.blocks(10)).toEqual([])
    // A late frame of the sealed block adds nothing to it.
    expect(await state.apply(parse(flashblock({ index: 1, blockNumber: 10, transactions: transactions.slice(2, 3) })))).toBe('ignored')
    expect(state.blocks(9)[0]?.transactions).toHaveLength(2)
    await state.apply(parse(flashblock({ index: 0, blockNumber: 11, parentHash: `0x${'0a'.repeat(32)}`, transactions: transactions.slice(2, 3) })))
    expect(state.blocks(9).map((block) => block.number)).toEqual([10, 11])
    // A silent feed hides the block being built, not the sealed one before it.
    advance(FLASHBLOCK_STALE_MS + 1)
    expect(state.blocks(9).map((block) => block.number)).toEqual([10])
    // Two blocks on, it is forgotten.
    state.confirm({ number: 11, hash: `0x${'0b'.repeat(32)}`, transactionHashes: [transactions[2]!.hash] })
    state.confirm({ number: 12, hash: `0x${'0c'.repeat(32)}`, transactionHashes: [] })
    expect(state.blocks(9).map((block) => block.number)).toEqual([11])
  })

  test('a canonical block that contradicts its pre-confirmation takes it down at once, but not the next block, built on the canonical one', async () => {
    const { state } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 2) })))
    await state.apply(parse(flashblock({ index: 0, blockNumber: 11, parentHash: `0x${'0a'.repeat(32)}`, transactions: transactions.slice(2, 3) })))
    state.confirm({ number: 10, hash: `0x${'0a'.repeat(32)}`, transactionHashes: [transactions[1]!.hash, transactions[0]!.hash] })
    // Not even kept for a reader a block behind: its transactions are not the sealed block's.
    expect(state.blocks(0).map((block) => block.number)).toEqual([11])
    expect(state.following()).toBe(true)
  })

  test('a canonical block whose next pending block names another parent takes down the whole view', async () => {
    const { state } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 2) })))
    await state.apply(parse(flashblock({ index: 0, blockNumber: 11, parentHash: `0x${'0b'.repeat(32)}`, transactions: transactions.slice(2, 3) })))
    state.confirm({ number: 10, hash: `0x${'0a'.repeat(32)}`, transactionHashes: transactions.slice(0, 2).map((transaction) => transaction.hash) })
    expect(state.blocks(0)).toEqual([])
    expect(await state.apply(parse(flashblock({ index: 1, blockNumber: 11, transactions: transactions.slice(3, 4) })))).toBe('ignored')
  })

  test('reconciliation compares every field the sealed receipt has, written either way, and counts what differs', async () => {
    const sealedOf = (receipt: Record<string, unknown>) => ({ ...receipt, blockHash: `0x${'0a'.repeat(32)}`, blockTimestamp: Number(receipt.blockTimestamp) })
    const same = createState()
    await same.state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 2), format: 'legacy' })))
    const receipts = same.state.blocks(9)[0]!.receipts as Record<string, unknown>[]
    // The node writes the timestamp as a number, addresses in mixed case, and fields the feed never gave (ignored).
    same.state.confirm({
      number: 10,
      hash: `0x${'0a'.repeat(32)}`,
      transactionHashes: transactions.slice(0, 2).map((transaction) => transaction.hash),
      receipts: receipts.map((receipt) => ({ ...sealedOf(receipt), from: (receipt.from as string).toUpperCase().replace('0X', '0x'), l1Fee: '0x5' })) as never,
    })
    expect(same.state.status().divergences.receipt).toBe(0)

    const differing = createState()
    await differing.state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 2), format: 'legacy' })))
    const pending = differing.state.blocks(9)[0]!.receipts as Record<string, unknown>[]
    differing.state.confirm({
      number: 10,
      hash: `0x${'0a'.repeat(32)}`,
      transactionHashes: transactions.slice(0, 2).map((transaction) => transaction.hash),
      receipts: [
        { ...sealedOf(pending[0]!), effectiveGasPrice: '0x1' },
        { ...sealedOf(pending[1]!), logsBloom: `0x${'ff'.repeat(256)}` },
      ] as never,
    })
    expect(differing.state.status().divergences.receipt).toBe(2)
  })

  test("pre-confirmed receipts write blockTimestamp as the node's sealed receipts do (a number, a hex quantity, or not at all)", async () => {
    for (const [sealedTimestamp, expected] of [
      [1_800_000_000, 1_800_000_000],
      ['0x6b49d200', '0x6b49d200'],
      [undefined, undefined],
    ] as const) {
      const { state } = createState()
      await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1), format: 'legacy' })))
      // Until a sealed receipt shows the form, as built: a hex quantity.
      expect(state.blocks(9)[0]!.receipts[0]!.blockTimestamp).toBe('0x6b49d200')
      const sealed = { ...state.blocks(9)[0]!.receipts[0]!, blockHash: `0x${'0a'.repeat(32)}` } as Record<string, unknown>
      if (sealedTimestamp === undefined) delete sealed.blockTimestamp
      else sealed.blockTimestamp = sealedTimestamp
      state.confirm({ number: 10, hash: `0x${'0a'.repeat(32)}`, transactionHashes: [transactions[0]!.hash], receipts: [sealed] as never })
      await state.apply(
        parse(flashblock({ index: 0, blockNumber: 11, parentHash: `0x${'0a'.repeat(32)}`, transactions: transactions.slice(1, 2), format: 'legacy' })),
      )
      const [receipt] = state.blocks(10)[0]!.receipts
      expect(receipt!.blockTimestamp).toBe(expected)
      expect(Object.hasOwn(receipt!, 'blockTimestamp')).toBe(expected !== undefined)
      expect(state.status().divergences.receipt).toBe(0)
    }
  })

  test('a receipt the index already holds gives the form before any sealed block does; a sealed block still has the last word', async () => {
    const { state } = createState()
    state.learnForm({ receipt: { status: '0x1', blockTimestamp: 1_700_000_000 }, transaction: null })
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1), format: 'legacy' })))
    expect(state.blocks(9)[0]!.receipts[0]!.blockTimestamp).toBe(0x6b49d200)
    // Learnt once: a later stored receipt does not override what a sealed block said.
    const sealed = { ...state.blocks(9)[0]!.receipts[0]!, blockHash: `0x${'0a'.repeat(32)}`, blockTimestamp: '0x6b49d200' }
    state.confirm({ number: 10, hash: `0x${'0a'.repeat(32)}`, transactionHashes: [transactions[0]!.hash], receipts: [sealed] as never })
    state.learnForm({ receipt: { status: '0x1', blockTimestamp: 1_700_000_000 }, transaction: null })
    await state.apply(
      parse(flashblock({ index: 0, blockNumber: 11, parentHash: `0x${'0a'.repeat(32)}`, transactions: transactions.slice(1, 2), format: 'legacy' })),
    )
    expect(state.blocks(10)[0]!.receipts[0]!.blockTimestamp).toBe('0x6b49d200')
  })

  test("pre-confirmed receipts carry blobGasPrice, and transactions blockTimestamp, only where the node's sealed ones do", async () => {
    for (const node of ['anvil', 'reth'] as const) {
      const { state } = createState()
      await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1), format: 'legacy' })))
      // Until sealed objects show the form, as built: both fields.
      expect(state.blocks(9)[0]!.receipts[0]!.blobGasPrice).toBe('0x1')
      expect(formatPendingTransaction(state.blocks(9)[0]!, 0).blockTimestamp).toBe('0x6b49d200')
      const { blobGasPrice, ...withoutBlobGasPrice } = { ...state.blocks(9)[0]!.receipts[0]!, blockHash: `0x${'0a'.repeat(32)}` } as Record<string, unknown>
      const { blockTimestamp, ...withoutTimestamp } = formatPendingTransaction(state.blocks(9)[0]!, 0)
      const sealedReceipt = node === 'anvil' ? { ...withoutBlobGasPrice, blobGasPrice } : withoutBlobGasPrice
      const sealedTransaction = node === 'anvil' ? { ...withoutTimestamp, blockTimestamp } : withoutTimestamp
      state.confirm({
        number: 10,
        hash: `0x${'0a'.repeat(32)}`,
        transactionHashes: [transactions[0]!.hash],
        receipts: [sealedReceipt] as never,
        form: sealedForm({ receipts: [sealedReceipt], transactions: [sealedTransaction] }),
      })
      await state.apply(
        parse(flashblock({ index: 0, blockNumber: 11, parentHash: `0x${'0a'.repeat(32)}`, transactions: transactions.slice(1, 2), format: 'legacy' })),
      )
      const block = state.blocks(10)[0]!
      expect(Object.hasOwn(block.receipts[0]!, 'blobGasPrice')).toBe(node === 'anvil')
      expect(Object.hasOwn(formatPendingTransaction(block, 0), 'blockTimestamp')).toBe(node === 'anvil')
      expect(state.status().divergences.receipt).toBe(0)
    }
  })

  test('at start, a stored receipt and transaction give the form of both before any sealed block does', async () => {
    const { state } = createState()
    state.learnForm({ receipt: { type: '0x2', status: '0x1' }, transaction: { type: '0x2', hash: transactions[0]!.hash } })
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1), format: 'legacy' })))
    const block = state.blocks(9)[0]!
    expect(Object.keys(block.receipts[0]!)).not.toContain('blobGasPrice')
    expect(Object.keys(block.receipts[0]!)).not.toContain('blockTimestamp')
    expect(Object.keys(formatPendingTransaction(block, 0))).not.toContain('blockTimestamp')
  })

  test('a canonical parent other than the one a pending block was built on drops it', async () => {
    const { state } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 11, parentHash: `0x${'0a'.repeat(32)}` })))
    state.confirm({ number: 10, hash: `0x${'0b'.repeat(32)}`, transactionHashes: [] })
    expect(state.blocks(0)).toEqual([])
  })

  test('index 0 of an earlier block replayed after a newer block started changes nothing (the newer block and its nonces stay)', async () => {
    const { state } = createState()
    const first = parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) }))
    await state.apply(first)
    await state.apply(parse(flashblock({ index: 1, blockNumber: 10, transactions: transactions.slice(1, 2) })))
    await state.apply(parse(flashblock({ index: 0, blockNumber: 11, transactions: transactions.slice(2, 3) })))
    expect(await state.apply(first)).toBe('duplicate')
    expect(state.blocks(0).map((block) => [block.number, block.transactions.length])).toEqual([
      [10, 2],
      [11, 1],
    ])
    // A new payload for block 10 is another matter: the builder rebuilt it, and what was built on it goes.
    expect(await state.apply(parse(flashblock({ index: 0, blockNumber: 10, payloadId: '0x00000000000000aa' })))).toBe('started')
    expect(state.blocks(0).map((block) => [block.number, block.transactions.length])).toEqual([[10, 0]])
  })

  test("a replaced builder's frames, replayed or late, leave its successor's block in view", async () => {
    const { state } = createState()
    const replaced = '0x00000000000000a1'
    const successor = '0x00000000000000a2'
    const replacedStart = parse(flashblock({ index: 0, blockNumber: 10, payloadId: replaced, transactions: transactions.slice(0, 1) }))
    await state.apply(replacedStart)
    await state.apply(parse(flashblock({ index: 1, blockNumber: 10, payloadId: replaced, transactions: transactions.slice(1, 2) })))
    // Failover: another payload at the same height replaces the block.
    expect(await state.apply(parse(flashblock({ index: 0, blockNumber: 10, payloadId: successor, transactions: transactions.slice(2, 3) })))).toBe('started')
    const shown = () => state.blocks(0).map((block) => [block.number, block.payloadId, block.transactions.map((transaction) => transaction.hash)])
    const successorOnly = [[10, successor, [transactions[2]!.hash]]]
    expect(shown()).toEqual(successorOnly)
    // The replaced payload's index 0 again, as it was (a proxy's replay): a duplicate, not a new start.
    expect(await state.apply(replacedStart)).toBe('duplicate')
    // Its next frame, late: ignored, not a gap that would drop the successor's block.
    expect(await state.apply(parse(flashblock({ index: 2, blockNumber: 10, payloadId: replaced, transactions: transactions.slice(3, 4) })))).toBe('ignored')
    expect(shown()).toEqual(successorOnly)
    expect(state.following()).toBe(true)
    expect(
      await state.apply(
        parse(flashblock({ index: 1, blockNumber: 10, payloadId: successor, transactions: transactions.slice(3, 4), cumulativeGasBefore: 21_000n })),
      ),
    ).toBe('appended')
    expect(shown()).toEqual([[10, successor, [transactions[2]!.hash, transactions[3]!.hash]]])
    // The replaced payload started again with other content is the builder rebuilding it: a new start.
    expect(await state.apply(parse(flashblock({ index: 0, blockNumber: 10, payloadId: replaced, transactions: transactions.slice(4, 5) })))).toBe('started')
    expect(shown()).toEqual([[10, replaced, [transactions[4]!.hash]]])
  })

  test("a late frame of the previous block's payload, after the next block started, is ignored rather than dropping both", async () => {
    const { state } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) })))
    await state.apply(parse(flashblock({ index: 0, blockNumber: 11, transactions: transactions.slice(1, 2) })))
    expect(await state.apply(parse(flashblock({ index: 1, blockNumber: 10, transactions: transactions.slice(2, 3), cumulativeGasBefore: 21_000n })))).toBe(
      'ignored',
    )
    expect(state.blocks(0).map((block) => [block.number, block.transactions.length])).toEqual([
      [10, 1],
      [11, 1],
    ])
    // A payload never seen to start is still a gap.
    expect(await state.apply(parse(flashblock({ index: 1, blockNumber: 11, payloadId: '0x00000000000000ff' })))).toBe('dropped')
  })

  test('after the state is dropped, the block in progress is taken again from its index 0 (a feed may resend it)', async () => {
    const { state } = createState()
    const start = parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) }))
    await state.apply(start)
    expect(await state.apply(parse(flashblock({ index: 2, blockNumber: 10, transactions: transactions.slice(1, 2) })))).toBe('dropped')
    expect(state.blocks(0)).toEqual([])
    expect(await state.apply(start)).toBe('started')
    expect(state.blocks(0).map((block) => block.transactions.length)).toEqual([1])
  })

  test('index 0 of a block above the next one (blocks between were missed) drops the older blocks and starts afresh', async () => {
    const { state } = createState()
    state.confirm({ number: 9, hash: `0x${'09'.repeat(32)}`, transactionHashes: [] })
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, parentHash: `0x${'09'.repeat(32)}`, transactions: transactions.slice(0, 1) })))
    await state.apply(parse(flashblock({ index: 0, blockNumber: 12, payloadId: '0x00000000000000c0', transactions: transactions.slice(1, 2) })))
    expect(state.blocks(9).map((block) => [block.number, block.transactions.length])).toEqual([[12, 1]])
    // The next block in turn keeps the one before it.
    await state.apply(parse(flashblock({ index: 0, blockNumber: 13, payloadId: '0x00000000000000c1', transactions: transactions.slice(2, 3) })))
    expect(state.blocks(9).map((block) => block.number)).toEqual([12, 13])
  })

  test('index 0 of the block after the indexed head, built on another parent, is not shown', async () => {
    const { state } = createState()
    state.confirm({ number: 10, hash: `0x${'0A'.repeat(32)}`, transactionHashes: [] })
    expect(
      await state.apply(parse(flashblock({ index: 0, blockNumber: 11, parentHash: `0x${'0b'.repeat(32)}`, transactions: transactions.slice(0, 1) }))),
    ).toBe('dropped')
    expect(state.blocks(10)).toEqual([])
    expect(await state.apply(parse(flashblock({ index: 1, blockNumber: 11, transactions: transactions.slice(1, 2) })))).toBe('ignored')
    expect(await state.apply(parse(flashblock({ index: 0, blockNumber: 11, parentHash: `0x${'0a'.repeat(32)}`, payloadId: '0x00000000000000bb' })))).toBe(
      'started',
    )
    expect(state.blocks(10).map((block) => block.number)).toEqual([11])
  })

  test('index 0 on a parent the index does not hold yet (the sealed head replaced) is kept out of view, then shown with its later flashblocks once the index holds that parent', async () => {
    const { state } = createState()
    const awaited: [number, string][] = []
    state.events.on('awaitingParent', (number, parentHash) => awaited.push([number, parentHash]))
    const [oldHead, newHead] = [`0x${'0a'.repeat(32)}`, `0x${'0b'.repeat(32)}`] as const
    state.confirm({ number: 10, hash: oldHead, transactionHashes: [] })
    await state.apply(parse(flashblock({ index: 0, blockNumber: 11, parentHash: oldHead, transactions: transactions.slice(0, 1) })))
    // Block 10 replaced by 0b…: the feed opens block 11 on it before the index has ingested the reorg.
    const payloadId = '0x00000000000000cc'
    expect(await state.apply(parse(flashblock({ index: 0, blockNumber: 11, parentHash: newHead, payloadId, transactions: transactions.slice(1, 2) })))).toBe(
      'dropped',
    )
    expect(awaited).toEqual([[11, newHead]])
    expect(
      await state.apply(parse(flashblock({ index: 1, blockNumber: 11, payloadId, transactions: transactions.slice(2, 3), cumulativeGasBefore: 30_000n }))),
    ).toBe('ignored')
    // Neither the block built on the replaced head nor the one on a parent not indexed yet is shown.
    expect(state.blocks(10)).toEqual([])
    // The index rewinds below the replaced block: still nothing, until it holds the new parent.
    state.rewind(9)
    await state.settled()
    expect(state.blocks(9)).toEqual([])
    state.confirm({ number: 10, hash: newHead, transactionHashes: [] })
    await state.settled()
    const [block] = state.blocks(10)
    expect(block?.number).toBe(11)
    expect(block?.header.parentHash).toBe(newHead)
    expect(block?.transactions.map((transaction) => [transaction.index, transaction.hash])).toEqual([
      [0, transactions[1]!.hash],
      [1, transactions[2]!.hash],
    ])
    expect(state.following()).toBe(true)
    // The feed goes on with the block as usual.
    expect(
      await state.apply(parse(flashblock({ index: 2, blockNumber: 11, payloadId, transactions: transactions.slice(3, 4), cumulativeGasBefore: 51_000n }))),
    ).toBe('appended')
    expect(state.blocks(10)[0]?.transactions).toHaveLength(3)
  })

  test(`a block kept aside for its parent is forgotten if the index holds another block there or above, another block starts, or the parent comes more than ${AWAIT_PARENT_MS} ms after it`, async () => {
    const { state, advance } = createState()
    const hash = (byte: number) => `0x${byte.toString(16).padStart(2, '0').repeat(32)}` as const
    const awaitOn = (number: number, parentHash: `0x${string}`, payload: number) =>
      state.apply(
        parse(
          flashblock({
            index: 0,
            blockNumber: number,
            parentHash,
            payloadId: `0x${payload.toString(16).padStart(16, '0')}`,
            transactions: transactions.slice(0, 1),
          }),
        ),
      )
    state.confirm({ number: 10, hash: hash(0x0a), transactionHashes: [] })

    // The index takes another block at the parent's height.
    await awaitOn(11, hash(0x0b), 1)
    state.confirm({ number: 10, hash: hash(0x0c), transactionHashes: [] })
    await state.settled()
    expect(state.blocks(10)).toEqual([])
    state.confirm({ number: 10, hash: hash(0x0b), transactionHashes: [] })
    await state.settled()
    expect(state.blocks(10)).toEqual([])

    // The index passes the parent's height.
    await awaitOn(11, hash(0x0d), 2)
    state.confirm({ number: 11, hash: hash(0x1a), transactionHashes: [] })
    await state.settled()
    state.rewind(9)
    state.confirm({ number: 10, hash: hash(0x0d), transactionHashes: [] })
    await state.settled()
    expect(state.blocks(10)).toEqual([])

    // Another block's index 0 comes first (here one on the indexed head, shown at once).
    await awaitOn(11, hash(0x0e), 3)
    expect(await awaitOn(11, hash(0x0d), 4)).toBe('started')
    state.rewind(9)
    state.confirm({ number: 10, hash: hash(0x0e), transactionHashes: [] })
    await state.settled()
    expect(state.blocks(10)).toEqual([])

    // The parent is indexed too late.
    await awaitOn(11, hash(0x0f), 5)
    advance(AWAIT_PARENT_MS + 1)
    state.rewind(9)
    state.confirm({ number: 10, hash: hash(0x0f), transactionHashes: [] })
    await state.settled()
    expect(state.blocks(10)).toEqual([])

    // In time, it is shown.
    await awaitOn(11, hash(0x10), 6)
    advance(AWAIT_PARENT_MS)
    state.rewind(9)
    state.confirm({ number: 10, hash: hash(0x10), transactionHashes: [] })
    await state.settled()
    expect(state.blocks(10).map((block) => [block.number, block.header.parentHash])).toEqual([[11, hash(0x10)]])
  })

  test('index 0 of a block more than 32 above the indexed head (misnumbered or replayed) is not shown; 32 above is', async () => {
    const { state } = createState()
    state.confirm({ number: 9, hash: `0x${'09'.repeat(32)}`, transactionHashes: [] })
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, parentHash: `0x${'09'.repeat(32)}`, transactions: transactions.slice(0, 1) })))
    expect(await state.apply(parse(flashblock({ index: 0, blockNumber: 59, transactions: transactions.slice(1, 2) })))).toBe('dropped')
    expect(state.blocks(9)).toEqual([])
    expect(await state.apply(parse(flashblock({ index: 0, blockNumber: 41 })))).toBe('started')
    expect(state.blocks(9).map((block) => block.number)).toEqual([41])
    // Without an indexed head (a process that does not ingest) there is nothing to measure against.
    const alone = createState().state
    expect(await alone.apply(parse(flashblock({ index: 0, blockNumber: 5_000 })))).toBe('started')
  })

  test('blocks at or below the indexed head are served no more, and only the newest 32 are kept', async () => {
    const { state } = createState()
    for (let number = 10; number < 50; number++) await state.apply(parse(flashblock({ index: 0, blockNumber: number })))
    expect(state.blocks(0).map((block) => block.number)).toEqual(Array.from({ length: 32 }, (_, offset) => 18 + offset))
    expect(state.blocks(47).map((block) => block.number)).toEqual([48, 49])
    // The two below the head are kept a little longer, for the ingester to reconcile.
    expect(state.blocks(0).map((block) => block.number)).toEqual([46, 47, 48, 49])
  })

  test(`a feed silent for ${FLASHBLOCK_STALE_MS} ms serves no pending data`, async () => {
    const { state, advance } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) })))
    advance(FLASHBLOCK_STALE_MS - 1)
    expect(state.blocks(0)).toHaveLength(1)
    advance(2)
    expect(state.blocks(0)).toEqual([])
  })

  test('a silent feed leaves out the block it was building, not the blocks the builder finished before it (sealed on the chain, not yet indexed)', async () => {
    const { state, advance } = createState()
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1) })))
    await state.apply(parse(flashblock({ index: 0, blockNumber: 11, transactions: transactions.slice(1, 2) })))
    await state.apply(parse(flashblock({ index: 0, blockNumber: 12, transactions: transactions.slice(2, 3) })))
    advance(FLASHBLOCK_STALE_MS + 1)
    // The index two blocks behind: the finished blocks 10 and 11 keep their transactions and receipts in view.
    const finished = state.blocks(9)
    expect(finished.map((block) => block.number)).toEqual([10, 11])
    expect(finished.map((block) => block.receipts[0]?.transactionHash)).toEqual([transactions[0]!.hash, transactions[1]!.hash])
    // As the index takes them, they go; the unfinished block 12 never shows while the feed is silent.
    expect(state.blocks(10).map((block) => block.number)).toEqual([11])
    expect(state.blocks(11)).toEqual([])
    // The feed speaks again: block 12 is back in view.
    await state.apply(parse(flashblock({ index: 1, blockNumber: 12, transactions: transactions.slice(3, 4), cumulativeGasBefore: 21_000n })))
    expect(state.blocks(11).map((block) => block.number)).toEqual([12])
  })

  test('balances: the latest reported value wins, and a feed without balances says so', async () => {
    const { state } = createState()
    const account = `0x${'5c'.repeat(20)}`
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, balances: { [account]: 5n } })))
    await state.apply(parse(flashblock({ index: 1, blockNumber: 10, balances: { [account]: 7n } })))
    expect(state.blocks(0)[0]?.balances.get(account as never)).toBe(7n)
    expect(state.blocks(0)[0]?.reportsBalances).toBe(true)
    const bare = createState()
    await bare.state.apply(parse(flashblock({ index: 0, blockNumber: 10, withMetadata: false })))
    expect(bare.state.blocks(0)[0]?.reportsBalances).toBe(false)
  })

  test('without receipts in the message, they are hydrated from the upstream in one call per flashblock', async () => {
    const asked: string[][] = []
    const state = createPendingState({
      logger,
      hydrate: async (hashes) => {
        asked.push(hashes)
        return hashes.map((hash) => ({
          transactionHash: hash,
          blockNumber: '0xa',
          status: '0x1',
          cumulativeGasUsed: '0x5208',
          blockHash: `0x${'99'.repeat(32)}`,
          logs: [],
        }))
      },
    })
    await state.apply(parse(flashblock({ index: 0, blockNumber: 10, transactions: transactions.slice(0, 1), receiptForm: 'none' })))
    await state.settled()
    expect(asked).toEqual([[transactions[0]!.hash]])
    expect(state.blocks(0)[0]?.receipts[0]).toMatchObject({ transactionHash: transactions[0]!.hash, blockHash: `0x${'00'.repeat(32)}` })
  })
})
