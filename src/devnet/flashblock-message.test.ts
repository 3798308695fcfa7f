import { brotliDecompressSync } from 'node:zlib'
import { concat, keccak256, type RpcBlock } from 'viem'
import { describe, expect, test } from 'vitest'
import { type FlashblockWireMessage, flashblockMessage } from '../pending/message.js'
import { buildFlashblockMessage, encodeFlashblock } from './flashblock-message.js'

const HASH = `0x${'ab'.repeat(32)}` as const
const ZERO_HASH = `0x${'00'.repeat(32)}` as const

/** A Base-shaped index-0 message in the legacy format, with one transaction, receipt and balance. */
const SAMPLE_MESSAGE: FlashblockWireMessage = {
  payload_id: '0x0307de8ff1df8ed8',
  index: 0,
  base: {
    parent_beacon_block_root: HASH,
    parent_hash: HASH,
    fee_recipient: '0x4200000000000000000000000000000000000011',
    prev_randao: HASH,
    block_number: '0x158a0e9',
    gas_limit: '0x3938700',
    timestamp: '0x67bf8332',
    extra_data: '0x',
    base_fee_per_gas: '0xfa',
  },
  diff: {
    state_root: HASH,
    receipts_root: HASH,
    logs_bloom: `0x${'00'.repeat(256)}`,
    gas_used: '0x5208',
    block_hash: HASH,
    transactions: ['0x02f86c827a6980843b9aca00'],
    withdrawals: [],
    withdrawals_root: HASH,
  },
  metadata: {
    block_number: 22585577,
    receipts: {
      [HASH]: {
        type: '0x2',
        status: '0x1',
        cumulativeGasUsed: '0x5208',
        logs: [{ address: '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913', topics: [HASH], data: '0x01' }],
      },
    },
    new_account_balances: { '0x4200000000000000000000000000000000000011': '0x1319718a5000' },
  },
}

describe('encodeFlashblock', () => {
  test('plain encoding is the JSON text of the message', () => {
    const frame = encodeFlashblock(SAMPLE_MESSAGE, { compress: false })
    expect(typeof frame).toBe('string')
    expect(JSON.parse(frame as string)).toEqual(SAMPLE_MESSAGE)
  })

  test('compressed encoding is Brotli of the same JSON text, and smaller', () => {
    const plain = encodeFlashblock(SAMPLE_MESSAGE, { compress: false }) as string
    const compressed = encodeFlashblock(SAMPLE_MESSAGE, { compress: true })
    expect(Buffer.isBuffer(compressed)).toBe(true)
    expect(brotliDecompressSync(compressed as Buffer).toString('utf8')).toBe(plain)
    expect((compressed as Buffer).length).toBeLessThan(Buffer.byteLength(plain))
  })

  test('block_number stays a JSON number in metadata and a hex quantity in base', () => {
    const parsed = JSON.parse(encodeFlashblock(SAMPLE_MESSAGE, { compress: false }) as string)
    expect(parsed.metadata.block_number).toBe(22585577)
    expect(parsed.base.block_number).toBe('0x158a0e9')
  })
})

describe('buildFlashblockMessage', () => {
  const block = {
    hash: HASH,
    parentHash: HASH,
    parentBeaconBlockRoot: HASH,
    stateRoot: HASH,
    receiptsRoot: HASH,
    logsBloom: `0x${'00'.repeat(256)}`,
    gasUsed: '0x5208',
    withdrawalsRoot: HASH,
    blobGasUsed: '0x0',
    miner: '0x4200000000000000000000000000000000000011',
    mixHash: HASH,
    number: '0x158a0e9',
    gasLimit: '0x3938700',
    timestamp: '0x67bf8332',
    extraData: '0x',
    baseFeePerGas: '0xfa',
  } as unknown as RpcBlock<'latest', false>

  test("current format (Base's builder today): zero state root, a block_hash of its own, metadata with access_list: null and the link", () => {
    const message = buildFlashblockMessage({
      payloadId: '0x0307de8ff1df8ed8',
      index: 3,
      block,
      transactions: ['0x02f86c'],
      previous: { blockNumber: 22585577, index: 2 },
    })
    // Key order as Base sends it.
    expect(encodeFlashblock(message, { compress: false })).toBe(
      JSON.stringify({
        payload_id: '0x0307de8ff1df8ed8',
        index: 3,
        diff: {
          state_root: ZERO_HASH,
          receipts_root: HASH,
          logs_bloom: block.logsBloom,
          gas_used: '0x5208',
          block_hash: keccak256(concat(['0x0307de8ff1df8ed8', '0x0000000000000003', HASH])),
          transactions: ['0x02f86c'],
          withdrawals: [],
          withdrawals_root: HASH,
          blob_gas_used: '0x0',
        },
        metadata: { block_number: 22585577, access_list: null, prev_flashblock_id: '22585577-2' },
      }),
    )
  })

  test("current format: every flashblock's block_hash differs, from the others and from the block's, and is the same when built again", () => {
    const hashes = [0, 1, 2].map((index) => buildFlashblockMessage({ payloadId: '0x0307de8ff1df8ed8', index, block, transactions: [] }).diff.block_hash)
    const otherPayload = buildFlashblockMessage({ payloadId: '0x0307de8ff1df8ed9', index: 0, block, transactions: [] }).diff.block_hash
    expect(new Set([...hashes, otherPayload, block.hash]).size).toBe(5)
    expect(buildFlashblockMessage({ payloadId: '0x0307de8ff1df8ed8', index: 1, block, transactions: [] }).diff.block_hash).toBe(hashes[1])
  })

  test('current format: the first flashblock names none before it ("0-0"); an index 0 names the last of the block before', () => {
    const first = buildFlashblockMessage({ payloadId: '0x0307de8ff1df8ed8', index: 0, block, transactions: [], previous: null })
    expect(first.metadata.prev_flashblock_id).toBe('0-0')
    const unnamed = buildFlashblockMessage({ payloadId: '0x0307de8ff1df8ed8', index: 0, block, transactions: [] })
    expect(unnamed.metadata.prev_flashblock_id).toBe('0-0')
    const next = buildFlashblockMessage({ payloadId: '0x0307de8ff1df8ed8', index: 0, block, transactions: [], previous: { blockNumber: 22585576, index: 9 } })
    expect(next.metadata.prev_flashblock_id).toBe('22585576-9')
    // As the feed reads it: the link, and "0-0" as none.
    expect(flashblockMessage.parse(next).metadata?.prev_flashblock_id).toEqual({ blockNumber: 22585576, index: 9 })
    expect(flashblockMessage.parse(first).metadata?.prev_flashblock_id).toBeUndefined()
  })

  test('base only at index 0; legacy format carries receipts and balances instead of access_list, the real roots and hash, and no link', () => {
    const opening = buildFlashblockMessage({ payloadId: '0x0307de8ff1df8ed8', index: 0, block, transactions: [] })
    expect(opening.base).toMatchObject({ block_number: '0x158a0e9', base_fee_per_gas: '0xfa', fee_recipient: block.miner })
    const legacy = buildFlashblockMessage({
      payloadId: '0x0307de8ff1df8ed8',
      index: 1,
      block,
      transactions: [],
      legacy: { receipts: [], balances: { '0x4200000000000000000000000000000000000011': '0x1' } },
    })
    expect(legacy.base).toBeUndefined()
    expect(legacy.metadata).toEqual({ block_number: 22585577, receipts: {}, new_account_balances: { '0x4200000000000000000000000000000000000011': '0x1' } })
    expect(legacy.diff.blob_gas_used).toBeUndefined()
    expect(legacy.diff).toMatchObject({ state_root: block.stateRoot, block_hash: block.hash })
  })
})
