import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { result, rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { until, waitForSameHead } from './fixtures/sync.js'

// Logs and transactions far larger than the usual ones: a contract that logs its calldata (LOG0 of all of it),
// called with 100 KB. On Base a byte of log data costs 8 gas, so a range of such logs is cheap to make; the
// gateway must neither answer it past its byte bound nor let its answer cache count it as a small answer.

/** Runtime: CALLDATACOPY all of the calldata to memory at 0, then LOG0 of it. */
const LOG_CALLDATA_RUNTIME = '365f5f37365fa000'
/** Returns the 8-byte runtime above: PUSH8 runtime, PUSH0, MSTORE, RETURN(24, 8). */
const LOG_CALLDATA_INIT = `0x67${LOG_CALLDATA_RUNTIME}5f5260086018f3`
const DATA_BYTES = 100_000
const LARGE_LOGS = 12
/** 100 KB of calldata costs 4M gas at Prague's floor price for data (EIP-7623), with room for the log. */
const CALL_GAS = 8_000_000
/** One log of 100 KB is ~200 KB of JSON: the dedicated bound lets two through, not three. */
const MAX_LOGS_BYTES = 450_000
const ANSWER_CACHE_MB = 1

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let dedicatedUrl: string
let first: number
let last: number
const blocks: number[] = []
const hashes: string[] = []

const hex = (n: number) => `0x${n.toString(16)}`

/** A `GET /metrics` figure without labels. */
async function gauge(name: string): Promise<number> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text()
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `))
  if (line === undefined) throw new Error(`no ${name} in /metrics`)
  return Number(line.slice(name.length + 1))
}

/** The receipt of `hash` once anvil has mined it. */
async function mined(hash: string): Promise<{ blockNumber: string; contractAddress: string | null }> {
  let receipt: { blockNumber: string; contractAddress: string | null } | null = null
  await until(
    async () => (receipt = await result(anvil.rpcUrl, 'eth_getTransactionReceipt', [hash])) !== null,
    30_000,
    () => `transaction ${hash} was not mined`,
  )
  return receipt!
}

beforeAll(async () => {
  anvil = await startAnvil()
  const [from] = await result<string[]>(anvil.rpcUrl, 'eth_accounts')
  const deployment = await result<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from, data: LOG_CALLDATA_INIT, gas: '0x100000' }])
  const contract = (await mined(deployment)).contractAddress!
  for (let index = 0; index < LARGE_LOGS; index++) {
    // Distinct, mostly non-zero bytes, so that no two logs are the same.
    const data = Buffer.alloc(DATA_BYTES, (index % 200) + 17)
    data.writeUInt32BE(index, 0)
    const hash = await result<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from, to: contract, data: `0x${data.toString('hex')}`, gas: hex(CALL_GAS) }])
    hashes.push(hash)
    blocks.push(Number((await mined(hash)).blockNumber))
  }
  first = blocks[0]!
  last = blocks.at(-1)!
  database = await createTestDatabase()
  gateway = await startTestGateway({
    upstreamRpc: anvil.rpcUrl,
    databaseUrl: database.databaseUrl,
    answerCacheMb: ANSWER_CACHE_MB,
    maxLogsBytes: MAX_LOGS_BYTES,
  })
  await waitForSameHead(gateway, anvil.rpcUrl)
  const { key } = await gateway.resolvers.createApiKey({ name: 'large', policy: 'dedicated', rateLimit: 0 })
  dedicatedUrl = `${gateway.url}/rpc/${key}`
}, 120_000)

afterAll(async () => {
  await gateway?.stop()
  await database?.drop()
  await anvil?.stop()
})

describe('eth_getLogs answers bounded in bytes', () => {
  test('past the bound: -32602 naming the blocks that fit, which then answer as the node does', async () => {
    const whole = { fromBlock: hex(first), toBlock: hex(last) }
    const refusal = await rpc(dedicatedUrl, 'eth_getLogs', [whole])
    // Two logs fit; the third block's log passes the bound.
    expect(refusal.error).toMatchObject({
      code: -32602,
      message: `query returned more than ${MAX_LOGS_BYTES} bytes of logs. Try with this block range [${hex(first)}, ${hex(blocks[2]! - 1)}].`,
      data: { from: hex(first), to: hex(blocks[2]! - 1), limit: MAX_LOGS_BYTES },
    })
    const fitting = { fromBlock: hex(first), toBlock: hex(blocks[2]! - 1) }
    const answer = await result<{ data: string }[]>(dedicatedUrl, 'eth_getLogs', [fitting])
    expect(answer).toEqual(await result(anvil.rpcUrl, 'eth_getLogs', [fitting]))
    expect(answer.map((log) => (log.data.length - 2) / 2)).toEqual([DATA_BYTES, DATA_BYTES])
    expect(JSON.stringify(answer).length).toBeLessThanOrEqual(MAX_LOGS_BYTES)
  })

  test('the public endpoint, with its own bound (25 MiB by default), answers the whole range as the node does', async () => {
    const whole = { fromBlock: hex(first), toBlock: hex(last) }
    expect(await result(gateway.url, 'eth_getLogs', [whole])).toEqual(await result(anvil.rpcUrl, 'eth_getLogs', [whole]))
  })
})

describe('the answer cache counts large answers as what they weigh', () => {
  test('logs and transactions of 100 KB each: the cache holds the few its memory allows, not every one', async () => {
    for (const [index, block] of blocks.entries()) {
      const logs = await result<unknown[]>(dedicatedUrl, 'eth_getLogs', [{ fromBlock: hex(block), toBlock: hex(block) }])
      expect(logs).toHaveLength(1)
      const transaction = await result<{ input: string }>(dedicatedUrl, 'eth_getTransactionByHash', [hashes[index]])
      expect(transaction.input.length).toBe(2 + 2 * DATA_BYTES)
      const full = await result<{ transactions: unknown[] }>(dedicatedUrl, 'eth_getBlockByNumber', [hex(block), true])
      expect(full.transactions).toHaveLength(1)
    }
    // 36 answers of ~200 KB each were computed; 1 MiB holds five of them. Counted at a fixed size per log or
    // transaction, as before, every one of them stayed (a hundred times the memory the cache was given).
    const entries = await gauge('flashgate_answer_cache_entries')
    const bytes = await gauge('flashgate_answer_cache_bytes')
    expect(bytes).toBeLessThanOrEqual(ANSWER_CACHE_MB * 1024 * 1024)
    expect(entries).toBeLessThanOrEqual(12)
    expect(bytes / entries).toBeGreaterThan(50_000)
  })
})
