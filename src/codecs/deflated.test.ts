import { randomBytes } from 'node:crypto'
import { crc32, deflateRawSync, deflateSync, gunzipSync, inflateSync } from 'node:zlib'
import { describe, expect, test } from 'vitest'
import { adler32, adler32Combine, crc32Combine, type DeflatedText, deflateOpen, gzipMember, inflateAny, zlibStream } from './deflated.js'

/** zlib's own Adler-32 of `bytes`: the last four bytes of its zlib stream. */
const zlibAdler32 = (bytes: Buffer) => deflateSync(bytes, { level: 0 }).readUInt32BE(deflateSync(bytes, { level: 0 }).length - 4)

const json = (count: number) =>
  Buffer.from(JSON.stringify(Array.from({ length: count }, (_, index) => ({ index, data: `0x${randomBytes(40).toString('hex')}` }))))

describe('Adler-32', () => {
  test.each([0, 1, 100, 5_551, 5_552, 5_553, 70_000, 300_000])('equals zlib on %i random bytes, including bytes of 0xff', (length) => {
    const bytes = randomBytes(length)
    expect(adler32(bytes)).toBe(zlibAdler32(bytes))
    const ones = Buffer.alloc(length, 0xff)
    expect(adler32(ones)).toBe(zlibAdler32(ones))
  })

  test('combining two checksums equals the checksum of the joined bytes, and continuing equals both', () => {
    for (const [first, second] of [
      [0, 10],
      [10, 0],
      [3, 70_000],
      [70_000, 65_521],
      [200_000, 131_042],
    ] as const) {
      const a = Buffer.alloc(first, 0xff)
      const b = randomBytes(second)
      const whole = zlibAdler32(Buffer.concat([a, b]))
      expect(adler32Combine(adler32(a), adler32(b), b.length)).toBe(whole)
      expect(adler32(b, adler32(a))).toBe(whole)
    }
  })
})

describe('CRC-32 combined', () => {
  test('combining two checksums equals the checksum zlib gives the joined bytes, for lengths across bit boundaries', () => {
    for (const [first, second] of [
      [0, 0],
      [0, 10],
      [10, 0],
      [1, 1],
      [3, 70_000],
      [70_000, 65_536],
      [200_000, 131_071],
      [5, 1 << 20],
    ] as const) {
      const a = randomBytes(first)
      const b = Buffer.alloc(second, 0xa5)
      expect(crc32Combine(crc32(a), crc32(b), b.length)).toBe(crc32(Buffer.concat([a, b])))
    }
  })
})

describe('open DEFLATE streams spliced into one zlib stream', () => {
  test('an open stream has no final block: appending a final empty block finishes it', () => {
    const text = json(50)
    const open = deflateOpen(text, 6)
    expect(open).toMatchObject({ length: text.length, adler32: zlibAdler32(text) })
    expect(inflateAny(open.stream)).toEqual(text)
    // A finished stream made by zlib inflates the same way.
    expect(inflateAny(deflateRawSync(text))).toEqual(text)
    expect(inflateSync(zlibStream([open]))).toEqual(text)
  })

  test('plain parts of any size around open streams inflate to the joined text, checksum verified by zlib', () => {
    const parts: (Buffer | DeflatedText)[] = [
      Buffer.from('{"jsonrpc":"2.0","id":'),
      Buffer.alloc(140_000, 0x31),
      Buffer.from(',"result":'),
      deflateOpen(json(300), 6),
      Buffer.from(','),
      deflateOpen(json(1), 1),
      deflateOpen('', 6),
      Buffer.from('}'),
    ]
    const plain = Buffer.concat(parts.map((part) => (Buffer.isBuffer(part) ? part : inflateAny(part.stream))))
    expect(inflateSync(zlibStream(parts))).toEqual(plain)
    // Ending on an open stream, and with no parts at all.
    const upToOpen = parts.slice(0, 4)
    expect(inflateSync(zlibStream(upToOpen))).toEqual(
      plain.subarray(
        0,
        upToOpen.reduce((length, part) => length + part.length, 0),
      ),
    )
    expect(inflateSync(zlibStream([]))).toEqual(Buffer.alloc(0))
  })

  test('the same parts in one gzip member: gunzip (which checks CRC-32 and length) gives the joined text', () => {
    const parts: (Buffer | DeflatedText)[] = [
      Buffer.from('{"jsonrpc":"2.0","id":7,"result":'),
      deflateOpen(json(300), 6),
      Buffer.alloc(70_000, 0x20),
      deflateOpen(json(2), 1),
      Buffer.from('}'),
    ]
    const plain = Buffer.concat(parts.map((part) => (Buffer.isBuffer(part) ? part : inflateAny(part.stream))))
    expect(gunzipSync(gzipMember(parts)!)).toEqual(plain)
    expect(gunzipSync(gzipMember(parts.slice(0, 2))!)).toEqual(plain.subarray(0, (parts[0] as Buffer).length + (parts[1] as DeflatedText).length))
    expect(gunzipSync(gzipMember([])!)).toEqual(Buffer.alloc(0))
    // A stream stored without its CRC-32 cannot go in a gzip member.
    const { crc32: _, ...withoutCrc } = deflateOpen(json(3), 6)
    expect(gzipMember([Buffer.from('['), withoutCrc])).toBeNull()
  })

  test('a wrong checksum is caught by the client: the trailer is really checked', () => {
    const member = deflateOpen(json(10), 6)
    expect(() => gunzipSync(gzipMember([{ ...member, crc32: (member.crc32! + 1) >>> 0 }])!)).toThrow(/incorrect data check/)
    const open = deflateOpen(json(10), 6)
    expect(() => inflateSync(zlibStream([{ ...open, adler32: (open.adler32 + 1) >>> 0 }]))).toThrow(/incorrect data check/)
  })
})

describe('inflateAny given the text length', () => {
  test.each([1, 63, 64, 16_383, 16_384, 16_385, 150_000])('gives back %i bytes whole (one output chunk, whatever the length)', (length) => {
    const text = Buffer.from(Array.from({ length }, (_, index) => String.fromCharCode(97 + ((index * 7) % 26))).join(''))
    const { stream } = deflateOpen(text, 6)
    const inflated = inflateAny(stream, length)
    expect(inflated.equals(text)).toBe(true)
    expect(inflated.equals(inflateAny(stream))).toBe(true)
  })
})
