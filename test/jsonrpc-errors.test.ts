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
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, maxBlockRange: 5, maxLogs: 10, publicMaxBlockRange: 5, publicMaxLogs: 10 })
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
    ['eth_getBalance', [ADDRESS, 'latest', 'extra'], /invalid/],
    ['eth_getTransactionCount', [`${ADDRESS}00`, 'latest'], /invalid argument 0/],
    ['eth_getTransactionCount', [ADDRESS, { blockHash: '0x1234' }], /invalid argument 1/],
    ['eth_getBlockReceipts', ['0xnothex'], /invalid argument 0/],
    ['eth_getBlockReceipts', [], /invalid/],
    ['eth_getLogs', [], /invalid/],
    ['eth_getLogs', ['latest'], /invalid argument 0/],
    ['eth_getLogs', [{ address: '0x12' }], /invalid argument 0/],
    ['eth_getLogs', [{ topics: ['0x12'] }], /invalid argument 0/],
    ['eth_getLogs', [{ topics: [null, null, null, null, HASH] }], /exceed max topics/],
    ['eth_getLogs', [{ blockHash: HASH, fromBlock: '0x1' }], /cannot specify both BlockHash and FromBlock\/ToBlock/],
    ['eth_getLogs', [{ fromBlock: 12 }], /invalid argument 0/],
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

describe('eth_getLogs range and result limits', () => {
  test('fromBlock above toBlock is -32000 invalid block range params', async () => {
    expect((await rpc(gateway.url, 'eth_getLogs', [{ fromBlock: '0x5', toBlock: '0x4' }])).error).toEqual({
      code: -32000,
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

  test('a range over the cap is -32602 and names a range that fits, which then succeeds', async () => {
    const { error } = await rpc(gateway.url, 'eth_getLogs', [{ fromBlock: '0x2', toBlock: '0x10' }])
    expect(error?.code).toBe(-32602)
    const match = error?.message.match(/retry with the range (0x[0-9a-f]+)-(0x[0-9a-f]+)/)
    expect(match?.slice(1)).toEqual(['0x2', '0x6'])
    expect((await rpc(gateway.url, 'eth_getLogs', [{ fromBlock: match![1], toBlock: match![2] }])).result).toEqual([])
  })

  test('an unknown blockHash is -32000 unknown block', async () => {
    expect((await rpc(gateway.url, 'eth_getLogs', [{ blockHash: HASH }])).error).toEqual({ code: -32000, message: 'unknown block' })
  })

  test('state reads past the head or at an unknown hash are errors; receipts are null', async () => {
    expect((await rpc(gateway.url, 'eth_getBalance', [ADDRESS, '0x100'])).error?.code).toBe(-32000)
    expect((await rpc(gateway.url, 'eth_getTransactionCount', [ADDRESS, { blockHash: HASH }])).error?.code).toBe(-32000)
    expect(await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['0x100'])).toMatchObject({ result: null })
    expect(await rpc(gateway.dedicatedUrl, 'eth_getBlockReceipts', [{ blockHash: HASH }])).toMatchObject({ result: null })
  })

  test('the server keeps serving after every bad request above', async () => {
    expect((await rpc(gateway.url, 'eth_blockNumber')).result).toBe('0x14')
  })
})
