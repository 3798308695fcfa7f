import type { RpcTransactionReceipt } from 'viem'
import { describe, expect, test } from 'vitest'
import { hex, loadFixedChain } from '../../test/fixtures/fixed-chain.js'
import { chainFacts, edgeQueries, receiptQueries } from '../../test/fixtures/fixed-chain-queries.js'
import { useSeededChain } from '../../test/fixtures/seeded-db.js'
import { blockArgument, hash } from '../codecs/index.js'

const chain = loadFixedChain()
const seeded = useSeededChain()

const blockQueries = receiptQueries(chain).filter((query) => query.method === 'eth_getBlockReceipts')
const transactionQueries = receiptQueries(chain).filter((query) => query.method === 'eth_getTransactionReceipt')

/** `eth_getBlockReceipts` as JSON-RPC answers it: the stored JSON text, parsed here. */
async function blockReceipts(block: unknown): Promise<unknown> {
  const answer = await seeded().resolvers.getBlockReceipts({ block: blockArgument.parse(block) })
  return answer === null ? null : answer.parse()
}

describe('eth_getBlockReceipts answers as the node does for the same chain', () => {
  test.each(blockQueries)('$name', async ({ method, params, reference }) => {
    expect(await blockReceipts(params[0])).toStrictEqual(chain.answer(method, reference))
  })

  test('the object form (GraphQL) parses the same answer', async () => {
    const { busiestBlock } = chainFacts(chain)
    const receipts = await seeded().resolvers.getBlockReceipts({ block: blockArgument.parse(hex(busiestBlock)) })
    expect(receipts?.parse()).toStrictEqual(chain.receipts[busiestBlock])
  })

  test('a block past the head is null, as the node says', async () => {
    const { method, params } = edgeQueries(chain).find((query) => query.name === 'receipts of a block past the head')!
    expect(await blockReceipts(params[0])).toBeNull()
    expect(chain.answer(method, params)).toBeNull()
  })

  test('a block the node has but the index does not yet is null', async () => {
    expect(await blockReceipts(hex(chain.indexedHead + 1))).toBeNull()
  })

  test('every indexed block answers its receipts, reverted and creating transactions among them', async () => {
    const answers = (await Promise.all(chain.blocks.slice(0, chain.indexedHead + 1).map((block) => blockReceipts(block.hash)))) as RpcTransactionReceipt[][]
    expect(answers).toStrictEqual(chain.receipts.slice(0, chain.indexedHead + 1))
    const all = answers.flat()
    expect(all.some((receipt) => receipt.status === '0x0')).toBe(true)
    expect(all.some((receipt) => receipt.contractAddress !== null)).toBe(true)
  })
})

describe('eth_getTransactionReceipt answers as the node does for the same chain', () => {
  test.each(transactionQueries)('$name', async ({ method, params, reference }) => {
    const answer = await seeded().resolvers.getTransactionReceipt({ hash: hash.parse(params[0]) })
    expect(answer === null ? null : answer.parse()).toStrictEqual(chain.answer(method, reference))
  })

  test('each indexed transaction has the receipt its block answers', async () => {
    const receipts = chain.receipts.slice(0, chain.indexedHead + 1).flat()
    const answers = await Promise.all(receipts.map((receipt) => seeded().resolvers.getTransactionReceipt({ hash: receipt.transactionHash })))
    expect(answers.map((answer) => answer?.parse())).toStrictEqual(receipts)
  })
})
