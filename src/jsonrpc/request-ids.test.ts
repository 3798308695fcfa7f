import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { exactIds, NumericId, scanRequestIds } from './request-ids.js'

/** What the scan should find: the id each request holds after `JSON.parse`, printed back. */
function parsedIds(text: string): string | undefined | (string | undefined)[] {
  const payload = JSON.parse(text) as unknown
  const idOf = (value: unknown) =>
    typeof value === 'object' && value !== null && !Array.isArray(value) && 'id' in value ? JSON.stringify((value as { id: unknown }).id) : undefined
  if (Array.isArray(payload)) return payload.map(idOf)
  return idOf(payload)
}

const normalise = (ids: string | undefined | (string | undefined)[]) =>
  Array.isArray(ids)
    ? ids.map((id) => (id === undefined ? undefined : JSON.stringify(JSON.parse(id))))
    : ids === undefined
      ? undefined
      : JSON.stringify(JSON.parse(ids))

describe('scanRequestIds', () => {
  test('finds the raw id of a request and of each batch entry', () => {
    expect(scanRequestIds('{"jsonrpc":"2.0","id":9007199254740993,"method":"x"}')).toBe('9007199254740993')
    expect(scanRequestIds(' [ {"id" : 123456789012345678901234567890 } , 5, {"params":[{"id":1}]}, {"id":"a\\"b"} ] ')).toEqual([
      '123456789012345678901234567890',
      undefined,
      undefined,
      '"a\\"b"',
    ])
    expect(scanRequestIds('[]')).toEqual([])
    expect(scanRequestIds('{}')).toBeUndefined()
  })

  test('takes the last of duplicate ids and reads escaped keys, as JSON.parse does', () => {
    expect(scanRequestIds('{"id":1,"id":2.50}')).toBe('2.50')
    expect(scanRequestIds('{"\\u0069d":1e400}')).toBe('1e400')
    expect(scanRequestIds('{"method":"a\\\\","id":-0.0}')).toBe('-0.0')
  })

  test('agrees with JSON.parse on any JSON requests and batches', () => {
    const id = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.string(), fc.constant(null), fc.bigInt().map(String))
    const request = fc.record({ jsonrpc: fc.constant('2.0'), id, method: fc.string(), params: fc.jsonValue() }, { requiredKeys: ['method'] })
    const entry = fc.oneof(request, fc.jsonValue())
    fc.assert(
      fc.property(fc.oneof(request, fc.array(entry)), fc.boolean(), (payload, spaced) => {
        const text = JSON.stringify(payload, null, spaced ? 2 : undefined)
        expect(normalise(scanRequestIds(text))).toEqual(parsedIds(text))
      }),
      { numRuns: 2_000 },
    )
  })
})

test('finds big integer ids as written, in requests and batches', () => {
  fc.assert(
    fc.property(fc.array(fc.bigInt(), { minLength: 1, maxLength: 5 }), fc.jsonValue(), (ids, params) => {
      const entries = ids.map((id) => `{"jsonrpc":"2.0","params":${JSON.stringify(params)},"id":${id},"method":"m"}`)
      expect(scanRequestIds(`[${entries.join(',')}]`)).toEqual(ids.map(String))
      expect(scanRequestIds(entries[0]!)).toBe(String(ids[0]))
    }),
  )
})

describe('exactIds', () => {
  test('keeps the text of ids JSON.parse cannot reproduce, and nothing else', () => {
    expect(exactIds('{"id":7}', { id: 7 })).toBeUndefined()
    const text = '[{"id":9007199254740993},{"id":1},{"id":123456789012345678901234567890}]'
    expect(exactIds(text, JSON.parse(text))).toEqual([new NumericId('9007199254740993'), undefined, new NumericId('123456789012345678901234567890')])
  })
})
