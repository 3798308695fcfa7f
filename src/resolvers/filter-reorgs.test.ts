import type { Hash, Hex } from 'viem'
import { beforeAll, describe, expect, test } from 'vitest'
import { useSeededChain } from '../../test/fixtures/seeded-db.js'
import { logFilter as everyLog } from '../codecs/index.js'
import { byteaToHex, hexToBytea } from '../db/index.js'
import { type BlockRows, toRows } from '../ingest/block-data.js'
import { createBlockFetcher } from '../ingest/fetch-block.js'
import { createStore } from '../ingest/store.js'
import { FILTER_REORG_DEPTH, hashPrefix } from './filters.js'
import { DEFAULT_LOG_LIMITS } from './index.js'
import type { Log } from './logs.js'

// HTTP filters across reorgs deeper than the 16 blocks they used to remember, on the seeded index: the
// ingester's own store rewinds it and writes other branches (the fixed chain's blocks under other hashes), so
// the logs a filter delivered from replaced blocks come from `undone_logs` as the rewind kept them.

const seeded = useSeededChain()
/** Where every branch below forks from the fixed chain: 18 blocks replaced of the 20 indexed. */
const FORK = 1
let original: BlockRows[] = []
/**
 * `eth_getLogs`' count limit in the test of many logs taken back: well below the 33 logs of the replaced blocks,
 * and as many as block 13 holds, the most of one block (the new branch's logs are read within the same limit).
 */
const TAKEN_BACK_PER_POLL = 9

/** The fixed chain's blocks from FORK + 1 up to its indexed head, as the ingester writes them. */
beforeAll(async () => {
  const { chain } = seeded()
  const fetcher = createBlockFetcher({ upstream: chain.upstream(), capabilities: { blockReceipts: true, tracing: true } })
  original = []
  for (let number = FORK + 1; number <= chain.indexedHead; number++) original.push(toRows(await fetcher.fetchBlock(number)))
})

/** The same blocks under other hashes (a first byte of `tag`, so that their prefixes differ): another branch. */
function branch(rows: BlockRows[], tag: string): BlockRows[] {
  let parentHash: Uint8Array | undefined
  return rows.map((block) => {
    const hash = hexToBytea(`0x${tag}${byteaToHex(block.block.hash).slice(2 + tag.length)}` as Hex)
    const replaced = {
      ...block,
      block: { ...block.block, hash, parentHash: parentHash ?? block.block.parentHash },
      logs: block.logs.map((log) => ({ ...log, blockHash: hash })),
    }
    parentHash = hash
    return replaced
  })
}

/** Replaces the index above `ancestor` with `rows` in one commit, as the ingester does, and tells the resolvers. */
async function reorg(ancestor: number, rows: BlockRows[]) {
  const { db, resolvers } = seeded()
  await createStore({ db }).writeBlocks(rows, {}, { rewindTo: ancestor })
  resolvers.notify({ reorg: true })
}

async function drain(id: string): Promise<unknown[]> {
  const { resolvers } = seeded()
  const all: unknown[] = []
  for (let round = 0; round < 100; round++) {
    const changes = await resolvers.getFilterChanges({ id, limits: DEFAULT_LOG_LIMITS })
    if (changes.length === 0) return all
    all.push(...changes)
  }
  throw new Error('the filter never ran out of changes')
}

const keyOf = (log: Log) => `${Number(log.blockNumber)}:${Number(log.logIndex)}:${log.blockHash}${log.removed ? ' removed' : ''}`
const hashesOf = (rows: BlockRows[]) => rows.map((block) => byteaToHex(block.block.hash) as Hash)
const logsOf = (rows: BlockRows[], removed = false) =>
  rows.flatMap((block) => block.logs.map((log) => `${log.blockNumber}:${log.logIndex}:${byteaToHex(log.blockHash)}${removed ? ' removed' : ''}`))

describe('a filter polled across a reorg deeper than 16 blocks takes back what it delivered from the replaced blocks and delivers the new branch, each once', () => {
  test(`18 blocks replaced, then 10 of the new branch replaced again before the filter is polled (it remembers ${FILTER_REORG_DEPTH})`, async () => {
    const { resolvers } = seeded()
    expect(FILTER_REORG_DEPTH).toBeGreaterThanOrEqual(64)
    // The filters are installed at FORK, and deliver the fixed chain's blocks written after them.
    await createStore({ db: seeded().db }).rewindTo(FORK)
    resolvers.notify({ reorg: true })
    const logFilter = await resolvers.newFilter(everyLog.parse({}))
    const blockFilter = await resolvers.newBlockFilter()
    await createStore({ db: seeded().db }).writeBlocks(original)
    resolvers.notify({ reorg: false })
    expect((await drain(logFilter)).map((log) => keyOf(log as Log))).toEqual(logsOf(original))
    expect(await drain(blockFilter)).toEqual(hashesOf(original))
    expect(logsOf(original).length).toBeGreaterThan(0)

    const b = branch(original, 'bb')
    await reorg(FORK, b)
    expect((await drain(logFilter)).map((log) => keyOf(log as Log))).toEqual([...logsOf(original, true), ...logsOf(b)])
    expect(await drain(blockFilter)).toEqual(hashesOf(b))

    // Two rewinds between polls: blocks 2-19 of b go, then 10-19 of the branch that replaced them (never
    // delivered); `undone_logs` holds three branches' logs at heights 10-19, and the filter takes back b's only.
    const c = branch(original, 'cc')
    await reorg(FORK, c)
    const d = [...c.slice(0, 10 - FORK - 1), ...branch(original.slice(10 - FORK - 1), 'dd')]
    await reorg(9, d.slice(10 - FORK - 1))
    expect((await drain(logFilter)).map((log) => keyOf(log as Log))).toEqual([...logsOf(b, true), ...logsOf(d)])
    expect(await drain(blockFilter)).toEqual(hashesOf(d))
  })

  test('more logs to take back than one answer holds: whole blocks of them per poll, all before the new branch, each once', async () => {
    const { resolvers } = seeded()
    const limits = { ...DEFAULT_LOG_LIMITS, maxLogs: TAKEN_BACK_PER_POLL }
    const polls = async (id: string) => {
      const answers: Log[][] = []
      for (let round = 0; round < 100; round++) {
        const changes = (await resolvers.getFilterChanges({ id, limits })) as Log[]
        if (changes.length === 0) return answers
        answers.push(changes)
      }
      throw new Error('the filter never ran out of changes')
    }
    await createStore({ db: seeded().db }).rewindTo(FORK)
    resolvers.notify({ reorg: true })
    const logFilter = await resolvers.newFilter(everyLog.parse({}))
    const e = branch(original, 'ee')
    await createStore({ db: seeded().db }).writeBlocks(e)
    resolvers.notify({ reorg: false })
    expect((await polls(logFilter)).flat().map(keyOf)).toEqual(logsOf(e))

    const f = branch(original, 'f0')
    await reorg(FORK, f)
    const answers = await polls(logFilter)
    expect(answers.flat().map(keyOf)).toEqual([...logsOf(e, true), ...logsOf(f)])
    // The logs taken back come over several polls, none over the limit but one block's, none with new logs.
    const takingBack = answers.filter((answer) => answer.some((log) => log.removed))
    expect(takingBack.length).toBeGreaterThan(1)
    for (const answer of takingBack.slice(0, -1)) {
      expect(answer.every((log) => log.removed)).toBe(true)
      expect(answer.length <= TAKEN_BACK_PER_POLL || new Set(answer.map((log) => log.blockNumber)).size === 1).toBe(true)
    }
  })

  test('the last replaced block alone holds more logs than one answer: all of them are taken back in the first answer, then the new branch', async () => {
    const { resolvers } = seeded()
    const withLogs = original.filter((block) => block.logs.length > 0)
    const last = withLogs.at(-1)!
    expect(last.logs.length).toBeGreaterThan(1)
    const limits = { ...DEFAULT_LOG_LIMITS, maxLogs: last.logs.length - 1 }
    const lastIndex = original.indexOf(last)
    await createStore({ db: seeded().db }).rewindTo(FORK)
    resolvers.notify({ reorg: true })
    const logFilter = await resolvers.newFilter(everyLog.parse({}))
    await createStore({ db: seeded().db }).writeBlocks(original)
    resolvers.notify({ reorg: false })
    await drain(logFilter)
    // Only `last` and the blocks above it (without logs) are replaced.
    const g = branch(original.slice(lastIndex), 'a1')
    g[0] = { ...g[0]!, block: { ...g[0]!.block, parentHash: original[lastIndex - 1]!.block.hash } }
    await reorg(Number(last.block.number) - 1, g)
    const first = (await resolvers.getFilterChanges({ id: logFilter, limits })) as Log[]
    expect(first.slice(0, last.logs.length).map(keyOf)).toEqual(logsOf([last], true))
    expect([...first, ...((await drain(logFilter)) as Log[])].map(keyOf)).toEqual([...logsOf([last], true), ...logsOf(g)])
  })

  test('a cursor keeps a prefix of each remembered hash: a cursor of 64 blocks takes about what 16 whole hashes did', () => {
    const hash = byteaToHex(original[0]!.block.hash) as Hash
    expect(hashPrefix(hash)).toBe(hash.slice(0, 18))
    // A cursor stored with whole hashes (by an earlier version) is read the same.
    expect(hashPrefix(hashPrefix(hash))).toBe(hashPrefix(hash))
    const cursor = { number: 1_000_000_000, index: 0, hashes: Array.from({ length: FILTER_REORG_DEPTH }, () => hashPrefix(hash)) }
    const before = { number: 1_000_000_000, index: 0, hashes: Array.from({ length: 16 }, () => hash) }
    expect(JSON.stringify(cursor).length).toBeLessThan(1.25 * JSON.stringify(before).length)
  })
})
