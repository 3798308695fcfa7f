import { deflateRawSync, inflateRawSync } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { CHUNK_BITS, CHUNK_BYTES, CHUNK_LOGS, chunkBit, type ChunkLog, decodeChunk, encodeChunks, postingKey, postingsOf } from './log-chunks.js'
import { createRandom } from '../../test/fixtures/random.js'

function randomLogs(seed: number, count: number, { dataBytes = 64 } = {}): ChunkLog[] {
  const random = createRandom(seed)
  const bytes = (length: number) => Uint8Array.from({ length }, () => random.int(0, 255))
  const logs: ChunkLog[] = []
  let logIndex = random.int(0, 3)
  let transactionIndex = 0
  let transactionHash = bytes(32)
  for (let index = 0; index < count; index++) {
    if (random.chance(0.3)) {
      transactionIndex += random.int(1, 3)
      transactionHash = bytes(32)
    }
    logs.push({
      logIndex,
      transactionIndex,
      transactionHash,
      address: bytes(20),
      topics: Array.from({ length: random.int(0, 4) }, () => bytes(32)),
      data: bytes(random.int(0, dataBytes)),
    })
    logIndex += random.chance(0.05) ? 2 : 1
  }
  return logs
}

const plain = (logs: ChunkLog[]) =>
  logs.map((log) => ({ ...log, transactionHash: [...log.transactionHash], address: [...log.address], topics: log.topics.map((topic) => [...topic]), data: [...log.data] }))

describe('log chunks', () => {
  it('decode what they encode, chunk by chunk, for blocks of any size', () => {
    for (const [seed, count] of [[1, 0], [2, 1], [3, CHUNK_LOGS], [4, CHUNK_LOGS + 1], [5, 1_550]] as const) {
      const logs = randomLogs(seed, count)
      const chunks = encodeChunks(logs)
      expect(chunks.map((chunk) => chunk.chunk)).toEqual(chunks.map((_, index) => index))
      expect(chunks.every((chunk) => chunk.logCount <= CHUNK_LOGS && chunk.logCount > 0)).toBe(true)
      expect(plain(chunks.flatMap((chunk) => decodeChunk(chunk.deflated)))).toEqual(plain(logs))
    }
  })

  it('build only the logs a predicate keeps, judged on their address and topics in place', () => {
    const logs = randomLogs(10, CHUNK_LOGS)
    const wanted = new Set([logs[3]!.address, logs[17]!.address].map((address) => Buffer.from(address).toString('hex')))
    const [chunk] = encodeChunks(logs)
    const asked: number[] = []
    const kept = decodeChunk(chunk!.deflated, (bytes, address, topics) => {
      asked.push(topics.length)
      return wanted.has(bytes.toString('hex', address, address + 20))
    })
    expect(asked).toEqual(logs.map((log) => log.topics.length))
    expect(plain(kept)).toEqual(plain([logs[3]!, logs[17]!]))
  })

  it('close a chunk early when its logs carry much data, but never leave a log out', () => {
    const logs = randomLogs(6, 40, { dataBytes: 4_000 })
    const chunks = encodeChunks(logs)
    expect(chunks.length).toBeGreaterThan(2)
    for (const chunk of chunks) {
      const bytes = chunk.logs.slice(0, -1).reduce((sum, log) => sum + 20 + 32 * log.topics.length + log.data.length, 0)
      expect(bytes).toBeLessThan(CHUNK_BYTES)
    }
    expect(plain(chunks.flatMap((chunk) => decodeChunk(chunk.deflated)))).toEqual(plain(logs))
  })

  it('refuse logs out of order and chunks that are cut short or padded', () => {
    const [first, second] = randomLogs(7, 2)
    expect(() => encodeChunks([second!, first!])).toThrow(RangeError)
    const [chunk] = encodeChunks(randomLogs(8, 10))
    const raw = inflateRawSync(chunk!.deflated)
    const deflate = (bytes: Buffer) => deflateRawSync(bytes)
    expect(() => decodeChunk(deflate(raw.subarray(0, raw.length - 1)))).toThrow(/ends early/)
    expect(() => decodeChunk(deflate(Buffer.concat([raw, Buffer.from([0])])))).toThrow(/after its logs/)
  })

  it('post each address and topic0 with the bits of the chunks that hold it', () => {
    const logs = randomLogs(9, 3 * CHUNK_LOGS)
    const shared = logs[0]!.address
    logs[CHUNK_LOGS * 2 + 5]!.address = shared
    const chunks = encodeChunks(logs)
    const { addresses, topics } = postingsOf(chunks)
    expect(addresses.get(postingKey(shared))).toBe(chunkBit(0) | chunkBit(2))
    const withTopic = logs.filter((log) => log.topics.length > 0).length
    expect(topics.size).toBe(withTopic)
    expect(chunkBit(CHUNK_BITS + 10)).toBe(chunkBit(CHUNK_BITS - 1))
  })
})
