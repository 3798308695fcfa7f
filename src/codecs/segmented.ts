import { constants, crc32, deflateRawSync } from 'node:zlib'
import { adler32, adler32Combine, type DeflatedText, inflateAny } from './deflated.js'

/**
 * A JSON array stored as an open raw DEFLATE stream (codecs/deflated.ts) made of *segments*: the items
 * `SEGMENT_ITEMS * k` to `SEGMENT_ITEMS * (k + 1) - 1`, each segment compressed on its own and ending on a
 * byte boundary. Concatenated, the segments are one valid stream of the whole array's text, which goes to a
 * client accepting `deflate` as it is; read alone, a segment inflates to its items, so one transaction or
 * receipt costs the inflate of 16 items, not of the block's hundreds. The byte offset where each segment
 * starts, and the stream's length after the last one, are kept beside it (`offsets`).
 */
export type SegmentedJson = DeflatedText & {
  crc32: number
  /** `offsets[k]` is where segment k starts in `stream`; the last entry is the stream's length. */
  offsets: number[]
}

/** zlib's default: 6 inflates faster than 1 (smaller input) and still deflates a block in ~0.5 ms. */
export const BODY_DEFLATE_LEVEL = 6

/** Items per segment: ~16 transactions or receipts are a few KB deflated, and inflate in tens of µs. */
export const SEGMENT_ITEMS = 16

/** The segment that holds item `index`. */
export const segmentOf = (index: number) => Math.floor(index / SEGMENT_ITEMS)

/**
 * Compresses the JSON array whose items are the texts `items` (each already valid JSON) into segments.
 * The text held is exactly `[${items.join(',')}]`.
 */
export function deflateSegmented(items: readonly string[], level: number): SegmentedJson {
  const offsets = [0]
  const streams: Buffer[] = []
  let length = 0
  let checksum = 1
  let crc = 0
  const segments = Math.max(1, Math.ceil(items.length / SEGMENT_ITEMS))
  for (let segment = 0; segment < segments; segment++) {
    const slice = items.slice(segment * SEGMENT_ITEMS, (segment + 1) * SEGMENT_ITEMS).join(',')
    const text = `${segment === 0 ? '[' : ','}${slice}${segment === segments - 1 ? ']' : ''}`
    const bytes = Buffer.from(text, 'utf8')
    const stream = deflateRawSync(bytes, { level, finishFlush: constants.Z_SYNC_FLUSH })
    streams.push(stream)
    offsets.push(offsets.at(-1)! + stream.length)
    checksum = adler32Combine(checksum, adler32(bytes), bytes.length)
    crc = crc32(bytes, crc)
    length += bytes.length
  }
  return { stream: Buffer.concat(streams), length, adler32: checksum, crc32: crc, offsets }
}

/**
 * The items of one segment (its compressed bytes alone), parsed. The segment's text is a run of the
 * array's items with the array's punctuation at either end (`[` or `,` before, `]` after the last).
 */
export function inflateSegment<item>(segment: Uint8Array): item[] {
  const text = inflateAny(segment).toString('utf8')
  const start = text.startsWith('[') || text.startsWith(',') ? 1 : 0
  const end = text.endsWith(']') ? text.length - 1 : text.length
  return JSON.parse(`[${text.slice(start, end)}]`) as item[]
}
