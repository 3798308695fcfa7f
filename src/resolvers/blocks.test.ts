import { describe, expect, test } from 'vitest'
import { hex, loadFixedChain } from '../../test/fixtures/fixed-chain.js'
import { blockQueries, edgeQueries } from '../../test/fixtures/fixed-chain-queries.js'
import { useSeededChain } from '../../test/fixtures/seeded-db.js'
import { blockNumberOrTagSelector, hash } from '../codecs/index.js'

const chain = loadFixedChain()
const seeded = useSeededChain()

const byMethod = (method: string) => blockQueries(chain).filter((query) => query.method === method)

describe('blocks and transactions answer as the node does for the same chain', () => {
  test.each(byMethod('eth_getBlockByNumber'))('by number: $name', async ({ method, params, reference }) => {
    const block = await seeded().resolvers.getBlock({ block: blockNumberOrTagSelector.parse(params[0]), includeTransactions: params[1] as boolean })
    expect(block).toStrictEqual(chain.answer(method, reference))
  })

  test.each(byMethod('eth_getBlockByHash'))('by hash: $name', async ({ method, params, reference }) => {
    const block = await seeded().resolvers.getBlock({
      block: { kind: 'hash', hash: hash.parse(params[0]), requireCanonical: false },
      includeTransactions: params[1] as boolean,
    })
    expect(block).toStrictEqual(chain.answer(method, reference))
  })

  test.each(byMethod('eth_getTransactionByHash'))('transaction: $name', async ({ method, params, reference }) => {
    expect(await seeded().resolvers.getTransaction({ hash: hash.parse(params[0]) })).toStrictEqual(chain.answer(method, reference))
  })

  test('every indexed block, with its transactions, by number and by hash', async () => {
    const indexed = chain.blocks.slice(0, chain.indexedHead + 1)
    const { resolvers } = seeded()
    const byNumber = await Promise.all(
      indexed.map((block) => resolvers.getBlock({ block: { kind: 'number', number: BigInt(block.number) }, includeTransactions: true })),
    )
    const byHash = await Promise.all(
      indexed.map((block) => resolvers.getBlock({ block: { kind: 'hash', hash: block.hash, requireCanonical: false }, includeTransactions: true })),
    )
    expect(byNumber).toStrictEqual(indexed)
    expect(byHash).toStrictEqual(indexed)
  })

  test('the chain id is the node’s, and the block number is the indexed head', async () => {
    const [chainId] = byMethod('eth_chainId')
    expect(await seeded().resolvers.chainId()).toBe(chain.answer(chainId!.method, chainId!.reference))
    expect(await seeded().resolvers.blockNumber()).toBe(hex(chain.indexedHead))
  })
})

describe('blocks the index does not hold', () => {
  test('a number past the head is null, as the node says', async () => {
    const { method, params } = edgeQueries(chain).find((query) => query.name === 'a block past the head')!
    expect(await seeded().resolvers.getBlock({ block: blockNumberOrTagSelector.parse(params[0]), includeTransactions: false })).toBeNull()
    expect(chain.answer(method, params)).toBeNull()
  })

  test('a block the node has but the index does not yet is null', async () => {
    expect(await seeded().resolvers.getBlock({ block: { kind: 'number', number: BigInt(chain.indexedHead + 1) }, includeTransactions: true })).toBeNull()
  })

  test('pending, without a pre-confirmed block, is the latest one', async () => {
    const latest = chain.blocks[chain.indexedHead]!
    expect(await seeded().resolvers.getBlock({ block: { kind: 'tag', tag: 'pending' }, includeTransactions: true })).toStrictEqual(latest)
  })
})
