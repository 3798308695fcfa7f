import { brotliCompressSync } from 'node:zlib'
import { pino } from 'pino'
import type { Hash } from 'viem'
import { beforeAll, describe, expect, test } from 'vitest'
import { DEV_ACCOUNTS, flashblock, type ScriptedTransaction, signedTransfer } from '../../test/fixtures/flashblocks.js'
import { decodeFrame, flashblockMessage, MAX_FRAME_BYTES } from './message.js'
import { createPendingState, type Hydrate } from './state.js'

// Frames as Base sends them since Azul, as older streams and other OP-Stack builders send them, and the
// odd ones a consumer meets: every one goes through the same decoder and validator as the live feed.
const logger = pino({ level: 'silent' })
const receive = async (message: unknown, compress = true) =>
  flashblockMessage.parse(await decodeFrame(compress ? brotliCompressSync(Buffer.from(JSON.stringify(message))) : JSON.stringify(message)))
/** A type-0x05 envelope no decoder knows (EIP-2718 leaves types open). */
const UNDECODABLE = '0x05c0ffee' as const
const ZERO_HASH = `0x${'00'.repeat(32)}`

let transactions: ScriptedTransaction[]

beforeAll(async () => {
  transactions = await Promise.all(Array.from({ length: 20 }, (_, nonce) => signedTransfer({ nonce, from: 2 })))
})

/** Receipts as a flashblocks-aware upstream answers them, for the pending block `number`. */
function hydratingUpstream(number: number): { hydrate: Hydrate; calls: Hash[][] } {
  const calls: Hash[][] = []
  let cumulative = 0n
  const hydrate: Hydrate = async (hashes) => {
    calls.push(hashes)
    return hashes.map((hash) => {
      cumulative += 21_000n
      return {
        transactionHash: hash,
        blockHash: `0x${'77'.repeat(32)}`,
        blockNumber: `0x${number.toString(16)}`,
        status: '0x1',
        gasUsed: '0x5208',
        cumulativeGasUsed: `0x${cumulative.toString(16)}`,
        logs: [],
      }
    })
  }
  return { hydrate, calls }
}

describe("today's Base frames (no receipts, no balances)", () => {
  test('a frame with only block_number and access_list in metadata parses, and its transactions and nonces count at once', async () => {
    const message = flashblock({ index: 0, blockNumber: 50, transactions: transactions.slice(0, 2), format: 'current' })
    expect(message.metadata).toEqual({ block_number: 50, access_list: null })
    const state = createPendingState({ logger })
    expect(await state.apply(await receive(message))).toBe('started')
    const [block] = state.blocks(0)
    expect(block?.transactions.map((transaction) => [transaction.hash, transaction.index, transaction.nonce])).toEqual([
      [transactions[0]!.hash, 0, 0],
      [transactions[1]!.hash, 1, 1],
    ])
    // Frames alone give no receipts: none are made up.
    expect(block?.receipts).toEqual([null, null])
    expect(block?.reportsBalances).toBe(false)
    expect(state.feedSendsReceipts).toBe(false)
  })

  test('receipts are hydrated once per flashblock and placed under the pending block hash', async () => {
    const upstream = hydratingUpstream(50)
    const state = createPendingState({ logger, hydrate: upstream.hydrate })
    await state.apply(await receive(flashblock({ index: 0, blockNumber: 50, transactions: transactions.slice(0, 3), format: 'current' })))
    await state.apply(await receive(flashblock({ index: 1, blockNumber: 50, transactions: transactions.slice(3, 5), format: 'current' })))
    await state.settled()
    expect(upstream.calls).toEqual([transactions.slice(0, 3).map((t) => t.hash), transactions.slice(3, 5).map((t) => t.hash)])
    const [block] = state.blocks(0)
    expect(block?.receipts.map((receipt) => [receipt?.transactionHash, receipt?.blockHash, receipt?.cumulativeGasUsed])).toEqual(
      transactions.slice(0, 5).map((transaction, index) => [transaction.hash, ZERO_HASH, `0x${(21_000 * (index + 1)).toString(16)}`]),
    )
  })

  test('a slow hydration never holds up later frames, and receipts are announced in flashblock order', async () => {
    const releases: (() => void)[] = []
    const order: string[] = []
    const fast = hydratingUpstream(51)
    const state = createPendingState({
      logger,
      // The first flashblock's answer is held back until released; the second comes at once.
      hydrate: async (hashes) => {
        if (releases.length === 0) await new Promise<void>((release) => releases.push(release))
        return fast.hydrate(hashes)
      },
    })
    state.events.on('receipts', (_block, receipts) => order.push(...receipts.map((receipt) => receipt.transactionHash)))
    await state.apply(await receive(flashblock({ index: 0, blockNumber: 51, transactions: transactions.slice(0, 1), format: 'current' })))
    expect(await state.apply(await receive(flashblock({ index: 1, blockNumber: 51, transactions: transactions.slice(1, 2), format: 'current' })))).toBe(
      'appended',
    )
    // Both frames are applied while the first answer is still out.
    expect(state.blocks(0)[0]?.transactions).toHaveLength(2)
    expect(order).toEqual([])
    releases[0]!()
    await state.settled()
    expect(order).toEqual([transactions[0]!.hash, transactions[1]!.hash])
  })

  test('a receipt the upstream places in another block is not taken as a pre-confirmation', async () => {
    const state = createPendingState({ logger, hydrate: hydratingUpstream(49).hydrate })
    await state.apply(await receive(flashblock({ index: 0, blockNumber: 50, transactions: transactions.slice(0, 1), format: 'current' })))
    await state.settled()
    expect(state.blocks(0)[0]?.receipts).toEqual([null])
    expect(state.status().hydration.missingReceipts).toBe(1)
  })

  test('`base: null` on later indexes, unknown fields anywhere, and more than 15 flashblocks in one block', async () => {
    const state = createPendingState({ logger })
    const first = flashblock({ index: 0, blockNumber: 60, transactions: transactions.slice(0, 1), format: 'current' })
    Object.assign(first.diff as object, { post_exec_tx: '0x', new_root_kind: { a: 1 } })
    Object.assign(first, { builder_version: '9.9' })
    expect(await state.apply(await receive(first))).toBe('started')
    for (let index = 1; index <= 17; index++) {
      const later = flashblock({ index, blockNumber: 60, transactions: transactions.slice(index, index + 1), format: 'current', baseNull: true })
      expect(later.base).toBeNull()
      ;(later.metadata as Record<string, unknown>).access_list = { unknown: true }
      expect(await state.apply(await receive(later, index % 2 === 0))).toBe('appended')
    }
    const [block] = state.blocks(0)
    expect(block?.lastIndex).toBe(17)
    expect(block?.transactions.map((transaction) => transaction.index)).toEqual(Array.from({ length: 18 }, (_, index) => index))
  })

  test('a transaction type nobody can decode is skipped with a warning, keeping its position; the flashblock stays', async () => {
    const warnings: string[] = []
    const recording = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line).msg) })
    const state = createPendingState({ logger: recording })
    const message = flashblock({ index: 0, blockNumber: 70, transactions: transactions.slice(0, 1), format: 'current', extraRaw: [UNDECODABLE] })
    await state.apply(await receive(message))
    await state.apply(await receive(flashblock({ index: 1, blockNumber: 70, transactions: transactions.slice(1, 2), format: 'current' })))
    const [block] = state.blocks(0)
    expect(block?.transactionCount).toBe(3)
    expect(block?.transactions.map((transaction) => [transaction.hash, transaction.index])).toEqual([
      [transactions[0]!.hash, 0],
      [transactions[1]!.hash, 2],
    ])
    expect(warnings).toContain('skipping a flashblock transaction that cannot be decoded')
  })
})

describe('legacy frames (receipts and balances in metadata) are still used where a feed sends them', () => {
  for (const receiptForm of ['typed', 'enum'] as const)
    test(`receipts in ${receiptForm === 'typed' ? '{"type":"0x2",…}' : '{"Eip1559":{…}}'} form, and balances`, async () => {
      const account = DEV_ACCOUNTS[2]!.address.toLowerCase()
      // A feed with receipts is never hydrated (a throw here would only count as a hydration failure).
      const hydrated: unknown[] = []
      const state = createPendingState({
        logger,
        hydrate: async (hashes) => {
          hydrated.push(hashes)
          return hashes.map(() => null)
        },
      })
      const log = { address: `0x${'5c'.repeat(20)}` as const, topics: [`0x${'ab'.repeat(32)}` as const], data: '0x01' as const }
      await state.apply(
        await receive(
          flashblock({ index: 0, blockNumber: 80, transactions: [{ ...transactions[0]!, logs: [log] }], receiptForm, balances: { [account]: 9n } }),
        ),
      )
      await state.apply(
        await receive(
          flashblock({
            index: 1,
            blockNumber: 80,
            transactions: transactions.slice(1, 2),
            receiptForm,
            cumulativeGasBefore: 21_000n,
            balances: { [account]: 8n },
          }),
        ),
      )
      await state.settled()
      const [block] = state.blocks(0)
      expect(block?.receipts.map((receipt) => [receipt?.type, receipt?.status, receipt?.gasUsed, receipt?.logs.length, receipt?.blockTimestamp])).toEqual([
        ['0x2', '0x1', '0x5208', 1, '0x6b49d200'],
        ['0x2', '0x1', '0x5208', 0, '0x6b49d200'],
      ])
      expect(block?.receipts[0]?.blobGasPrice).toBe('0x1')
      expect(block?.balances.get(account as never)).toBe(8n)
      expect(hydrated).toEqual([])
      expect(block?.reportsBalances).toBe(true)
      expect(state.feedSendsReceipts).toBe(true)
    })

  test('one receipt that does not parse leaves that transaction and the later ones of its block without a receipt from the frames, not the flashblock', async () => {
    const state = createPendingState({ logger })
    const message = flashblock({ index: 0, blockNumber: 81, transactions: transactions.slice(0, 2) })
    ;(message.metadata as { receipts: Record<string, unknown> }).receipts[transactions[0]!.hash] = { type: '0x2', status: 'maybe' }
    expect(await state.apply(await receive(message))).toBe('started')
    await state.settled()
    // The second's gas used and log indexes count from the first's figures, which are unknown.
    expect(state.blocks(0)[0]?.transactions.map((transaction) => transaction.hash)).toEqual(transactions.slice(0, 2).map((t) => t.hash))
    expect(state.blocks(0)[0]?.receipts).toEqual([null, null])
    // Nor from a later flashblock of the block, whose receipts are whole.
    await state.apply(await receive(flashblock({ index: 1, blockNumber: 81, transactions: transactions.slice(2, 3), cumulativeGasBefore: 42_000n })))
    await state.settled()
    expect(state.blocks(0)[0]?.receipts).toEqual([null, null, null])
  })

  test('a transaction the feed sent no receipt for, between two it did: the ones after it are hydrated, with their own gas used', async () => {
    const upstream = hydratingUpstream(83)
    const state = createPendingState({ logger, hydrate: upstream.hydrate })
    const message = flashblock({ index: 0, blockNumber: 83, transactions: transactions.slice(0, 3) })
    delete (message.metadata as { receipts: Record<string, unknown> }).receipts[transactions[1]!.hash]
    await state.apply(await receive(message))
    await state.settled()
    expect(upstream.calls).toEqual([[transactions[1]!.hash, transactions[2]!.hash]])
    const receipts = state.blocks(0)[0]?.receipts
    expect(receipts?.map((receipt) => [receipt?.transactionHash, receipt?.gasUsed, receipt?.cumulativeGasUsed])).toEqual([
      [transactions[0]!.hash, '0x5208', '0x5208'],
      [transactions[1]!.hash, '0x5208', '0x5208'],
      [transactions[2]!.hash, '0x5208', '0xa410'],
    ])
  })

  test('a receipt in the enum form under a name that is no receipt type (an inherited key such as toString) counts as absent', async () => {
    const message = flashblock({ index: 0, blockNumber: 82, transactions: transactions.slice(0, 2) })
    const receipts = (message.metadata as { receipts: Record<string, unknown> }).receipts
    const fields = { status: '0x1', cumulativeGasUsed: '0x5208', logs: [] }
    receipts[transactions[0]!.hash] = { toString: fields }
    receipts[transactions[1]!.hash] = { constructor: fields }
    const parsed = await receive(message)
    expect(parsed.metadata?.receipts?.[transactions[0]!.hash] ?? null).toBeNull()
    expect(parsed.metadata?.receipts?.[transactions[1]!.hash] ?? null).toBeNull()
  })
})

describe('reconciliation by content', () => {
  test('a canonical receipt that differs in gas or logs is counted; a different transaction list drops that pre-confirmation, not the next block built on the canonical one', async () => {
    const state = createPendingState({ logger })
    await state.apply(await receive(flashblock({ index: 0, blockNumber: 90, transactions: transactions.slice(0, 2) })))
    await state.settled()
    const hashes = transactions.slice(0, 2).map((t) => t.hash)
    const sealed = (gasUsed: string, cumulativeGasUsed: string) => ({ status: '0x1', gasUsed, cumulativeGasUsed, logs: [] })
    state.confirm({ number: 90, hash: `0x${'90'.repeat(32)}`, transactionHashes: hashes, receipts: [sealed('0x5208', '0x5208'), sealed('0x5209', '0xa410')] })
    expect(state.status().divergences).toEqual({ transactions: 0, parent: 0, receipt: 1 })
    expect(state.status().reconciledBlocks).toBe(1)

    await state.apply(
      await receive(
        flashblock({ payloadId: '0x00000000000000ff', index: 0, blockNumber: 91, transactions: transactions.slice(2, 3), parentHash: `0x${'90'.repeat(32)}` }),
      ),
    )
    await state.apply(
      await receive(flashblock({ payloadId: '0x0000000000000100', index: 0, blockNumber: 92, transactions: [], parentHash: `0x${'91'.repeat(32)}` })),
    )
    state.confirm({ number: 91, hash: `0x${'91'.repeat(32)}`, transactionHashes: [transactions[3]!.hash], receipts: [] })
    expect(state.status().divergences.transactions).toBe(1)
    // Block 92's index 0 named the canonical 91 as its parent: it stays, and goes on.
    expect(state.blocks(0).map((block) => block.number)).toEqual([92])
    expect(
      await state.apply(await receive(flashblock({ payloadId: '0x0000000000000100', index: 1, blockNumber: 92, transactions: transactions.slice(4, 5) }))),
    ).toBe('appended')

    // A pending block built on another parent than the canonical block is wrong, and all of the view goes.
    await state.apply(
      await receive(flashblock({ payloadId: '0x0000000000000101', index: 0, blockNumber: 93, transactions: [], parentHash: `0x${'aa'.repeat(32)}` })),
    )
    state.confirm({ number: 92, hash: `0x${'92'.repeat(32)}`, transactionHashes: [transactions[4]!.hash], receipts: [] })
    expect(state.status().divergences.parent).toBe(1)
    expect(state.blocks(0)).toEqual([])
  })
})

test('a Brotli frame that would expand past MAX_FRAME_BYTES is refused, not inflated (a few KiB could become hundreds of MB)', async () => {
  const bomb = brotliCompressSync(Buffer.concat([Buffer.from('{"index":0,"x":"'), Buffer.alloc(MAX_FRAME_BYTES + 1024, 0x61), Buffer.from('"}')]))
  expect(bomb.length).toBeLessThan(64 * 1024)
  await expect(decodeFrame(bomb)).rejects.toThrow(RangeError)
  // A frame under the limit still decodes.
  expect(await decodeFrame(brotliCompressSync(Buffer.from('{"index":0}')))).toEqual({ index: 0 })
})

test('a frame is inflated off the event loop: timers keep firing while a large one inflates', async () => {
  const large = brotliCompressSync(Buffer.concat([Buffer.from('{"index":0,"x":"'), Buffer.alloc(MAX_FRAME_BYTES - 1024, 0x20), Buffer.from('"}')]))
  let ticks = 0
  const ticking = setInterval(() => ticks++, 1)
  try {
    // Inflated on the event loop, the frame would be done before any timer ran again.
    const [frame, ticksMeanwhile] = await decodeFrame(large).then((decoded) => [decoded, ticks])
    expect(frame).toMatchObject({ index: 0 })
    expect(ticksMeanwhile).toBeGreaterThan(0)
  } finally {
    clearInterval(ticking)
  }
})
