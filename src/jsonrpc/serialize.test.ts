import { describe, expect, test } from 'vitest'
import { RawJson } from '../resolvers/index.js'
import type { JsonRpcResponse } from './index.js'
import { serializeJsonRpc } from './serialize.js'

const receipts = [{ status: '0x1', logs: [{ address: '0xab', topics: [], data: '0x' }] }, { status: '0x0', logs: [] }]

describe('serializeJsonRpc', () => {
  test('writes a RawJson result as it is, in the envelope JSON.stringify would write', () => {
    const answer: JsonRpcResponse = { jsonrpc: '2.0', id: 'a"b', result: RawJson.fromValue(receipts) }
    const bytes = serializeJsonRpc(answer)
    expect(Buffer.isBuffer(bytes)).toBe(true)
    expect(bytes.toString()).toBe(JSON.stringify({ jsonrpc: '2.0', id: 'a"b', result: receipts }))
  })

  test('mixes RawJson results, plain results and errors in a batch', () => {
    const batch: JsonRpcResponse[] = [
      { jsonrpc: '2.0', id: 1, result: RawJson.fromText('[]') },
      { jsonrpc: '2.0', id: 2, result: '0x10' },
      { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'invalid request' } },
      { jsonrpc: '2.0', id: 3, result: RawJson.fromValue(receipts) },
    ]
    expect(JSON.parse(serializeJsonRpc(batch).toString())).toEqual(JSON.parse(JSON.stringify(batch)))
    expect(serializeJsonRpc(batch).toString()).toBe(
      `[{"jsonrpc":"2.0","id":1,"result":[]},{"jsonrpc":"2.0","id":2,"result":"0x10"},{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}},{"jsonrpc":"2.0","id":3,"result":${JSON.stringify(receipts)}}]`,
    )
  })

  test('answers without RawJson are plain JSON.stringify', () => {
    const answer: JsonRpcResponse = { jsonrpc: '2.0', id: 7, result: { number: '0x1' } }
    expect(serializeJsonRpc(answer)).toBe(JSON.stringify(answer))
  })

  test('anything else that serialises a RawJson (a WebSocket send) gets the same JSON', () => {
    expect(JSON.stringify({ result: RawJson.fromValue(receipts) })).toBe(JSON.stringify({ result: receipts }))
  })
})
