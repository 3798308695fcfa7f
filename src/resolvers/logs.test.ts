import type { RpcLog } from 'viem'
import { describe, expect, test } from 'vitest'
import { hex, loadFixedChain } from '../../test/fixtures/fixed-chain.js'
import { CUSTOM_TOPIC } from '../devnet/contracts.js'
import { chainFacts, edgeQueries, logQueries, UNKNOWN_HASH } from '../../test/fixtures/fixed-chain-queries.js'
import { useSeededChain } from '../../test/fixtures/seeded-db.js'
import { logFilter } from '../codecs/index.js'
import { BlockRangeBeyondHeadError, HeaderNotFoundError, InvalidBlockRangeError, LimitExceededError, UnknownBlockError } from '../errors.js'
import { DEFAULT_LOG_LIMITS, type LogLimits, type Resolvers } from './index.js'

const chain = loadFixedChain()
const seeded = useSeededChain()

const everything = { fromBlock: '0x0', toBlock: hex(chain.indexedHead) }
/** The node's answer for every indexed log: the reference the limit tests cut. */
const allLogs = () => chain.answer('eth_getLogs', [everything]) as RpcLog[]
const edge = (name: string) => edgeQueries(chain).find((query) => query.name === name)!

function getLogs(filter: unknown, limits: LogLimits = DEFAULT_LOG_LIMITS, resolvers: Resolvers = seeded().resolvers) {
  return resolvers.getLogs({ filter: logFilter.parse(filter), limits })
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
    await expect(getLogs({ fromBlock: '0x0', toBlock: 'safe' })).rejects.toThrow(new HeaderNotFoundError('safe block not found'))
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

  test('more logs than the limit in the first block alone: LimitExceededError asking for filters', async () => {
    const { busiestBlock } = chainFacts(chain)
    const inBusiest = allLogs().filter((log) => Number(log.blockNumber) === busiestBlock).length
    const limits = { ...DEFAULT_LOG_LIMITS, maxLogs: inBusiest - 1 }
    await expect(getLogs({ fromBlock: hex(busiestBlock), toBlock: hex(chain.indexedHead) }, limits, fresh())).rejects.toThrow(
      new LimitExceededError(`query returned more than ${inBusiest - 1} results in block ${hex(busiestBlock)}; add address or topic filters`),
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

  test('a page over more blocks than the limit is refused, as getLogs is', async () => {
    const limits = { ...DEFAULT_LOG_LIMITS, maxBlockRange: 5 }
    await expect(seeded().resolvers.getLogsPage({ filter: logFilter.parse(everything), first: 4, after: null, limits })).rejects.toThrow(LimitExceededError)
  })
})
