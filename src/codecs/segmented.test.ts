import { describe, expect, test } from 'vitest'
import { inflateAny, zlibStream } from './deflated.js'
import { inflateSegment, SEGMENT_ITEMS, deflateSegmented, segmentOf } from './segmented.js'
import { inflateSync } from 'node:zlib'

const item = (index: number) => JSON.stringify({ index, hash: `0x${index.toString(16).padStart(64, '0')}`, logs: [{ data: 'é]' }] })

describe('segmented JSON arrays', () => {
  for (const count of [0, 1, SEGMENT_ITEMS - 1, SEGMENT_ITEMS, SEGMENT_ITEMS + 1, 5 * SEGMENT_ITEMS + 3]) {
    test(`${count} items: the whole stream is the array's text, and each segment holds its own items`, () => {
      const items = Array.from({ length: count }, (_, index) => item(index))
      const stored = deflateSegmented(items, 6)
      const text = `[${items.join(',')}]`
      expect(inflateAny(stored.stream).toString('utf8')).toBe(text)
      expect(stored.length).toBe(Buffer.byteLength(text))
      // The length and checksum are those of the text: the stream goes to a `deflate` client as it is.
      expect(inflateSync(zlibStream([stored])).toString('utf8')).toBe(text)
      expect(stored.offsets[0]).toBe(0)
      expect(stored.offsets.at(-1)).toBe(stored.stream.length)
      expect(stored.offsets).toHaveLength(Math.max(1, Math.ceil(count / SEGMENT_ITEMS)) + 1)
      items.forEach((expected, index) => {
        const segment = segmentOf(index)
        const items = inflateSegment<unknown>(stored.stream.subarray(stored.offsets[segment], stored.offsets[segment + 1]))
        expect(items[index % SEGMENT_ITEMS]).toEqual(JSON.parse(expected))
      })
    })
  }

  test('a stream written as one segment (before segments existed) inflates whole', () => {
    const items = Array.from({ length: 40 }, (_, index) => item(index))
    const whole = deflateSegmented(items, 6)
    expect(inflateSegment<unknown>(whole.stream)).toEqual(items.map((text) => JSON.parse(text)))
  })
})
