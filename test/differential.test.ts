import { deflateRawSync } from 'node:zlib'
import { sql } from 'drizzle-orm'
import { adler32, deflateOpen, inflateAny } from '../src/codecs/deflated.js'
import { inflateSegment } from '../src/codecs/segmented.js'
import { numberToHex } from 'viem'
import { beforeAll, describe, expect, test } from 'vitest'
import { SYNC_KEYS, schema } from '../src/db/index.js'
import { upgradeStorage } from '../src/db/upgrade.js'
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
    const receipts = (await Promise.all(facts.transactionHashes.map((hash) => rpc(gateway.dedicatedUrl, 'eth_getTransactionReceipt', [hash])))).map(
      (answer) => answer.result as { status: string; contractAddress: string | null },
    )
    expect(receipts.some((receipt) => receipt.status === '0x0')).toBe(true)
    expect(receipts.filter((receipt) => receipt.contractAddress !== null).length).toBeGreaterThanOrEqual(2)
  })

  test("each block's stored transactions and receipts hold anvil's answers, whole and segment by segment", async () => {
    for (const table of [schema.blockTransactions, schema.blockReceipts]) {
      const stored = await gateway.db.query<{ number: number; deflated: Uint8Array; plainLength: number; adler32: string | number; offsets: string }>(
        sql`select ${table.blockNumber}::int as number, ${table.deflated} as deflated, ${table.plainLength} as "plainLength",
              ${table.adler32} as adler32, array_to_string(${table.segmentOffsets}, ',') as offsets from ${table} order by 1`,
      )
      expect(stored.map((row) => row.number)).toEqual(Array.from({ length: facts.head + 1 }, (_, number) => number))
      for (const { number, deflated, plainLength, adler32: checksum, offsets: offsetList } of stored) {
        const offsets = offsetList.split(',').map(Number)
        const expected =
          table === schema.blockReceipts
            ? ((await rpc(anvil.rpcUrl, 'eth_getBlockReceipts', [numberToHex(number)])).result as unknown[])
            : ((await rpc(anvil.rpcUrl, 'eth_getBlockByNumber', [numberToHex(number), true])).result as { transactions: unknown[] }).transactions
        const text = inflateAny(deflated)
        expect(JSON.parse(text.toString('utf8')), `block ${number}`).toEqual(expected)
        // Stored open, with the length and checksum that let it go out as it is (codecs/deflated.ts).
        expect({ plainLength, adler32: Number(checksum) }, `block ${number}`).toEqual({ plainLength: text.length, adler32: adler32(text) })
        const segments = offsets.slice(1).map((end, segment) => inflateSegment<unknown>(deflated.subarray(offsets[segment], end)))
        expect(segments.flat(), `block ${number}`).toEqual(expected)
      }
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

  // Last: it turns the index back into the layout of before migration 0009 (a body per transaction and per
  // receipt), with blocks from before 0003 (no stored receipts answer) and 0004 (a finished stream).
  test('an index in the older layout is upgraded in place and answers as anvil does', async () => {
    const { blockReceipts, blockTransactions, receipts, syncState, transactions } = schema
    for (let number = 0; number <= facts.head; number++) {
      const [stored] = await gateway.db.query<{ transactions: Uint8Array; receipts: Uint8Array }>(
        sql`select t.deflated as transactions, r.deflated as receipts from ${blockTransactions} t join ${blockReceipts} r using (block_number) where block_number = ${number}`,
      )
      const bodies = JSON.parse(inflateAny(stored!.transactions).toString('utf8')) as Record<string, unknown>[]
      const answers = JSON.parse(inflateAny(stored!.receipts).toString('utf8')) as Record<string, unknown>[]
      for (const [index, body] of bodies.entries()) {
        await gateway.db.query(
          sql`update ${transactions} set body = ${JSON.stringify(body)}::json where block_number = ${number} and transaction_index = ${index}`,
        )
        await gateway.db.query(sql`insert into ${receipts} (transaction_hash, block_number, transaction_index, body)
          select hash, block_number, transaction_index, ${JSON.stringify({ ...answers[index], logs: [] })}::json from ${transactions}
          where block_number = ${number} and transaction_index = ${index}`)
      }
      const text = JSON.stringify(answers)
      if (number % 3 === 0) await gateway.db.query(sql`delete from ${blockReceipts} where block_number = ${number}`)
      else if (number % 3 === 1)
        await gateway.db.query(
          sql`update ${blockReceipts} set deflated = ${deflateRawSync(text)}, plain_length = null, adler32 = null, segment_offsets = null where block_number = ${number}`,
        )
      else {
        // Written between 0004 and 0009: an open stream with its length and checksum, without segments. Kept as it is.
        const open = deflateOpen(text, 6)
        await gateway.db.query(
          sql`update ${blockReceipts} set deflated = ${open.stream}, plain_length = ${open.length}, adler32 = ${open.adler32}, segment_offsets = null where block_number = ${number}`,
        )
      }
    }
    await gateway.db.query(sql`delete from ${blockTransactions}`)
    await gateway.db.query(sql`delete from ${syncState} where key = ${SYNC_KEYS.storageVersion}`)

    await upgradeStorage(gateway.db)
    gateway.resolvers.notify({ reorg: true })
    const [left] = await gateway.db.query<{ receipts: number; bodies: number; blocks: number }>(sql`select
      (select count(*) from ${receipts})::int as receipts, (select count(*) from ${transactions} where body is not null)::int as bodies,
      (select count(*) from ${blockTransactions})::int as blocks`)
    expect(left).toEqual({ receipts: 0, bodies: 0, blocks: facts.head + 1 })
    const whole = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, wholeChainQueries(facts))
    expect(whole.errors).toBe(0)
    const queries = Array.from({ length: facts.head + 1 }, (_, number) => ({ method: 'eth_getBlockReceipts', params: [numberToHex(number)] }))
    const outcome = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
    expect(outcome.errors).toBe(0)
    expect(outcome.nonEmpty.eth_getBlockReceipts).toBeGreaterThan(BLOCKS / 2)
  })
})
