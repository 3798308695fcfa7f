import { expect, test } from 'vitest'
import { filterId } from './index.js'
import { newQuantityId } from './quantity-id.js'

test('a new id is a quantity (no leading zero digit) of at most 16 bytes, and the filter id codec reads it back as given', () => {
  const ids = Array.from({ length: 2_000 }, newQuantityId)
  for (const id of ids) {
    expect(id).toMatch(/^0x[1-9a-f][0-9a-f]{0,31}$/)
    expect(filterId.parse(id)).toBe(id)
    expect(filterId.parse(`0x00${id.slice(2).toUpperCase()}`)).toBe(id)
  }
  expect(new Set(ids).size).toBe(ids.length)
  // Not a hex string: kept as it is (and not found).
  expect(filterId.parse('filter-1')).toBe('filter-1')
  expect(filterId.parse('0x')).toBe('0x')
  expect(filterId.parse('0x000')).toBe('0x0')
})
