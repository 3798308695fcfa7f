import { bytesToHex, type Hex } from 'viem'
import { describe, expect, test } from 'vitest'
import { useTestDb } from '../../test/fixtures/db.js'
import { createRandom } from '../../test/fixtures/random.js'
import { CHUNK_BITS, CHUNK_LOGS } from '../codecs/log-chunks.js'
import { type LogRow, logTablesOfBlocks, schema } from '../db/index.js'
import { createLogStore, type LogCursor, type LogMatch } from './log-store.js'

const FIRST_BLOCK = 1_000
const BLOCKS = 40
/** More than 64 chunks of 32: the postings' last bit stands for several chunks. */
const BIG_BLOCK_LOGS = CHUNK_BITS * CHUNK_LOGS + 500

const random = createRandom(4_242)
const bytes = (length: number) => Uint8Array.from({ length }, () => random.int(0, 255))
const word = (value: Uint8Array) => Uint8Array.from([...new Uint8Array(32 - value.length), ...value])
const addresses = Array.from({ length: 12 }, () => bytes(20))
const signatures = Array.from({ length: 6 }, () => bytes(32))
const pick = <item>(items: item[]) => items[Math.min(items.length - 1, Math.floor(random.next() ** 2 * items.length))]!

/** A chain whose blocks hold from none to more logs than 64 chunks, a few hot addresses and events, and a tail. */
function generateLogs(): LogRow[] {
  const logs: LogRow[] = []
  for (let number = FIRST_BLOCK; number < FIRST_BLOCK + BLOCKS; number++) {
    const count = number === FIRST_BLOCK + 7 ? BIG_BLOCK_LOGS : number % 9 === 0 ? 0 : random.int(1, 400)
    const blockHash = bytes(32)
    let transactionIndex = 0
    let transactionHash = bytes(32)
    for (let logIndex = 0; logIndex < count; logIndex++) {
      if (random.chance(0.2)) {
        transactionIndex++
        transactionHash = bytes(32)
      }
      const topics = random.chance(0.05) ? [] : [pick(signatures), ...Array.from({ length: random.int(0, 3) }, () => word(pick(addresses)))]
      const [topic0 = null, topic1 = null, topic2 = null, topic3 = null] = topics
      logs.push({
        blockNumber: number,
        logIndex,
        blockHash,
        blockTimestamp: 1_700_000_000 + number * 2,
        transactionHash,
        transactionIndex,
        address: random.chance(0.1) ? bytes(20) : pick(addresses),
        topic0,
        topic1,
        topic2,
        topic3,
        data: bytes(random.int(0, 96)),
      })
    }
  }
  return logs
}

function matches(log: LogRow, match: LogMatch): boolean {
  if (match.addresses !== null && !match.addresses.includes(bytesToHex(log.address))) return false
  const topics = [log.topic0, log.topic1, log.topic2, log.topic3]
  return match.topics.every((wanted, position) => wanted === null || (topics[position] !== null && wanted.includes(bytesToHex(topics[position]!))))
}

const key = (log: LogRow) => `${log.blockNumber}/${log.logIndex}`
const summary = (log: LogRow) => ({ ...log, blockHash: bytesToHex(log.blockHash), transactionHash: bytesToHex(log.transactionHash), address: bytesToHex(log.address), topic0: log.topic0 && bytesToHex(log.topic0), topic1: log.topic1 && bytesToHex(log.topic1), topic2: log.topic2 && bytesToHex(log.topic2), topic3: log.topic3 && bytesToHex(log.topic3), data: bytesToHex(log.data) })

const getDb = useTestDb()

describe('the log store', () => {
  test('finds what a scan of every log finds, for any filter, range, cap and cursor, including past the first batch and the 64th chunk', async () => {
    const db = getDb()
    const logs = generateLogs()
    const byBlock = new Map<number, LogRow>()
    for (const log of logs) byBlock.set(log.blockNumber, log)
    const blocks = Array.from({ length: BLOCKS }, (_, offset) => {
      const number = FIRST_BLOCK + offset
      return { number, hash: byBlock.get(number)?.blockHash ?? bytes(32), parentHash: bytes(32), timestamp: 1_700_000_000 + number * 2, header: {} }
    })
    // Blocks without logs have their own hash: the logs of the others carry theirs.
    for (const log of logs) log.blockHash = blocks[log.blockNumber - FIRST_BLOCK]!.hash
    const tables = logTablesOfBlocks(logs)
    await db.copyInTransaction([
      { table: schema.blocks, rows: blocks },
      { table: schema.logChunks, rows: tables.logChunks },
      { table: schema.logAddressPostings, rows: tables.logAddressPostings },
      { table: schema.logTopicPostings, rows: tables.logTopicPostings },
    ])
    const store = createLogStore({ db })
    const hex = (value: Uint8Array) => bytesToHex(value) as Hex
    let beyondFirstBatch = 0
    for (let query = 0; query < 150; query++) {
      const shape = random.int(0, 4)
      const someAddresses = () => Array.from({ length: random.int(1, 3) }, () => hex(random.chance(0.9) ? pick(addresses) : bytes(20)))
      const someTopics = () => Array.from({ length: random.int(1, 2) }, () => hex(pick(signatures)))
      const match: LogMatch = {
        addresses: shape === 0 || shape === 2 ? someAddresses() : null,
        topics: [shape === 1 || shape === 2 ? someTopics() : null, ...(shape === 3 || random.chance(0.2) ? [[hex(word(pick(addresses)))]] : [])],
      }
      const from = FIRST_BLOCK + random.int(0, BLOCKS - 1)
      const to = Math.min(FIRST_BLOCK + BLOCKS - 1, from + random.int(0, BLOCKS))
      const cap = random.chance(0.5) ? Number.POSITIVE_INFINITY : random.int(1, 300)
      const expectedAll = logs.filter((log) => log.blockNumber >= from && log.blockNumber <= to && matches(log, match))
      const cursorLog = random.chance(0.3) ? expectedAll[random.int(0, Math.max(0, expectedAll.length - 1))] : undefined
      const after: LogCursor | null = cursorLog === undefined ? null : { blockNumber: cursorLog.blockNumber, logIndex: cursorLog.logIndex }
      const expected = expectedAll.filter((log) => after === null || log.blockNumber > after.blockNumber || (log.blockNumber === after.blockNumber && log.logIndex > after.logIndex)).slice(0, cap)
      const found = await store.find(match, from, to, { cap, after })
      if (!('logs' in found)) throw new Error('refused without a limit')
      expect(found.logs.map(key), JSON.stringify({ match, from, to, cap, after })).toEqual(expected.map(key))
      expect(found.logs.map(summary)).toEqual(expected.map(summary))
      const plan = await store.plan(match, after === null ? from : Math.max(from, after.blockNumber), to)
      if (plan.chunks > 128 && match.addresses !== null) beyondFirstBatch++
      // Over a limit, nothing is read: the count of chunks it would have read comes back.
      if (plan.chunks > 1) expect(await store.find(match, from, to, { cap, after, maxChunks: plan.chunks - 1 })).toEqual({ chunks: plan.chunks })
    }
    expect(beyondFirstBatch).toBeGreaterThan(3)
  }, 120_000)
})
