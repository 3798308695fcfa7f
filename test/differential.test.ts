import { adler32, inflateAny } from '../src/codecs/deflated.js'
import { sql } from 'drizzle-orm'
import { numberToHex } from 'viem'
import { beforeAll, describe, expect, test } from 'vitest'
import { schema } from '../src/db/index.js'
import { type ReceiptJsonRow, receiptJsonRows, renderReceipts } from '../src/resolvers/receipt-json.js'
import type { Anvil } from './fixtures/anvil.js'
import { compareWithReference } from './fixtures/compare.js'
import { useFollowedChain } from './fixtures/followed-chain.js'
import { rpc, type TestGateway } from './fixtures/gateway.js'
import { type ChainFacts, generateQueries, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'

const SEED = 8021
const BLOCKS = 80
const GENERATED_QUERIES = 1_500

const followed = useFollowedChain({ seed: SEED, blocks: BLOCKS })
let anvil: Anvil
let gateway: TestGateway
let facts: ChainFacts
beforeAll(() => {
  const ready = followed()
  anvil = ready.anvil
  gateway = ready.gateway
  facts = ready.facts
})

describe('flashgate answers exactly as anvil for the same chain', () => {
  test('every block, transaction and receipt', async () => {
    const outcome = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, wholeChainQueries(facts))
    expect(outcome.errors).toBe(0)
    expect(facts.transactionHashes.length).toBeGreaterThan(BLOCKS)
  })

  test(`${GENERATED_QUERIES} generated queries of eth_getLogs, eth_getBlockReceipts, eth_getTransactionCount and eth_getBalance`, async () => {
    const queries = generateQueries(createRandom(SEED), facts, GENERATED_QUERIES)
    const outcome = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
    // The generator must exercise real data for every method, not a thousand empty answers.
    for (const method of ['eth_getLogs', 'eth_getBlockReceipts', 'eth_getTransactionCount', 'eth_getBalance']) {
      const sent = queries.filter((query) => query.method === method).length
      expect(sent).toBeGreaterThan(150)
      expect(outcome.nonEmpty[method] ?? 0, method).toBeGreaterThan(sent / 4)
    }
    expect(outcome.errors).toBeLessThan(GENERATED_QUERIES / 5)
  })

  test('the chain has logs with zero to four topics, reverted transactions and contract creations', async () => {
    const logs = (await rpc(gateway.dedicatedUrl, 'eth_getLogs', [{ fromBlock: 'earliest', toBlock: 'latest' }])).result as { topics: string[] }[]
    expect(new Set(logs.map((log) => log.topics.length))).toEqual(new Set([0, 1, 2, 3, 4]))
    const receipts = (
      await Promise.all(facts.transactionHashes.map((hash) => rpc(gateway.dedicatedUrl, 'eth_getTransactionReceipt', [hash])))
    ).map((answer) => answer.result as { status: string; contractAddress: string | null })
    expect(receipts.some((receipt) => receipt.status === '0x0')).toBe(true)
    expect(receipts.filter((receipt) => receipt.contractAddress !== null).length).toBeGreaterThanOrEqual(2)
  })

  test("each block's stored eth_getBlockReceipts answer is, byte for byte, what its receipt and log rows render", async () => {
    const { blockReceipts, logs, receipts } = schema
    const stored = await gateway.db.query<{ number: number; deflated: Uint8Array; plainLength: number; adler32: string | number }>(
      sql`select ${blockReceipts.blockNumber}::int as number, ${blockReceipts.deflated} as deflated, ${blockReceipts.plainLength} as "plainLength",
            ${blockReceipts.adler32} as adler32 from ${blockReceipts} order by 1`,
    )
    expect(stored.map((row) => row.number)).toEqual(Array.from({ length: facts.head + 1 }, (_, number) => number))
    for (const { number, deflated, plainLength, adler32: checksum } of stored) {
      const rows = await gateway.db.query<ReceiptJsonRow>(receiptJsonRows(sql`${receipts.blockNumber} = ${number}`, sql`${logs.blockNumber} = ${number}`))
      const text = Buffer.from(`[${renderReceipts(rows).join(',')}]`)
      expect(inflateAny(deflated).toString('utf8'), `block ${number}`).toBe(text.toString('utf8'))
      // Stored open, with the length and checksum that let it go out as it is (codecs/deflated.ts).
      expect({ plainLength, adler32: Number(checksum) }, `block ${number}`).toEqual({ plainLength: text.length, adler32: adler32(text) })
    }
  })

  test('an omitted block argument and "pending" (no Flashblocks feed) answer as latest', async () => {
    const [account] = facts.accounts
    const latest = await rpc(anvil.rpcUrl, 'eth_getBalance', [account, 'latest'])
    expect(await rpc(gateway.dedicatedUrl, 'eth_getBalance', [account])).toMatchObject({ result: latest.result })
    expect(await rpc(gateway.dedicatedUrl, 'eth_getBalance', [account, 'pending'])).toMatchObject({ result: latest.result })
    const nonce = await rpc(anvil.rpcUrl, 'eth_getTransactionCount', [account, 'latest'])
    expect(await rpc(gateway.dedicatedUrl, 'eth_getTransactionCount', [account, 'pending'])).toMatchObject({ result: nonce.result })
    const receipts = await rpc(anvil.rpcUrl, 'eth_getBlockReceipts', ['latest'])
    expect(await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['pending'])).toMatchObject({ result: receipts.result })
    const logs = await rpc(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: 'latest' }])
    expect(await rpc(gateway.dedicatedUrl, 'eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending' }])).toMatchObject({ result: logs.result })
  })

  // Last: it empties block_receipts, as in an index written before that table existed (migration 0003).
  test('blocks without a stored receipts answer are answered from their rows, as anvil answers', async () => {
    await gateway.db.query(sql`delete from ${schema.blockReceipts}`)
    gateway.resolvers.notify({ reorg: true })
    const queries = Array.from({ length: facts.head + 1 }, (_, number) => ({ method: 'eth_getBlockReceipts', params: [numberToHex(number)] }))
    const outcome = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
    expect(outcome.errors).toBe(0)
    expect(outcome.nonEmpty.eth_getBlockReceipts).toBeGreaterThan(BLOCKS / 2)
  })
})
