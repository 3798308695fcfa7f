import { getLogsRetryHelper } from '@ponder/utils'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'

const ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'
const HASH = `0x${'ab'.repeat(32)}`

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway

async function post(body: string, path = '/') {
  const response = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  const text = await response.text()
  return { status: response.status, body: text === '' ? null : JSON.parse(text) }
}

beforeAll(async () => {
  anvil = await startAnvil()
  await fetch(anvil.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_mine', params: ['0x14'] }),
  })
  database = await createTestDatabase()
  // Small limits so that the limit errors are cheap to reach.
  gateway = await startTestGateway({
    upstreamRpc: anvil.rpcUrl,
    databaseUrl: database.databaseUrl,
    maxBlockRange: 5,
    maxLogs: 10,
    publicMaxBlockRange: 5,
    publicMaxLogs: 10,
  })
  await gateway.ingester.waitForBlock(20)
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('JSON-RPC envelope errors', () => {
  test('a body that is not JSON gets -32700 with id null', async () => {
    expect(await post('{"jsonrpc":"2.0",')).toEqual({
      status: 200,
      body: { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } },
    })
  })

  test('a request without jsonrpc "2.0" gets -32600 and keeps its id', async () => {
    const { body } = await post(JSON.stringify({ jsonrpc: '1.0', id: 7, method: 'eth_chainId', params: [] }))
    expect(body).toMatchObject({ id: 7, error: { code: -32600 } })
  })

  test('a non-object request, a non-string method and an object id get -32600', async () => {
    for (const request of [42, 'x', null, { jsonrpc: '2.0', id: 1, method: 5 }, { jsonrpc: '2.0', id: { a: 1 }, method: 'eth_chainId' }]) {
      const { body } = await post(JSON.stringify(request))
      expect(body.error.code).toBe(-32600)
    }
  })

  test('an unknown method gets -32601 naming it', async () => {
    const { body } = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_mine', params: [] }))
    expect(body.error).toEqual({ code: -32601, message: 'the method eth_mine does not exist/is not available' })
  })

  test('an empty batch gets a single -32600 error', async () => {
    expect((await post('[]')).body).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'empty batch' } })
  })

  test('a batch answers each entry in order, errors beside results', async () => {
    const { body } = await post(
      JSON.stringify([
        { jsonrpc: '2.0', id: 'a', method: 'eth_blockNumber', params: [] },
        { jsonrpc: '2.0', id: 'b', method: 'nope', params: [] },
        5,
        { jsonrpc: '2.0', id: 'c', method: 'eth_getBalance', params: ['0x12'] },
      ]),
    )
    expect(body).toHaveLength(4)
    expect(body[0]).toEqual({ jsonrpc: '2.0', id: 'a', result: '0x14' })
    expect(body[1].error.code).toBe(-32601)
    expect(body[2]).toMatchObject({ id: null, error: { code: -32600 } })
    expect(body[3]).toMatchObject({ id: 'c', error: { code: -32602 } })
  })

  test('a request without id is a notification: it gets no answer', async () => {
    expect(await post(JSON.stringify({ jsonrpc: '2.0', method: 'eth_blockNumber', params: [] }))).toEqual({ status: 204, body: null })
    const { body } = await post(
      JSON.stringify([
        { jsonrpc: '2.0', method: 'eth_blockNumber', params: [] },
        { jsonrpc: '2.0', id: 2, method: 'eth_blockNumber', params: [] },
      ]),
    )
    expect(body).toEqual([{ jsonrpc: '2.0', id: 2, result: '0x14' }])
  })

  test('ids are echoed exactly as written, whatever their size, in single requests and batches', async () => {
    async function raw(body: string) {
      const response = await fetch(gateway.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
      return response.text()
    }
    expect(await raw('{"jsonrpc":"2.0","id":9007199254740993,"method":"eth_blockNumber","params":[]}')).toBe(
      '{"jsonrpc":"2.0","id":9007199254740993,"result":"0x14"}',
    )
    expect(await raw('{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"nope","params":[]}')).toMatch(
      /^\{"jsonrpc":"2.0","id":123456789012345678901234567890,"error":/,
    )
    expect(await raw('[{"jsonrpc":"2.0","id":18446744073709551617,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":3,"method":"eth_blockNumber"}]')).toBe(
      '[{"jsonrpc":"2.0","id":18446744073709551617,"result":"0x14"},{"jsonrpc":"2.0","id":3,"result":"0x14"}]',
    )
    // Past a double's range (Infinity once parsed): still a number, echoed as it came.
    const huge = `1${'0'.repeat(400)}`
    expect(await raw(`{"jsonrpc":"2.0","id":${huge},"method":"eth_blockNumber"}`)).toBe(`{"jsonrpc":"2.0","id":${huge},"result":"0x14"}`)
    expect(await raw('{"jsonrpc":"2.0","id":-1e999,"method":"eth_blockNumber"}')).toBe('{"jsonrpc":"2.0","id":-1e999,"result":"0x14"}')
  })

  test('GET on the JSON-RPC path is 405 and an unknown path is 404', async () => {
    expect((await fetch(gateway.url)).status).toBe(405)
    expect((await fetch(`${gateway.url}/nope`)).status).toBe(404)
  })
})

describe('JSON-RPC params errors', () => {
  const invalid: [string, unknown[], RegExp][] = [
    ['eth_getBalance', ['0x1234', 'latest'], /invalid argument 0/],
    ['eth_getBalance', [ADDRESS, 'newest'], /invalid argument 1/],
    ['eth_getBalance', [ADDRESS, '0x'], /invalid argument 1/],
    ['eth_getBalance', [ADDRESS, '0x1ffffffffffffffffffff'], /invalid argument 1/],
    ['eth_getBalance', [ADDRESS, 'latest', 'extra'], /^too many arguments, want at most 2$/],
    ['eth_getTransactionCount', [`${ADDRESS}00`, 'latest'], /invalid argument 0/],
    ['eth_getTransactionCount', [ADDRESS, { blockHash: '0x1234' }], /invalid argument 1/],
    ['eth_getBlockReceipts', ['0xnothex'], /invalid argument 0/],
    ['eth_getBlockReceipts', [], /^missing value for required argument 0$/],
    ['eth_getLogs', [], /^missing value for required argument 0$/],
    ['eth_getBlockByNumber', ['0x1'], /^missing value for required argument 1$/],
    ['eth_getBlockByHash', [HASH], /^missing value for required argument 1$/],
    ['eth_getBlockByNumber', [null, false], /^invalid argument 0: expected a 0x-prefixed hex block number/],
    ['eth_getBlockByNumber', [HASH, false], /^invalid argument 0: expected a 0x-prefixed hex block number/],
    ['eth_getBlockByNumber', ['0x8000000000000000', false], /^invalid argument 0: block number larger than int64$/],
    ['eth_getBalance', [ADDRESS, '0x8000000000000000'], /^invalid argument 1: blocknumber too high$/],
    ['eth_getBalance', [ADDRESS, '0xffffffffffffffff'], /^invalid argument 1: blocknumber too high$/],
    ['eth_getBalance', [ADDRESS, { blockNumber: '0x8000000000000000' }], /^invalid argument 1: blockNumber: block number larger than int64$/],
    ['eth_getBlockReceipts', ['0x8000000000000000'], /^invalid argument 0: blocknumber too high$/],
    ['eth_getLogs', [{ fromBlock: '0x8000000000000000' }], /^invalid argument 0 \(fromBlock\): block number larger than int64$/],
    ['eth_getBalance', [ADDRESS, { blockHash: HASH, blockNumber: '0x1' }], /cannot specify both BlockHash and BlockNumber/],
    ['eth_getBalance', [ADDRESS, { blockHash: HASH, requireCanonical: 'yes' }], /requireCanonical must be a boolean/],
    ['eth_getBalance', [ADDRESS, `0x${'zz'.repeat(32)}`], /^invalid argument 1: invalid hex string/],
    ['eth_getBalance', ['0x123', 'latest'], /^invalid argument 0: hex string has length 3, want 40 for common.Address \(a 0x-prefixed 20-byte hex address\)$/],
    ['eth_getBalance', [ADDRESS.slice(2), 'latest'], /^invalid argument 0: hex string without 0x prefix/],
    ['eth_getBalance', [42, 'latest'], /^invalid argument 0: expected a 0x-prefixed 20-byte hex address, got a number$/],
    [
      'eth_getLogs',
      [{ address: [ADDRESS, '0x12'] }],
      /^invalid argument 0 \(address.1\): hex string has length 2, want 40 for common.Address \(a 0x-prefixed 20-byte hex address\)$/,
    ],
    [
      'eth_getTransactionReceipt',
      [`0x${'ab'.repeat(31)}`],
      /^invalid argument 0: hex string has length 62, want 64 for common.Hash \(a 0x-prefixed 32-byte hex hash\)$/,
    ],
    ['eth_getLogs', ['latest'], /invalid argument 0/],
    ['eth_getLogs', [{ address: '0x12' }], /invalid argument 0/],
    ['eth_getLogs', [{ topics: ['0x12'] }], /invalid argument 0/],
    ['eth_getLogs', [{ topics: [null, null, null, null, HASH] }], /exceed max topics/],
    ['eth_getLogs', [{ blockHash: HASH, fromBlock: '0x1' }], /cannot specify both BlockHash and FromBlock\/ToBlock/],
    ['eth_getLogs', [{ fromBlock: 12 }], /invalid argument 0/],
    // A field the filter does not have is refused as reth refuses it (ignored, a misspelt blockHash reads the latest block).
    [
      'eth_getLogs',
      [{ blockhash: HASH }],
      /^invalid argument 0: unknown field `blockhash`, expected one of `fromBlock`, `toBlock`, `address`, `topics`, `blockHash`$/,
    ],
    ['eth_newFilter', [{ fromBlock: '0x1', limit: 10 }], /^invalid argument 0: unknown field `limit`/],
    ['eth_getTransactionReceipt', [`0x${'ab'.repeat(31)}`], /invalid argument 0/],
  ]
  test.each(invalid)('%s %j gets -32602 naming the argument', async (method, params, message) => {
    const { error } = await rpc(gateway.dedicatedUrl, method, params)
    expect(error?.code).toBe(-32602)
    expect(error?.message).toMatch(message)
  })

  test('params given as an object get -32602', async () => {
    const { body } = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: { address: ADDRESS } }))
    expect(body.error.code).toBe(-32602)
  })
})

describe('block arguments in every form the node takes', () => {
  test('a bare 32-byte block hash, an EIP-1898 object, 0X and null name the same block as its number', async () => {
    const block = (await rpc(gateway.url, 'eth_getBlockByNumber', ['0x5', false])).result as { hash: string }
    const forms = [
      block.hash,
      block.hash.toUpperCase().replace('0X', '0x'),
      `0X${block.hash.slice(2)}`,
      { blockHash: block.hash },
      { blockHash: block.hash, requireCanonical: true },
      { blockNumber: '0x5' },
      '0X5',
      '0x0005',
    ]
    for (const method of ['eth_getBalance', 'eth_getTransactionCount']) {
      const expected = (await rpc(gateway.url, method, [ADDRESS, '0x5'])).result
      for (const form of forms) expect(await rpc(gateway.url, method, [ADDRESS, form]), `${method} ${JSON.stringify(form)}`).toMatchObject({ result: expected })
      const latest = (await rpc(gateway.url, method, [ADDRESS, 'latest'])).result
      expect(await rpc(gateway.url, method, [ADDRESS, null])).toMatchObject({ result: latest })
    }
    const receipts = (await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['0x5'])).result
    for (const form of forms) expect(await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', [form]), JSON.stringify(form)).toMatchObject({ result: receipts })
    expect(await rpc(gateway.url, 'eth_getBlockByNumber', ['0X5', false])).toMatchObject({ result: { hash: block.hash } })
    expect((await rpc(gateway.url, 'eth_getLogs', [{ fromBlock: '0X12', toBlock: null, address: null, topics: null, blockHash: null }])).result).toEqual([])
  })

  test('a hash of no canonical block is an error for state, with or without requireCanonical', async () => {
    for (const form of [HASH, { blockHash: HASH }, { blockHash: HASH, requireCanonical: true }])
      expect((await rpc(gateway.url, 'eth_getBalance', [ADDRESS, form])).error?.code).toBe(-32001)
  })
})

describe('filters of any size', () => {
  const addresses = (count: number) => Array.from({ length: count }, (_, index) => `0x${index.toString(16).padStart(40, '0')}`)
  const topics = (count: number) => Array.from({ length: count }, (_, index) => `0x${index.toString(16).padStart(64, '0')}`)

  test('1,000 addresses and 1,000 alternatives at each topic position are answered', async () => {
    const filter = { fromBlock: '0x10', toBlock: '0x14', address: addresses(1_000), topics: [topics(1_000), topics(1_000), topics(1_000), topics(1_000)] }
    expect(await rpc(gateway.dedicatedUrl, 'eth_getLogs', [filter])).toMatchObject({ result: [] })
  })

  test('more addresses or topic alternatives than the cap are -32602 naming the limit, up to 65,536 of them', async () => {
    for (const count of [1_001, 65_536]) {
      expect((await rpc(gateway.dedicatedUrl, 'eth_getLogs', [{ address: addresses(count) }])).error).toEqual({
        code: -32602,
        message: 'invalid argument 0 (address): too many addresses: at most 1000 per filter',
      })
      expect((await rpc(gateway.dedicatedUrl, 'eth_getLogs', [{ topics: [null, topics(count)] }])).error).toEqual({
        code: -32602,
        message: 'invalid argument 0 (topics.1): too many topic alternatives: at most 1000 per position',
      })
    }
  })
})

describe('eth_getLogs range and result limits', () => {
  test('fromBlock above toBlock is -32602 invalid block range params (execution-apis filter-error-reversed-block-range)', async () => {
    expect((await rpc(gateway.url, 'eth_getLogs', [{ address: null, fromBlock: '0x5', toBlock: '0x4', topics: null }])).error).toEqual({
      code: -32602,
      message: 'invalid block range params',
    })
  })

  test('a range past the head is -32602 block range extends beyond current head block', async () => {
    for (const filter of [{ fromBlock: '0x10', toBlock: '0x15' }, { fromBlock: '0x15' }, { fromBlock: '0x100', toBlock: '0x100' }])
      expect((await rpc(gateway.url, 'eth_getLogs', [filter])).error).toEqual({
        code: -32602,
        message: 'block range extends beyond current head block',
      })
  })

  test('a range over the cap is -32602 and names a range that fits, in words @ponder/utils parses and as error.data, which then succeeds', async () => {
    const params = { fromBlock: '0x2', toBlock: '0x10' }
    const { error } = (await rpc(gateway.url, 'eth_getLogs', [params])) as { error?: { code: number; message: string; data?: unknown } }
    expect(error?.code).toBe(-32602)
    expect(error?.data).toEqual({ from: '0x2', to: '0x6', limit: 5 })
    const match = error?.message.match(/Try with this block range \[(0x[0-9a-f]+), (0x[0-9a-f]+)\]/)
    expect(match?.slice(1)).toEqual(['0x2', '0x6'])
    // The indexer's own retry helper reads the same range from the error.
    const retry = getLogsRetryHelper({ params: [params as never], error: error as never })
    expect(retry).toMatchObject({ shouldRetry: true, isSuggestedRange: true })
    expect(retry.ranges?.[0]).toEqual({ fromBlock: '0x2', toBlock: '0x6' })
    expect((await rpc(gateway.url, 'eth_getLogs', [{ fromBlock: match![1], toBlock: match![2] }])).result).toEqual([])
  })

  test('an unknown blockHash is -32000 unknown block', async () => {
    expect((await rpc(gateway.url, 'eth_getLogs', [{ blockHash: HASH }])).error).toEqual({ code: -32000, message: 'unknown block' })
  })

  test('state reads past the head or at an unknown hash are errors; receipts are null', async () => {
    // As reth (Base's node) answers: -32001 naming the block.
    expect((await rpc(gateway.url, 'eth_getBalance', [ADDRESS, '0x100'])).error).toEqual({ code: -32001, message: 'block not found: 0x100' })
    expect((await rpc(gateway.url, 'eth_getTransactionCount', [ADDRESS, { blockHash: HASH }])).error).toEqual({
      code: -32001,
      message: `block not found: hash ${HASH.toLowerCase()}`,
    })
    expect(await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['0x100'])).toMatchObject({ result: null })
    expect(await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', [{ blockHash: HASH }])).toMatchObject({ result: null })
  })

  test('the server keeps serving after every bad request above', async () => {
    expect((await rpc(gateway.url, 'eth_blockNumber')).result).toBe('0x14')
  })
})
