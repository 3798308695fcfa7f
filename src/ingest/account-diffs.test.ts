import { describe, expect, test } from 'vitest'
import { foldPrestateDiffs } from './account-diffs.js'

const A = '0x00000000000000000000000000000000000000aa'
const B = '0x00000000000000000000000000000000000000bb'
const C = '0x00000000000000000000000000000000000000cc'

describe('foldPrestateDiffs', () => {
  test('keeps the first "before" and the last "after" of each account across a block', () => {
    const changes = foldPrestateDiffs([
      { pre: { [A]: { balance: '0x64', nonce: 1 }, [B]: { balance: '0x0' } }, post: { [A]: { balance: '0x50', nonce: 2 }, [B]: { balance: '0x14' } } },
      { pre: { [A]: { balance: '0x50', nonce: 2 } }, post: { [A]: { balance: '0x3c', nonce: 3 } } },
    ])
    expect(changes).toEqual([
      { address: A, before: { balance: 100n, nonce: 1n }, after: { balance: 60n, nonce: 3n } },
      { address: B, before: { balance: 0n, nonce: 0n }, after: { balance: 20n, nonce: 0n } },
    ])
  })

  test('a field missing from "post" is unchanged; an account missing from "pre" started empty', () => {
    const changes = foldPrestateDiffs([
      { pre: { [A]: { balance: '0x10', nonce: '0x5' } }, post: { [A]: { balance: '0x8' }, [C]: { balance: '0x8', nonce: 1 } } },
    ])
    expect(changes).toEqual([
      { address: A, before: { balance: 16n, nonce: 5n }, after: { balance: 8n, nonce: 5n } },
      { address: C, before: { balance: 0n, nonce: 0n }, after: { balance: 8n, nonce: 1n } },
    ])
  })

  test('an account that ends the block where it began is not a change', () => {
    const changes = foldPrestateDiffs([
      { pre: { [A]: { balance: '0x10' } }, post: { [A]: { balance: '0x20' } } },
      { pre: { [A]: { balance: '0x20' } }, post: { [A]: { balance: '0x10' } } },
      { pre: { [B]: { balance: '0x1' } }, post: {} },
    ])
    expect(changes).toEqual([])
  })
})
