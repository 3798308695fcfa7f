import { gunzipSync, inflateSync } from 'node:zlib'
import { describe, expect, test } from 'vitest'
import { deflateOpen } from '../codecs/deflated.js'
import { RawJson } from '../resolvers/index.js'
import type { JsonRpcResponse } from './index.js'
import { NumericId } from './request-ids.js'
import { serializeJsonRpc, storedJsonRpc } from './serialize.js'

const receipts = [
  { status: '0x1', logs: [{ address: '0xab', topics: [], data: '0x' }] },
  { status: '0x0', logs: [] },
]

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

  test('writes a NumericId as its text, beside results, errors and RawJson results', () => {
    const batch: JsonRpcResponse[] = [
      { jsonrpc: '2.0', id: new NumericId('9007199254740993'), result: '0x1' },
      { jsonrpc: '2.0', id: new NumericId('1e400'), error: { code: -32601, message: 'x' } },
      { jsonrpc: '2.0', id: new NumericId('123456789012345678901234567890'), result: RawJson.fromText('[]') },
    ]
    expect(serializeJsonRpc(batch).toString()).toBe(
      '[{"jsonrpc":"2.0","id":9007199254740993,"result":"0x1"},{"jsonrpc":"2.0","id":1e400,"error":{"code":-32601,"message":"x"}},{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":[]}]',
    )
    expect(serializeJsonRpc(batch[0]!).toString()).toBe('{"jsonrpc":"2.0","id":9007199254740993,"result":"0x1"}')
  })

  test('an answer with results stored deflated splices into one zlib stream that inflates to the serialised JSON', () => {
    const receipts = JSON.stringify(Array.from({ length: 40 }, (_, index) => ({ transactionIndex: `0x${index.toString(16)}`, logs: [] })))
    const stored = () => RawJson.fromDeflated(deflateOpen(receipts, 6))
    const single: JsonRpcResponse = { jsonrpc: '2.0', id: new NumericId('123456789012345678901234567890'), result: stored() }
    const batch: JsonRpcResponse[] = [
      { jsonrpc: '2.0', id: 1, result: '0x1' },
      { jsonrpc: '2.0', id: 2, result: stored() },
      { jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'bad' } },
      { jsonrpc: '2.0', id: 4, result: RawJson.fromText('[1]') },
    ]
    for (const body of [single, batch]) {
      const spliced = storedJsonRpc(body, 'deflate')!
      const text = inflateSync(spliced.stream).toString()
      expect(text).toBe(serializeJsonRpc(body).toString())
      expect(spliced.plainLength).toBe(Buffer.byteLength(text))
      // The same blocks in a gzip member, its CRC-32 combined from the stored one and checked by gunzip.
      const member = storedJsonRpc(body, 'gzip')!
      expect(gunzipSync(member.stream).toString()).toBe(text)
      expect(member.plainLength).toBe(spliced.plainLength)
    }
  })

  test('no gzip member for a result stored without its CRC-32 (before migration 0013)', () => {
    const { crc32: _, ...withoutCrc } = deflateOpen('[1,2,3]', 6)
    const body: JsonRpcResponse = { jsonrpc: '2.0', id: 1, result: RawJson.fromDeflated(withoutCrc) }
    expect(storedJsonRpc(body, 'gzip')).toBeNull()
    expect(inflateSync(storedJsonRpc(body, 'deflate')!.stream).toString()).toBe('{"jsonrpc":"2.0","id":1,"result":[1,2,3]}')
  })

  test('no splice without a deflated result, or when the rest of the answer is large', () => {
    expect(storedJsonRpc({ jsonrpc: '2.0', id: 1, result: RawJson.fromText('[]') }, 'deflate')).toBeNull()
    const large: JsonRpcResponse[] = [
      { jsonrpc: '2.0', id: 1, result: RawJson.fromDeflated(deflateOpen('[]', 6)) },
      { jsonrpc: '2.0', id: 2, result: 'x'.repeat(10_000) },
    ]
    expect(storedJsonRpc(large, 'deflate')).toBeNull()
    expect(storedJsonRpc(large, 'gzip')).toBeNull()
  })
})
