import { deflateRawSync, inflateRawSync } from 'node:zlib'

/**
 * A block's logs stored in *chunks*: runs of up to `CHUNK_LOGS` consecutive logs, each compressed on its own
 * in a compact binary form, so that a log query reads and inflates only the chunks its postings name (see
 * `chunkBit`), never a row per log. A chunk holds only what a log adds to its block: its index, its
 * transaction (index and hash, once per transaction), address, topics and data. The block's hash and
 * timestamp come from `blocks` when the chunk is read.
 *
 * Layout before compression (integers as unsigned LEB128 varints):
 *   first log index, transaction count, then per transaction: its index, its 32-byte hash;
 *   log count, then per log: log index minus the previous one's minus 1 (0 when consecutive), the ordinal
 *   of its transaction in the list above, its 20-byte address, its topic count (0-4) and 32-byte topics,
 *   its data length and data.
 */

/** Logs per chunk: a Base-shaped chunk of 32 logs is ~2.5 KB deflated, and a selective query reads one per match. */
export const CHUNK_LOGS = 32
/** A chunk also closes once its logs' bytes pass this, so that logs with large data do not make one large row. */
export const CHUNK_BYTES = 16_384
/** zlib's default: about 0.1 ms per chunk to deflate, and smaller (so faster to read) than level 1. */
const CHUNK_DEFLATE_LEVEL = 6
/** Postings keep one bit per chunk of a block; chunks from this one on share the last bit. */
export const CHUNK_BITS = 64

const ADDRESS_BYTES = 20
const WORD_BYTES = 32
const MAX_TOPICS = 4

/** One log as the index stores and reads it, raw bytes throughout. */
export type ChunkLog = {
  logIndex: number
  transactionIndex: number
  transactionHash: Uint8Array
  address: Uint8Array
  topics: Uint8Array[]
  data: Uint8Array
}

export type EncodedChunk = {
  /** The chunk's position in its block, from 0. */
  chunk: number
  logCount: number
  deflated: Buffer
  /** The chunk's logs, for the postings. */
  logs: ChunkLog[]
}

/** The bit of a block's posting that stands for `chunk` (the last bit also for every chunk after it). */
export const chunkBit = (chunk: number): bigint => 1n << BigInt(Math.min(chunk, CHUNK_BITS - 1))

/** The signed 64-bit posting key of an address or topic: its first 8 bytes. A collision only costs a chunk read. */
export function postingKey(bytes: Uint8Array): bigint {
  return Buffer.from(bytes.buffer, bytes.byteOffset, 8).readBigInt64BE(0)
}

/** A block's logs (in log-index order) cut into chunks and compressed. */
export function encodeChunks(logs: readonly ChunkLog[]): EncodedChunk[] {
  const chunks: EncodedChunk[] = []
  let start = 0
  while (start < logs.length) {
    let end = start
    let bytes = 0
    while (end < logs.length && end - start < CHUNK_LOGS && (end === start || bytes < CHUNK_BYTES)) {
      const log = logs[end]!
      bytes += ADDRESS_BYTES + log.topics.length * WORD_BYTES + log.data.length
      end++
    }
    const slice = logs.slice(start, end)
    chunks.push({ chunk: chunks.length, logCount: slice.length, deflated: deflateRawSync(encodeChunk(slice), { level: CHUNK_DEFLATE_LEVEL }), logs: slice })
    start = end
  }
  return chunks
}

function encodeChunk(logs: readonly ChunkLog[]): Buffer {
  const transactions: ChunkLog[] = []
  const ordinals = logs.map((log) => {
    const last = transactions.at(-1)
    if (last === undefined || last.transactionIndex !== log.transactionIndex) transactions.push(log)
    return transactions.length - 1
  })
  let size = 3 * 5 + transactions.length * (5 + WORD_BYTES)
  for (const log of logs) size += 3 * 5 + 1 + ADDRESS_BYTES + log.topics.length * WORD_BYTES + log.data.length
  const writer = new Writer(size)
  writer.varint(logs[0]?.logIndex ?? 0)
  writer.varint(transactions.length)
  for (const transaction of transactions) {
    writer.varint(transaction.transactionIndex)
    writer.fixed(transaction.transactionHash, WORD_BYTES)
  }
  writer.varint(logs.length)
  let previous = (logs[0]?.logIndex ?? 0) - 1
  logs.forEach((log, position) => {
    if (log.logIndex <= previous) throw new RangeError(`log index ${log.logIndex} does not follow ${previous}`)
    if (log.topics.length > MAX_TOPICS) throw new RangeError(`a log has ${log.topics.length} topics`)
    writer.varint(log.logIndex - previous - 1)
    previous = log.logIndex
    writer.varint(ordinals[position]!)
    writer.fixed(log.address, ADDRESS_BYTES)
    writer.byte(log.topics.length)
    for (const topic of log.topics) writer.fixed(topic, WORD_BYTES)
    writer.varint(log.data.length)
    writer.bytes(log.data)
  })
  return writer.done()
}

/**
 * Whether a log is wanted, asked before its fields are cut out: `address` and each topic as offsets into
 * `bytes` (an address is 20 bytes, a topic 32).
 */
export type LogPredicate = (bytes: Buffer, address: number, topics: readonly number[]) => boolean

/**
 * The logs of one stored chunk, or those `keep` wants (the others are skipped without being built). Byte
 * fields are views into one inflated buffer.
 */
export function decodeChunk(deflated: Uint8Array, keep?: LogPredicate): ChunkLog[] {
  const buffer = inflateRawSync(deflated)
  const reader = new Reader(buffer)
  let logIndex = reader.varint() - 1
  const transactions: { index: number; hash: Uint8Array }[] = []
  for (let count = reader.varint(); count > 0; count--) transactions.push({ index: reader.varint(), hash: reader.slice(WORD_BYTES) })
  const logs: ChunkLog[] = []
  const topicOffsets: number[] = []
  for (let count = reader.varint(); count > 0; count--) {
    logIndex += reader.varint() + 1
    const transaction = transactions[reader.varint()]
    if (transaction === undefined) throw new RangeError('log chunk names a transaction it does not hold')
    const address = reader.skip(ADDRESS_BYTES)
    topicOffsets.length = 0
    const topicCount = reader.byte()
    if (topicCount > MAX_TOPICS) throw new RangeError(`log chunk has a log with ${topicCount} topics`)
    for (let topic = 0; topic < topicCount; topic++) topicOffsets.push(reader.skip(WORD_BYTES))
    const data = reader.skip(reader.varint())
    if (keep !== undefined && !keep(buffer, address, topicOffsets)) continue
    logs.push({
      logIndex,
      transactionIndex: transaction.index,
      transactionHash: transaction.hash,
      address: buffer.subarray(address, address + ADDRESS_BYTES),
      topics: topicOffsets.map((offset) => buffer.subarray(offset, offset + WORD_BYTES)),
      data: buffer.subarray(data, reader.position()),
    })
  }
  if (!reader.atEnd()) throw new RangeError('log chunk has bytes after its logs')
  return logs
}

class Writer {
  private buffer: Buffer
  private offset = 0
  constructor(size: number) {
    this.buffer = Buffer.allocUnsafe(size)
  }
  varint(value: number) {
    let rest = value
    while (rest >= 0x80) {
      this.buffer[this.offset++] = (rest % 0x80) | 0x80
      rest = Math.floor(rest / 0x80)
    }
    this.buffer[this.offset++] = rest
  }
  byte(value: number) {
    this.buffer[this.offset++] = value
  }
  fixed(bytes: Uint8Array, length: number) {
    if (bytes.length !== length) throw new RangeError(`expected ${length} bytes, got ${bytes.length}`)
    this.bytes(bytes)
  }
  bytes(bytes: Uint8Array) {
    this.buffer.set(bytes, this.offset)
    this.offset += bytes.length
  }
  done(): Buffer {
    return this.buffer.subarray(0, this.offset)
  }
}

class Reader {
  private offset = 0
  constructor(private readonly buffer: Buffer) {}
  varint(): number {
    let value = 0
    let scale = 1
    for (;;) {
      const byte = this.byte()
      value += (byte & 0x7f) * scale
      if (byte < 0x80) return value
      scale *= 0x80
      if (scale > 2 ** 49) throw new RangeError('log chunk varint too long')
    }
  }
  byte(): number {
    if (this.offset >= this.buffer.length) throw new RangeError('log chunk ends early')
    return this.buffer[this.offset++]!
  }
  slice(length: number): Uint8Array {
    const start = this.skip(length)
    return this.buffer.subarray(start, start + length)
  }
  /** Steps over `length` bytes and returns where they start. */
  skip(length: number): number {
    if (this.offset + length > this.buffer.length) throw new RangeError('log chunk ends early')
    const start = this.offset
    this.offset += length
    return start
  }
  position(): number {
    return this.offset
  }
  atEnd(): boolean {
    return this.offset === this.buffer.length
  }
}

/** For each address and each topic0 among a block's chunks, keyed by `postingKey`: the bitmap of the chunks that hold it. */
export function postingsOf(chunks: readonly EncodedChunk[]): { addresses: Map<bigint, bigint>; topics: Map<bigint, bigint> } {
  const addresses = new Map<bigint, bigint>()
  const topics = new Map<bigint, bigint>()
  const add = (map: Map<bigint, bigint>, key: bigint, bit: bigint) => map.set(key, (map.get(key) ?? 0n) | bit)
  for (const { chunk, logs } of chunks) {
    const bit = chunkBit(chunk)
    for (const log of logs) {
      add(addresses, postingKey(log.address), bit)
      const topic0 = log.topics[0]
      if (topic0 !== undefined) add(topics, postingKey(topic0), bit)
    }
  }
  return { addresses, topics }
}

/** A posting's bitmap as Postgres' signed `bigint` holds it. */
export const signedBits = (bits: bigint): bigint => BigInt.asIntN(64, bits)
