import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { result, rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { startFaultyProxy } from './fixtures/faulty-proxy.js'
import { waitForSameHead } from './fixtures/sync.js'

// A block whose receipts are ~16.8 MB of JSON: eight logs of 1 MiB each. viem, which flashgate reads the
// upstream with, refuses answers over 10 MiB unless told otherwise; such a block then stopped ingest for good
// (asked for again and again) and failed every read of it below the index. On Base a byte of log data costs
// 8 gas, so such a block costs a few dollars to make.

/** Runtime: LOG0 of `calldata[0..32]` bytes of (zeroed) memory from offset 0. */
const LOG_MEMORY_RUNTIME = '5f355fa000'
/** PUSH5 runtime, PUSH0, MSTORE, RETURN(27, 5). */
const LOG_MEMORY_INIT = `0x64${LOG_MEMORY_RUNTIME}5f526005601bf3`
const LOG_BYTES = 1024 * 1024
const LARGE_LOGS = 8
/** 1 MiB of memory (2.2M gas) and of log data (8.4M gas), with room to spare. */
const CALL_GAS = 11_000_000
const BLOCK_GAS_LIMIT = 100_000_000
/** viem's default bound on an HTTP answer, which the block's receipts pass. */
const VIEM_DEFAULT_MAX_RESPONSE = 10 * 1024 * 1024
/** The second gateway's dedicated byte bound for eth_getLogs: less than the block's logs. */
const SMALL_LOGS_BYTES = 4 * 1024 * 1024

let anvil: Anvil
let indexing: { database: TestDatabase; gateway: TestGateway } | undefined
let above: { database: TestDatabase; gateway: TestGateway } | undefined
let proxy: Awaited<ReturnType<typeof startFaultyProxy>> | undefined
let bigBlock: number

const hex = (n: number) => `0x${n.toString(16)}`
const hashOf = (block: unknown) => (block as { hash: string }).hash

async function mine(): Promise<void> {
  await result(anvil.rpcUrl, 'evm_mine')
}

beforeAll(async () => {
  anvil = await startAnvil({ noMining: true, extraArgs: ['--gas-limit', String(BLOCK_GAS_LIMIT)] })
  const [from] = await result<string[]>(anvil.rpcUrl, 'eth_accounts')
  const deployment = await result<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from, data: LOG_MEMORY_INIT, gas: '0x100000' }])
  await mine()
  const { contractAddress } = await result<{ contractAddress: string }>(anvil.rpcUrl, 'eth_getTransactionReceipt', [deployment])
  const size = `0x${LOG_BYTES.toString(16).padStart(64, '0')}`
  const sent: string[] = []
  for (let index = 0; index < LARGE_LOGS; index++)
    sent.push(await result<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from, to: contractAddress, data: size, gas: hex(CALL_GAS) }]))
  await mine()
  const receipts = await Promise.all(sent.map((hash) => result<{ blockNumber: string; status: string }>(anvil.rpcUrl, 'eth_getTransactionReceipt', [hash])))
  expect(receipts.map((receipt) => receipt.status)).toEqual(Array(LARGE_LOGS).fill('0x1'))
  bigBlock = Number(receipts[0]!.blockNumber)
  expect(new Set(receipts.map((receipt) => receipt.blockNumber))).toEqual(new Set([hex(bigBlock)]))
  // A small block after it, so that a gateway starting above the large one has something to index.
  await result(anvil.rpcUrl, 'eth_sendTransaction', [{ from, to: from, value: '0x1' }])
  await mine()
}, 120_000)

afterAll(async () => {
  for (const started of [indexing, above]) {
    await started?.gateway.stop()
    await started?.database.drop()
  }
  await proxy?.stop()
  await anvil?.stop()
})

async function start(options: { upstreamRpc: string; startBlock: string; maxLogsBytes?: number }) {
  const database = await createTestDatabase()
  const gateway = await startTestGateway({ databaseUrl: database.databaseUrl, answerCacheMb: 0, ...options })
  return { database, gateway }
}

async function dedicatedUrl(gateway: TestGateway): Promise<string> {
  const { key } = await gateway.resolvers.createApiKey({ name: 'large-blocks', policy: 'dedicated', rateLimit: 0 })
  return `${gateway.url}/rpc/${key}`
}

describe('a block whose answers pass 10 MiB', () => {
  test("the node's receipts of it are that large", async () => {
    const response = await fetch(anvil.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockReceipts', params: [hex(bigBlock)] }),
    })
    expect((await response.arrayBuffer()).byteLength).toBeGreaterThan(VIEM_DEFAULT_MAX_RESPONSE)
  })

  test('is indexed, and its receipts and logs answer as the node does', async () => {
    indexing = await start({ upstreamRpc: anvil.rpcUrl, startBlock: '0' })
    await waitForSameHead(indexing.gateway, anvil.rpcUrl)
    const url = await dedicatedUrl(indexing.gateway)
    const block = hex(bigBlock)
    expect(hashOf(await result(url, 'eth_getBlockByNumber', [block, false]))).toBe(hashOf(await result(anvil.rpcUrl, 'eth_getBlockByNumber', [block, false])))
    expect(await result(url, 'eth_getBlockReceipts', [block])).toEqual(await result(anvil.rpcUrl, 'eth_getBlockReceipts', [block]))
    const range = { fromBlock: block, toBlock: block }
    const logs = await result<{ data: string }[]>(url, 'eth_getLogs', [range])
    expect(logs.map((log) => (log.data.length - 2) / 2)).toEqual(Array(LARGE_LOGS).fill(LOG_BYTES))
    expect(logs).toEqual(await result(anvil.rpcUrl, 'eth_getLogs', [range]))
  }, 120_000)

  test('below the index it is read from the upstream; its logs past a byte bound are refused, not read whole', async () => {
    // The upstream behind a proxy that counts the calls reaching the node.
    proxy = await startFaultyProxy(anvil.rpcUrl)
    above = await start({ upstreamRpc: proxy.url, startBlock: String(bigBlock + 1), maxLogsBytes: SMALL_LOGS_BYTES })
    await waitForSameHead(above.gateway, anvil.rpcUrl)
    const url = await dedicatedUrl(above.gateway)
    const block = hex(bigBlock)
    expect(await result(url, 'eth_getBlockReceipts', [block])).toEqual(await result(anvil.rpcUrl, 'eth_getBlockReceipts', [block]))
    const range = { fromBlock: block, toBlock: block }
    // The public endpoint's bound (25 MiB) holds the block's logs; the dedicated one here (4 MiB) does not.
    expect(await result(above.gateway.url, 'eth_getLogs', [range])).toEqual(await result(anvil.rpcUrl, 'eth_getLogs', [range]))
    const asked = proxy.forwarded('eth_getLogs')
    const refused = await rpc(url, 'eth_getLogs', [range])
    expect(refused.error).toEqual({
      code: -32602,
      message: `query returned more than ${SMALL_LOGS_BYTES} bytes of logs in blocks [${block}, ${block}]; ask for fewer blocks or add address or topic filters`,
    })
    // Asked once: an answer refused for its size is not asked for again (viem retries any failure five times).
    expect(proxy.forwarded('eth_getLogs') - asked).toBe(1)
  }, 120_000)
})
