import { describe, expect, test } from 'vitest'
import { deflateOpen } from '../codecs/deflated.js'
import { createAnswerCache } from '../resolvers/cache.js'
import { RawJson } from '../resolvers/raw-json.js'
import { createCallMemo, type Pins } from './memo.js'
import { serializeJsonRpc } from './serialize.js'

// The call memo on its own (test/call-memo.test.ts holds it to anvil's answers through a gateway): what it
// keeps, and that whatever it answers with is written to JSON once.

const PINNED_TO_FIVE: Pins = () => [5]

function memo(maxBytes = 16 * 1024 * 1024) {
  return createCallMemo({
    cache: createAnswerCache({ maxBytes: 64 * 1024 * 1024 }),
    indexed: () => ({ first: 0, head: 10, current: true }),
    maxBytes,
  })
}

/** Logs of `count` entries whose `JSON.stringify` is counted: each serialisation of the result calls `toJSON` once. */
function countedLogs(count: number) {
  const serialised = { times: 0 }
  const logs = Array.from({ length: count }, (_, index) => ({ logIndex: `0x${index.toString(16)}`, data: `0x${'ab'.repeat(64)}` }))
  const first = {
    ...logs[0]!,
    toJSON: () => {
      serialised.times++
      return logs[0]
    },
  }
  return { result: [first, ...logs.slice(1)], plain: logs, serialised }
}

/** JSON of ~100 KB (by default) that deflates to a few KB, as a block's receipts do (~107 KB, ~3 KB stored). */
function receiptsLike(block: number, receipts = 2_000): Buffer {
  return Buffer.from(JSON.stringify(Array.from({ length: receipts }, (_, index) => ({ block, index, status: '0x1', logs: [] }))))
}

describe('the call memo', () => {
  test('a result too large to keep is answered from the text written to keep it: JSON.stringify runs once', () => {
    const calls = memo()
    const { result, plain, serialised } = countedLogs(3_000)
    const ticket = calls.lookup('eth_getLogs', [{}], PINNED_TO_FIVE)!.ticket
    const answered = calls.keep(ticket, result)
    const body = serializeJsonRpc({ jsonrpc: '2.0', id: 1, result: answered })
    expect(JSON.parse(body.toString())).toEqual({ jsonrpc: '2.0', id: 1, result: plain })
    expect(Buffer.byteLength(JSON.stringify(plain))).toBeGreaterThan(256 * 1024)
    expect(serialised.times).toBe(1)
    // Not kept: the next call runs again.
    expect(calls.lookup('eth_getLogs', [{}], PINNED_TO_FIVE)!.hit).toBeUndefined()
    expect(calls.figures().kept).toBe(0)
  })

  test('answers kept deflated (receipts of a block) hold no more than the memo counts, once written to a plain client', () => {
    const budget = 1024 * 1024
    const calls = memo(budget)
    const blocks = Array.from({ length: 40 }, (_, block) => block)
    // The answers given, each inflated once written to a plain client.
    const inflated = new Set<RawJson>()
    for (const block of blocks) {
      const ticket = calls.lookup('eth_getBlockReceipts', [block], PINNED_TO_FIVE)!.ticket
      const text = receiptsLike(block)
      const answered = calls.keep(ticket, RawJson.fromDeflated(deflateOpen(text, 6))) as RawJson
      expect(serializeJsonRpc({ jsonrpc: '2.0', id: block, result: answered }).toString()).toBe(`{"jsonrpc":"2.0","id":${block},"result":${text}}`)
      inflated.add(answered)
    }
    const hits = blocks.map((block) => calls.lookup('eth_getBlockReceipts', [block], PINNED_TO_FIVE)!.hit).filter((hit) => hit !== undefined) as RawJson[]
    expect(hits.length).toBeGreaterThan(0)
    // What the answers the memo holds take. Before: the 40 answers it gave, each holding its ~100 KB of text
    // while counted as its stream, 4.2 MB for a budget of 1 MB.
    const held = hits.reduce((sum, hit) => sum + (inflated.has(hit) ? hit.deflated!.length : 0) + hit.deflated!.stream.length, 0)
    expect(held).toBeLessThanOrEqual(budget)
    expect(calls.figures().bytes).toBeLessThanOrEqual(budget)
  })

  test('a stream asked for once is kept as a stream; asked again, it is kept with its text and counted so', () => {
    const calls = memo()
    const text = receiptsLike(7)
    const ticket = calls.lookup('eth_getBlockReceipts', ['0x7'], PINNED_TO_FIVE)!.ticket
    const answered = calls.keep(ticket, RawJson.fromDeflated(deflateOpen(text, 6))) as RawJson
    serializeJsonRpc({ jsonrpc: '2.0', id: 1, result: answered })
    expect(answered.inflated).toBe(true)
    // A scan asks once: what the memo keeps is not the answer inflated for the client.
    expect(calls.figures().bytes).toBeLessThan(text.length / 4)
    const again = calls.lookup('eth_getBlockReceipts', ['0x7'], PINNED_TO_FIVE)!.hit as RawJson
    expect(again).not.toBe(answered)
    expect(again.inflated).toBe(false)
    expect(calls.figures().bytes).toBeGreaterThan(text.length)
    expect(serializeJsonRpc({ jsonrpc: '2.0', id: 2, result: again }).toString()).toBe(`{"jsonrpc":"2.0","id":2,"result":${text}}`)
    // Asked a third time: the same text, inflated once.
    const third = calls.lookup('eth_getBlockReceipts', ['0x7'], PINNED_TO_FIVE)!.hit as RawJson
    expect(third).toBe(again)
    expect(third.inflated).toBe(true)
  })

  test('a stream whose text is too large to keep is given as a copy each time, and stays a stream in the memo', () => {
    const calls = memo()
    const text = receiptsLike(9, 6_000)
    expect(text.length).toBeGreaterThan(256 * 1024)
    const ticket = calls.lookup('eth_getBlockReceipts', ['0x9'], PINNED_TO_FIVE)!.ticket
    calls.keep(ticket, RawJson.fromDeflated(deflateOpen(text, 6)))
    const first = calls.lookup('eth_getBlockReceipts', ['0x9'], PINNED_TO_FIVE)!.hit as RawJson
    expect(serializeJsonRpc({ jsonrpc: '2.0', id: 1, result: first }).toString()).toBe(`{"jsonrpc":"2.0","id":1,"result":${text}}`)
    const second = calls.lookup('eth_getBlockReceipts', ['0x9'], PINNED_TO_FIVE)!.hit as RawJson
    expect(second).not.toBe(first)
    expect(second.inflated).toBe(false)
    expect(calls.figures().bytes).toBeLessThan(text.length / 4)
  })

  test('a result small enough is kept as text and given again, written to JSON once in all', () => {
    const calls = memo()
    const { result, plain, serialised } = countedLogs(100)
    const ticket = calls.lookup('eth_getLogs', [{}], PINNED_TO_FIVE)!.ticket
    const first = serializeJsonRpc({ jsonrpc: '2.0', id: 1, result: calls.keep(ticket, result) })
    const hit = calls.lookup('eth_getLogs', [{}], PINNED_TO_FIVE)!.hit
    expect(hit).toBeInstanceOf(RawJson)
    const second = serializeJsonRpc({ jsonrpc: '2.0', id: 2, result: hit })
    expect(JSON.parse(first.toString()).result).toEqual(plain)
    expect(JSON.parse(second.toString())).toEqual({ jsonrpc: '2.0', id: 2, result: plain })
    expect(serialised.times).toBe(1)
    expect(calls.figures().kept).toBe(1)
  })

  test('an answer by block hash is given again while the index starts where it did, and asked anew once retention moved its first block', () => {
    let range = { first: 0, head: 10, current: true }
    const calls = createCallMemo({ cache: createAnswerCache({ maxBytes: 1024 * 1024 }), indexed: () => range, maxBytes: 1024 * 1024 })
    const byHash: Pins = () => ['indexed']
    const params = [{ blockHash: `0x${'ab'.repeat(32)}` }]
    calls.keep(calls.lookup('eth_getLogs', params, byHash)!.ticket, [{ logIndex: '0x0' }])
    range = { first: 0, head: 11, current: true }
    expect(calls.lookup('eth_getLogs', params, byHash)!.hit).toEqual([{ logIndex: '0x0' }])
    range = { first: 5, head: 11, current: true }
    expect(calls.lookup('eth_getLogs', params, byHash)!.hit).toBeUndefined()
  })
})
