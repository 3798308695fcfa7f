import { describe, expect, test } from 'vitest'
import { negotiateEncoding, STORED_DEFLATE_OFFERS } from './compress.js'

describe('negotiateEncoding', () => {
  test.each([
    [undefined, null],
    ['', null],
    ['identity', null],
    ['gzip, deflate, br', 'br'],
    ['gzip', 'gzip'],
    ['br;q=0.5, gzip', 'gzip'],
    ['br;q=0, gzip;q=0', null],
    ['*', 'br'],
    ['*;q=0.1, gzip;q=0.5', 'gzip'],
    ['deflate', null],
    [['gzip', 'br;q=0.2'], 'gzip'],
  ] as const)('%j → %s', (header, expected) => {
    expect(negotiateEncoding(header as string | string[] | undefined)).toBe(expected)
  })
})

describe('negotiateEncoding for answers stored deflated', () => {
  test.each([
    ['gzip, deflate, br', 'deflate'],
    ['gzip, deflate', 'deflate'],
    ['deflate;q=0.5, br', 'br'],
    ['deflate;q=0, gzip', 'gzip'],
    ['br, gzip', 'br'],
    ['*', 'deflate'],
    ['identity', null],
  ] as const)('%j → %s', (header, expected) => {
    expect(negotiateEncoding(header, STORED_DEFLATE_OFFERS)).toBe(expected)
  })
})
