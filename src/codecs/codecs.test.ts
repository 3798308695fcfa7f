import { describe, expect, test } from 'vitest'
import { z } from 'zod'
import { address, blockArgument, describeParamsError, logFilter, optionalBlockArgument, quantity } from './index.js'

describe('codecs', () => {
  test('quantity accepts 0x-prefixed hex and rejects empty, unprefixed and non-hex values', () => {
    expect(quantity.parse('0x0')).toBe(0n)
    expect(quantity.parse('0x1f')).toBe(31n)
    for (const bad of ['0x', '1f', '0xzz', 12, `0x${'f'.repeat(65)}`]) expect(quantity.safeParse(bad).success).toBe(false)
  })

  test('address is normalised to lower case and must be 20 bytes', () => {
    expect(address.parse('0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266')).toBe('0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266')
    expect(address.safeParse('0xf39fd6e51aad88f6f4ce6ab8827279cfffb9226').success).toBe(false)
  })

  test('block argument takes numbers, tags and EIP-1898 objects', () => {
    expect(blockArgument.parse('0x10')).toEqual({ kind: 'number', number: 16n })
    expect(blockArgument.parse('safe')).toEqual({ kind: 'tag', tag: 'safe' })
    expect(blockArgument.parse({ blockNumber: '0x2' })).toEqual({ kind: 'number', number: 2n })
    const hash = `0x${'ab'.repeat(32)}`
    expect(blockArgument.parse({ blockHash: hash, requireCanonical: true })).toEqual({ kind: 'hash', hash, requireCanonical: true })
    for (const bad of ['newest', '0x1ffffffffffffffff', '0x8000000000000000', { blockHash: '0x12' }, { blockNumber: '0x1', extra: 1 }, null, {}])
      expect(blockArgument.safeParse(bad).success).toBe(false)
  })

  test('block argument takes a bare block hash and 0X as geth does; an optional one takes null as latest', () => {
    const hash = `0x${'ab'.repeat(32)}`
    expect(blockArgument.parse(hash)).toEqual({ kind: 'hash', hash, requireCanonical: false })
    expect(blockArgument.parse(`0X${'AB'.repeat(32)}`)).toEqual({ kind: 'hash', hash, requireCanonical: false })
    expect(blockArgument.parse('0X1f')).toEqual({ kind: 'number', number: 31n })
    expect(blockArgument.parse('0x7fffffffffffffff')).toEqual({ kind: 'number', number: 2n ** 63n - 1n })
    expect(optionalBlockArgument.parse(null)).toEqual({ kind: 'tag', tag: 'latest' })
    expect(optionalBlockArgument.parse(undefined)).toEqual({ kind: 'tag', tag: 'latest' })
  })

  test('a failed union names the alternatives it expected', () => {
    const kinds = z.union([z.tuple([z.literal('newHeads')]), z.tuple([z.literal('logs')]).rest(z.unknown())])
    expect(describeParamsError(kinds.safeParse(['blocks']).error!)).toBe('invalid argument 0: expected one of "newHeads", "logs"')
    const filter = z.tuple([logFilter])
    expect(describeParamsError(filter.safeParse([{ address: '0x12' }]).error!)).toBe(
      'invalid argument 0 (address): hex string has length 2, want 40 for common.Address (a 0x-prefixed 20-byte hex address)',
    )
  })

  test('log filter defaults omitted bounds to latest and normalises topics', () => {
    const topic = `0x${'01'.repeat(32)}`
    expect(logFilter.parse({ topics: [null, [topic], [], [null, topic]] })).toEqual({
      addresses: null,
      topics: [null, [topic]],
      fromBlock: { kind: 'tag', tag: 'latest' },
      toBlock: { kind: 'tag', tag: 'latest' },
    })
    expect(logFilter.parse({ address: [] }).addresses).toBeNull()
  })

  test('log filter rejects blockHash together with a range, and more than four topics', () => {
    const hash = `0x${'ab'.repeat(32)}`
    expect(logFilter.safeParse({ blockHash: hash, fromBlock: '0x1' }).success).toBe(false)
    expect(logFilter.safeParse({ topics: [null, null, null, null, null] }).success).toBe(false)
  })
})
