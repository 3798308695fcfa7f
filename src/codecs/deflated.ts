import { constants, crc32, deflateRawSync, inflateRawSync } from 'node:zlib'

/**
 * Text kept as an *open* raw DEFLATE stream (RFC 1951): flushed to a byte boundary but without a final
 * block, together with the length and Adler-32 of the text it holds. Such a stream can be spliced into a
 * larger zlib stream (RFC 1950) between other bytes, so that an answer stored compressed goes to a client
 * accepting `deflate` as it is, without being inflated and compressed again (see `zlibStream`).
 */
export type DeflatedText = {
  /** Raw DEFLATE blocks, none final, ending on a byte boundary (a sync flush). */
  stream: Buffer
  /** Bytes of text the stream holds. */
  length: number
  /** Adler-32 of that text (RFC 1950 §9). */
  adler32: number
  /**
   * CRC-32 of that text (RFC 1952), for a gzip member around the stream (`gzipMember`). Absent for receipts
   * stored before migration 0013: those are compressed per request for a client accepting only gzip.
   */
  crc32?: number
}

/** The largest prime below 2^16: Adler-32's modulus. */
const ADLER_MODULUS = 65_521
/** Bytes summed before reducing: the largest n for which the sums cannot pass 2^53 (zlib's NMAX is 5552 for 32 bits). */
const ADLER_CHUNK = 5_552
/** The largest stored block (RFC 1951 §3.2.4). */
const STORED_BLOCK_MAX = 0xffff
/** zlib header: deflate, 32 KB window, default level, no preset dictionary (0x789c % 31 = 0). */
const ZLIB_HEADER = Buffer.from([0x78, 0x9c])
/** gzip member header (RFC 1952 §2.3): magic, deflate, no flags, no time, no extra flags, OS unknown. */
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff])
/** CRC-32's polynomial, reflected (RFC 1952 §8). */
const CRC32_POLYNOMIAL = 0xedb88320

/** Adler-32 of `bytes`, continuing from `start` (1 for a new checksum). */
export function adler32(bytes: Uint8Array, start = 1): number {
  let low = start & 0xffff
  let high = start >>> 16
  for (let offset = 0; offset < bytes.length; offset += ADLER_CHUNK) {
    const end = Math.min(offset + ADLER_CHUNK, bytes.length)
    for (let index = offset; index < end; index++) {
      low += bytes[index]!
      high += low
    }
    low %= ADLER_MODULUS
    high %= ADLER_MODULUS
  }
  return ((high << 16) | low) >>> 0
}

/**
 * Adler-32 of a text made of a first part (checksum `first`) followed by a second part of `secondLength`
 * bytes (checksum `second`), without reading either: low sums add, and every byte of the second part adds
 * the first part's low sum once more to the high sum.
 */
export function adler32Combine(first: number, second: number, secondLength: number): number {
  const firstLow = first & 0xffff
  const firstHigh = first >>> 16
  const secondLow = second & 0xffff
  const secondHigh = second >>> 16
  const low = (firstLow + secondLow + ADLER_MODULUS - 1) % ADLER_MODULUS
  const high = (firstHigh + secondHigh + (secondLength % ADLER_MODULUS) * ((firstLow + ADLER_MODULUS - 1) % ADLER_MODULUS)) % ADLER_MODULUS
  return ((high << 16) | low) >>> 0
}

/** `a × b` modulo CRC-32's polynomial, both as reflected polynomials (zlib's `multmodp`). */
function multiplyModPolynomial(a: number, b: number): number {
  let product = 0
  for (let bit = 0x80000000; bit !== 0; bit >>>= 1) {
    if ((a & bit) !== 0) {
      product ^= b
      if ((a & (bit - 1)) === 0) break
    }
    b = (b & 1) !== 0 ? (b >>> 1) ^ CRC32_POLYNOMIAL : b >>> 1
  }
  return product >>> 0
}

/** x^(2^k) modulo the polynomial, for k = 0..31 (zlib's `x2n_table`). */
const X_POWERS_OF_TWO: number[] = [0x40000000]
for (let k = 1; k < 32; k++) X_POWERS_OF_TWO.push(multiplyModPolynomial(X_POWERS_OF_TWO[k - 1]!, X_POWERS_OF_TWO[k - 1]!))

/**
 * CRC-32 of a text made of a first part (checksum `first`) followed by a second part of `secondLength`
 * bytes (checksum `second`), without reading either (zlib's `crc32_combine`): the first part's CRC shifted
 * by the second's length in bits (x^(8n) modulo the polynomial), plus the second's.
 */
export function crc32Combine(first: number, second: number, secondLength: number): number {
  let shift = 0x80000000 // x^0
  let k = 3 // 8 bits a byte: x^(8n) = x^(n × 2^3)
  for (let n = secondLength; n > 0; n = Math.floor(n / 2), k++) if (n % 2 === 1) shift = multiplyModPolynomial(X_POWERS_OF_TWO[k % 32]!, shift)
  return (multiplyModPolynomial(shift, first) ^ second) >>> 0
}

/** Compresses `text` into an open stream (see `DeflatedText`). */
export function deflateOpen(text: string | Buffer, level: number): DeflatedText {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text
  return {
    stream: deflateRawSync(bytes, { level, finishFlush: constants.Z_SYNC_FLUSH }),
    length: bytes.length,
    adler32: adler32(bytes),
    crc32: crc32(bytes),
  }
}

/** zlib's smallest output chunk. */
const MIN_CHUNK_BYTES = 64

/**
 * The text of a raw DEFLATE stream, open or finished. Given the text's length, zlib writes it into one
 * buffer of that size instead of 16 KiB chunks joined by a copy at the end (a block's receipts are ~100 KB).
 */
export function inflateAny(stream: Uint8Array, plainLength?: number): Buffer {
  // One byte more than the text: zlib asks for a new chunk when the last one is exactly full.
  const chunkSize = plainLength === undefined ? undefined : Math.max(MIN_CHUNK_BYTES, plainLength + 1)
  return inflateRawSync(stream, { finishFlush: constants.Z_SYNC_FLUSH, chunkSize })
}

/** Stored (uncompressed) DEFLATE blocks holding `bytes`; the last one final when `final` is set. */
function storedBlocks(bytes: Buffer, final: boolean, out: Buffer[]): void {
  let offset = 0
  do {
    const length = Math.min(STORED_BLOCK_MAX, bytes.length - offset)
    const last = final && offset + length === bytes.length
    const header = Buffer.alloc(5)
    header[0] = last ? 1 : 0
    header.writeUInt16LE(length, 1)
    header.writeUInt16LE(~length & 0xffff, 3)
    out.push(header, bytes.subarray(offset, offset + length))
    offset += length
  } while (offset < bytes.length)
}

/**
 * One zlib stream (RFC 1950, HTTP's `Content-Encoding: deflate`) whose text is the parts in order: plain
 * bytes go in stored blocks, open streams are copied as they are, and the checksum is combined from the
 * parts' own. The stream ends with a final stored block (the last plain part's, or an empty one).
 */
export function zlibStream(parts: (Buffer | DeflatedText)[]): Buffer {
  const out: Buffer[] = [ZLIB_HEADER]
  let checksum = 1
  deflateBlocks(parts, out, (part) => {
    checksum = Buffer.isBuffer(part) ? adler32(part, checksum) : adler32Combine(checksum, part.adler32, part.length)
  })
  const trailer = Buffer.alloc(4)
  trailer.writeUInt32BE(checksum)
  out.push(trailer)
  return Buffer.concat(out)
}

/**
 * The same as one gzip member (RFC 1952, HTTP's `Content-Encoding: gzip`, the only coding ethers and Go's
 * `net/http` ask for): the same blocks between a gzip header and the text's CRC-32 and length. `null` when an
 * open stream has no CRC-32 (stored before migration 0013).
 */
export function gzipMember(parts: (Buffer | DeflatedText)[]): Buffer | null {
  if (parts.some((part) => !Buffer.isBuffer(part) && part.crc32 === undefined)) return null
  const out: Buffer[] = [GZIP_HEADER]
  let checksum = 0
  let length = 0
  deflateBlocks(parts, out, (part) => {
    checksum = Buffer.isBuffer(part) ? crc32(part, checksum) : crc32Combine(checksum, part.crc32!, part.length)
    length += part.length
  })
  const trailer = Buffer.alloc(8)
  trailer.writeUInt32LE(checksum, 0)
  // ISIZE: the text's length modulo 2^32.
  trailer.writeUInt32LE(length % 2 ** 32, 4)
  out.push(trailer)
  return Buffer.concat(out)
}

/**
 * The DEFLATE blocks of the parts in order (plain bytes in stored blocks, open streams as they are), the last
 * one final; `each` sees every part, for the checksum.
 */
function deflateBlocks(parts: (Buffer | DeflatedText)[], out: Buffer[], each: (part: Buffer | DeflatedText) => void): void {
  parts.forEach((part, index) => {
    const last = index === parts.length - 1
    if (Buffer.isBuffer(part)) storedBlocks(part, last, out)
    else {
      out.push(part.stream)
      if (last) storedBlocks(Buffer.alloc(0), true, out)
    }
    each(part)
  })
  if (parts.length === 0) storedBlocks(Buffer.alloc(0), true, out)
}
