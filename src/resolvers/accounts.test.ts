import { describe, expect, test } from 'vitest'
import { hex, loadFixedChain } from '../../test/fixtures/fixed-chain.js'
import { accountQueries, chainFacts, edgeQueries, UNKNOWN_HASH, UNTOUCHED_ADDRESS } from '../../test/fixtures/fixed-chain-queries.js'
import { useSeededChain } from '../../test/fixtures/seeded-db.js'
import { address, optionalBlockArgument } from '../codecs/index.js'
import type { Db } from '../db/index.js'
import { HeaderNotFoundError, UpstreamError } from '../errors.js'
import { createResolvers, type Resolvers } from './index.js'

const chain = loadFixedChain()
const seeded = useSeededChain()

const edge = (name: string) => edgeQueries(chain).find((query) => query.name === name)!

function read(resolvers: Resolvers, method: string, [account, block]: unknown[]) {
  const parameters = { address: address.parse(account), block: optionalBlockArgument.parse(block) }
  return method === 'eth_getBalance' ? resolvers.getBalance(parameters) : resolvers.getTransactionCount(parameters)
}

/**
 * Both ways the index answers state: with an answer cache, from each account's whole history of changes held in
 * memory; without one, one query per read.
 */
describe.each([
  { reads: 'from the account history in the answer cache', cacheBytes: undefined },
  { reads: 'by one query per read, without an answer cache', cacheBytes: 0 },
])('balance and nonce read $reads', ({ cacheBytes }) => {
  let resolvers: Resolvers | undefined
  const resolversOf = () => {
    resolvers ??= seeded().createResolvers({ cacheBytes })
    return resolvers
  }

  describe('answer as the node does for the same chain', () => {
    test.each(accountQueries(chain))('$method of $name', async ({ method, params, reference }) => {
      expect(await read(resolversOf(), method, params)).toBe(chain.answer(method, reference))
    })
  })

  test('an omitted block argument is latest', async () => {
    const [sender] = chainFacts(chain).senders
    for (const method of ['eth_getBalance', 'eth_getTransactionCount'])
      expect(await read(resolversOf(), method, [sender])).toBe(chain.answer(method, [sender, hex(chain.indexedHead)]))
  })

  test('a block past the indexed head: HeaderNotFoundError (the node errs past its own head too)', async () => {
    const { method, params } = edge('a balance past the head')
    await expect(read(resolversOf(), method, params)).rejects.toThrow(HeaderNotFoundError)
    expect(chain.errorOf(method, params)).toBeDefined()
    const past = chain.indexedHead + 1
    // As reth (Base's node) writes it: -32001 and the block asked for.
    await expect(read(resolversOf(), 'eth_getBalance', [UNTOUCHED_ADDRESS, hex(past)])).rejects.toMatchObject({
      code: -32001,
      message: `block not found: 0x${past.toString(16)}`,
    })
  })

  test('an unknown block hash: HeaderNotFoundError (the node errs too)', async () => {
    const { method, params } = edge('a nonce at an unknown block hash')
    expect(params[1]).toEqual({ blockHash: UNKNOWN_HASH })
    await expect(read(resolversOf(), method, params)).rejects.toMatchObject({ code: -32001, message: `block not found: hash ${UNKNOWN_HASH}` })
    await expect(read(resolversOf(), method, [params[0], { blockHash: UNKNOWN_HASH, requireCanonical: true }])).rejects.toMatchObject({
      code: -32001,
      message: `block not found: canonical hash ${UNKNOWN_HASH}`,
    })
    expect(chain.errorOf(method, params)).toBeDefined()
  })

  test('an account the index never saw change is read through to the upstream: without one, UpstreamError', async () => {
    await expect(read(resolversOf(), 'eth_getBalance', [UNTOUCHED_ADDRESS, 'latest'])).rejects.toThrow(UpstreamError)
  })
})

test('without an answer cache, reads asked at the same moment share one statement, each getting its own answer', async () => {
  const { db } = seeded()
  let statements = 0
  const counting: Db = {
    ...db,
    query: (statement) => {
      statements++
      return db.query(statement)
    },
  }
  const resolvers = createResolvers({ db: counting, upstream: null, cacheBytes: 0 })
  // Block numbers and `latest` only: a hash or a tag the chain resolves from the database would add its own lookups.
  const queries = accountQueries(chain).filter(({ params }) => typeof params[1] === 'string' && params[1] !== 'earliest')
  expect(queries.length).toBeGreaterThan(40)
  // The chain's view loaded first, so that only the reads themselves are counted.
  await read(resolvers, queries[0]!.method, queries[0]!.params)
  statements = 0
  const answers = await Promise.all(queries.map(({ method, params }) => read(resolvers, method, params)))
  expect(answers).toEqual(queries.map(({ method, reference }) => chain.answer(method, reference)))
  expect(statements).toBe(1)
})
