import type { RpcLog } from 'viem'
import { describe, expect, test } from 'vitest'
import { hex, loadFixedChain } from '../../test/fixtures/fixed-chain.js'
import { CUSTOM_TOPIC } from '../devnet/contracts.js'
import { chainFacts, edgeQueries, logQueries, UNKNOWN_HASH } from '../../test/fixtures/fixed-chain-queries.js'
import { useSeededChain } from '../../test/fixtures/seeded-db.js'
import { logFilter } from '../codecs/index.js'
import { BlockRangeBeyondHeadError, HeaderNotFoundError, InvalidBlockRangeError, LimitExceededError, UnknownBlockError } from '../errors.js'
import { createResolvers, DEFAULT_LOG_LIMITS, type LogLimits, type Resolvers } from './index.js'
import { LOG_JSON_FIXED_BYTES } from './logs.js'

const chain = loadFixedChain()
const seeded = useSeededChain()

const everything = { fromBlock: '0x0', toBlock: hex(chain.indexedHead) }
/** The node's answer for every indexed log: the reference the limit tests cut. */
const allLogs = () => chain.answer('eth_getLogs', [everything]) as RpcLog[]
const edge = (name: string) => edgeQueries(chain).find((query) => query.name === name)!

function getLogs(filter: unknown, limits: LogLimits = DEFAULT_LOG_LIMITS, resolvers: Resolvers = seeded().resolvers) {
  return resolvers.getLogs({ filter: logFilter.parse(filter), limits })
}

/** A log's size as the byte bound counts it: the fixed part and its data's hex digits (computed here from the node's answer). */
const estimatedBytes = (log: RpcLog) => LOG_JSON_FIXED_BYTES + (log.data.length - 2)
/** The index of the first of `logs` whose estimated bytes take the running total past `maxBytes`. */
function firstPast(logs: RpcLog[], maxBytes: number): number {
  let total = 0
  return logs.findIndex((log) => (total += estimatedBytes(log)) > maxBytes)
}

/** Resolvers with an answer cache of their own: a limit is checked on a query no earlier test has cached. */
const fresh = () => seeded().createResolvers()

describe('eth_getLogs answers as the node does for the same chain', () => {
  test.each(logQueries(chain))('$name', async ({ method, params, reference }) => {
    expect(await getLogs(params[0])).toStrictEqual(chain.answer(method, reference))
  })

  test('the queries above meet logs with zero to four topics, from more than one address', () => {
    const logs = allLogs()
    expect(new Set(logs.map((log) => log.topics.length))).toEqual(new Set([0, 1, 2, 3, 4]))
    expect(new Set(logs.map((log) => log.address)).size).toBeGreaterThan(1)
  })
})

describe('eth_getLogs refuses what the index cannot answer, with typed errors', () => {
  test('fromBlock after toBlock: InvalidBlockRangeError, as geth (anvil answers an empty list)', async () => {
    const { method, params } = edge('logs of an inverted range')
    await expect(getLogs(params[0])).rejects.toThrow(InvalidBlockRangeError)
    expect(chain.answer(method, params)).toEqual([])
  })

  test('a range that ends past the indexed head: BlockRangeBeyondHeadError', async () => {
    await expect(getLogs({ fromBlock: '0x0', toBlock: hex(chain.indexedHead + 1) })).rejects.toThrow(BlockRangeBeyondHeadError)
  })

  test('a range that starts past the indexed head, to latest: BlockRangeBeyondHeadError', async () => {
    await expect(getLogs({ fromBlock: hex(chain.indexedHead + 1) })).rejects.toThrow(BlockRangeBeyondHeadError)
  })

  test('an unknown block hash: UnknownBlockError, and the node errs too', async () => {
    const { method, params } = edge('logs of an unknown block hash')
    expect(params).toEqual([{ blockHash: UNKNOWN_HASH }])
    await expect(getLogs(params[0])).rejects.toThrow(UnknownBlockError)
    expect(chain.errorOf(method, params)).toMatchObject({ message: 'unknown block' })
  })

  test('safe, while the index holds no safe head: HeaderNotFoundError', async () => {
    await expect(getLogs({ fromBlock: '0x0', toBlock: 'safe' })).rejects.toThrow(new HeaderNotFoundError('safe'))
  })

  test('more blocks than the limit: LimitExceededError naming the range that fits, which then answers', async () => {
    const limits = { ...DEFAULT_LOG_LIMITS, maxBlockRange: 5 }
    const refusal = await getLogs(everything, limits, fresh()).catch((error: unknown) => error)
    expect(refusal).toBeInstanceOf(LimitExceededError)
    expect(refusal).toMatchObject({
      message: 'block range too large: at most 5 blocks per query. Try with this block range [0x0, 0x4].',
      data: { from: '0x0', to: '0x4', limit: 5 },
    })
    const fitting = await getLogs({ fromBlock: '0x0', toBlock: '0x4' }, limits)
    expect(fitting).toStrictEqual(allLogs().filter((log) => Number(log.blockNumber) <= 4))
  })

  test('more logs than the limit: LimitExceededError naming the blocks before the one that overflows', async () => {
    const maxLogs = 10
    const overflowBlock = Number(allLogs()[maxLogs]!.blockNumber)
    const limits = { ...DEFAULT_LOG_LIMITS, maxLogs }
    const refusal = await getLogs(everything, limits, fresh()).catch((error: unknown) => error)
    expect(refusal).toBeInstanceOf(LimitExceededError)
    expect(refusal).toMatchObject({ data: { from: '0x0', to: hex(overflowBlock - 1), limit: maxLogs } })
    const fitting = await getLogs({ fromBlock: '0x0', toBlock: hex(overflowBlock - 1) }, limits)
    expect(fitting).toStrictEqual(allLogs().filter((log) => Number(log.blockNumber) < overflowBlock))
    expect(fitting.length).toBeLessThanOrEqual(maxLogs)
  })

  test('more logs than the limit in the first block alone: LimitExceededError naming that block, which is then answered whole', async () => {
    const { busiestBlock } = chainFacts(chain)
    const inBusiest = allLogs().filter((log) => Number(log.blockNumber) === busiestBlock)
    const limits = { ...DEFAULT_LOG_LIMITS, maxLogs: inBusiest.length - 1 }
    const refusal = await getLogs({ fromBlock: hex(busiestBlock), toBlock: hex(chain.indexedHead) }, limits, fresh()).catch((error: unknown) => error)
    expect(refusal).toBeInstanceOf(LimitExceededError)
    expect(refusal).toMatchObject({
      message: `query returned more than ${inBusiest.length - 1} results. Try with this block range [${hex(busiestBlock)}, ${hex(busiestBlock)}].`,
      data: { from: hex(busiestBlock), to: hex(busiestBlock) },
    })
    // One block's logs are all given, by number or by hash, past the cap (as reth gives them): no smaller range exists.
    expect(await getLogs({ fromBlock: hex(busiestBlock), toBlock: hex(busiestBlock) }, limits, fresh())).toStrictEqual(inBusiest)
    const { hash } = chain.answer('eth_getBlockByNumber', [hex(busiestBlock), false]) as { hash: string }
    expect(await getLogs({ blockHash: hash }, limits, fresh())).toStrictEqual(inBusiest)
    // Within the byte bound still.
    const bytesOfBlock = inBusiest.length * LOG_JSON_FIXED_BYTES
    await expect(
      getLogs({ fromBlock: hex(busiestBlock), toBlock: hex(busiestBlock) }, { ...limits, maxBytes: Math.floor(bytesOfBlock / 2) }, fresh()),
    ).rejects.toThrow(LimitExceededError)
  })

  test('more bytes than the bound: LimitExceededError naming the blocks before the one that passes it, which then answers', async () => {
    const logs = allLogs()
    // The bound falls inside the answer, past the first few blocks: a third of its estimated bytes.
    const maxBytes = Math.floor((logs.length * LOG_JSON_FIXED_BYTES) / 3)
    const overflow = firstPast(logs, maxBytes)
    const overflowBlock = Number(logs[overflow]!.blockNumber)
    expect(overflowBlock).toBeGreaterThan(0)
    const limits = { ...DEFAULT_LOG_LIMITS, maxBytes }
    // The rows each statement returns, read off the same database: Postgres stops at the bound, not the resolver.
    const returned: number[] = []
    const { db } = seeded()
    const counting = {
      ...db,
      query: <row extends Record<string, unknown>>(statement: Parameters<typeof db.query>[0]) =>
        db.query<row>(statement).then((rows) => {
          returned.push(rows.length)
          return rows
        }),
    }
    const refusal = await getLogs(everything, limits, createResolvers({ db: counting, upstream: null })).catch((error: unknown) => error)
    expect(Math.max(...returned)).toBe(overflow + 1)
    expect(logs.length).toBeGreaterThan(overflow + 1)
    expect(refusal).toBeInstanceOf(LimitExceededError)
    expect(refusal).toMatchObject({
      message: `query returned more than ${maxBytes} bytes of logs. Try with this block range [0x0, ${hex(overflowBlock - 1)}].`,
      data: { from: '0x0', to: hex(overflowBlock - 1), limit: maxBytes },
    })
    const fitting = await getLogs({ fromBlock: '0x0', toBlock: hex(overflowBlock - 1) }, limits, fresh())
    expect(fitting).toStrictEqual(logs.filter((log) => Number(log.blockNumber) < overflowBlock))
    // The bound is what the node's own answer weighs: the fitting part is within it, one more log is not.
    expect(fitting.reduce((total, log) => total + estimatedBytes(log), 0)).toBeLessThanOrEqual(maxBytes)
    expect(JSON.stringify(fitting).length).toBeLessThanOrEqual(maxBytes)
  })

  test('an answer cached for a larger bound is refused under a smaller one, as a fresh query is', async () => {
    const resolvers = fresh()
    const whole = await getLogs(everything, DEFAULT_LOG_LIMITS, resolvers)
    expect(whole).toStrictEqual(allLogs())
    const maxBytes = Math.floor((whole.length * LOG_JSON_FIXED_BYTES) / 2)
    const overflowBlock = Number(whole[firstPast(whole, maxBytes)]!.blockNumber)
    await expect(getLogs(everything, { ...DEFAULT_LOG_LIMITS, maxBytes }, resolvers)).rejects.toMatchObject({
      data: { from: '0x0', to: hex(overflowBlock - 1), limit: maxBytes },
    })
  })

  test('more bytes than the bound in the first block alone: LimitExceededError asking for filters', async () => {
    const { busiestBlock } = chainFacts(chain)
    const maxBytes = LOG_JSON_FIXED_BYTES
    await expect(getLogs({ fromBlock: hex(busiestBlock), toBlock: hex(chain.indexedHead) }, { ...DEFAULT_LOG_LIMITS, maxBytes }, fresh())).rejects.toThrow(
      new LimitExceededError(`query returned more than ${maxBytes} bytes of logs in block ${hex(busiestBlock)}; add address or topic filters`),
    )
  })

  test('a query no index answers exactly is priced first and refused over the cost limit; an exact one is not', async () => {
    const limits = { ...DEFAULT_LOG_LIMITS, maxQueryCost: 1 }
    const topicOnly = { ...everything, topics: [CUSTOM_TOPIC] }
    const refusal = await getLogs(topicOnly, limits, fresh()).catch((error: unknown) => error)
    expect(refusal).toBeInstanceOf(LimitExceededError)
    expect(refusal).toMatchObject({ message: expect.stringMatching(/^query would scan too many logs/), data: { from: '0x0' } })
    // An address with topic0, and a single block, have an index of their own: never priced.
    const [exact, oneBlock] = logQueries(chain).filter((query) => ['address and topic0', 'one block by number'].includes(query.name))
    for (const query of [exact!, oneBlock!]) expect(await getLogs(query.params[0], limits, fresh())).toStrictEqual(chain.answer(query.method, query.reference))
  })
})

describe('eth_getLogs in pages (GraphQL logs)', () => {
  test('pages of a few logs, each after the last, add up to the whole answer', async () => {
    const filter = logFilter.parse(everything)
    const pages: RpcLog[][] = []
    let after: { blockNumber: number; logIndex: number } | null = null
    for (;;) {
      const page = await seeded().resolvers.getLogsPage({ filter, first: 4, after, limits: DEFAULT_LOG_LIMITS })
      pages.push(page.logs)
      const last = page.logs.at(-1)
      if (!page.hasNextPage || last === undefined) break
      after = { blockNumber: Number(last.blockNumber), logIndex: Number(last.logIndex) }
    }
    expect(pages.flat()).toStrictEqual(allLogs())
    expect(pages.length).toBe(Math.ceil(allLogs().length / 4))
  })

  test('a page ends before the log that passes the byte bound, holds one log at least, and the pages add up to the whole answer', async () => {
    const filter = logFilter.parse(everything)
    // Room for two or three logs: pages of 20 are cut by bytes, not by count.
    const limits = { ...DEFAULT_LOG_LIMITS, maxBytes: 3 * LOG_JSON_FIXED_BYTES + 100 }
    const pages: RpcLog[][] = []
    let after: { blockNumber: number; logIndex: number } | null = null
    for (;;) {
      const page = await fresh().getLogsPage({ filter, first: 20, after, limits })
      pages.push(page.logs)
      const last = page.logs.at(-1)
      if (!page.hasNextPage || last === undefined) break
      after = { blockNumber: Number(last.blockNumber), logIndex: Number(last.logIndex) }
    }
    expect(pages.flat()).toStrictEqual(allLogs())
    for (const page of pages) {
      expect(page.length).toBeGreaterThanOrEqual(1)
      expect(page.reduce((total, log) => total + estimatedBytes(log), 0)).toBeLessThanOrEqual(limits.maxBytes)
    }
    expect(pages.length).toBeGreaterThanOrEqual(Math.ceil(allLogs().length / 3))
    // One log larger than the bound still makes a page of its own.
    const tiny = await fresh().getLogsPage({ filter, first: 20, after: null, limits: { ...DEFAULT_LOG_LIMITS, maxBytes: 1 } })
    expect(tiny).toEqual({ logs: [allLogs()[0]], hasNextPage: true, fromNumber: 0 })
  })

  test('a page over more blocks than the limit is refused, as getLogs is', async () => {
    const limits = { ...DEFAULT_LOG_LIMITS, maxBlockRange: 5 }
    await expect(seeded().resolvers.getLogsPage({ filter: logFilter.parse(everything), first: 4, after: null, limits })).rejects.toThrow(LimitExceededError)
  })
})
