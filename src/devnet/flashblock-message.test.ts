import { brotliDecompressSync } from 'node:zlib'
import { describe, expect, test } from 'vitest'
import { type FlashblockMessage, encodeFlashblock } from './flashblock-message.js'

const HASH = `0x${'ab'.repeat(32)}` as const

/** A Base-shaped index-0 message with one transaction, receipt and balance. */
const SAMPLE_MESSAGE: FlashblockMessage = {
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
