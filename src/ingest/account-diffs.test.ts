import { describe, expect, test } from 'vitest'
import { foldPrestateDiffs, type PrestateDiff, untracedRecipients, withdrawalCredits } from './account-diffs.js'

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

  test('withdrawals (in Gwei) are paid after the transactions: a traced recipient ends higher, an untraced one gets a change of its own', () => {
    const D = '0x00000000000000000000000000000000000000dd'
    const diffs: PrestateDiff[] = [{ pre: { [A]: { balance: '0x64', nonce: 1 } }, post: { [A]: { balance: '0x50', nonce: 2 } } }]
    // Checksummed or not, one recipient; several withdrawals to it add up; one of 0 Gwei pays nothing.
    const credits = withdrawalCredits([
      { address: A.toUpperCase().replace('0X', '0x') as `0x${string}`, amount: '0x1' },
      { address: B, amount: '0x2' },
      { address: B, amount: '0x3' },
      { address: D, amount: '0x0' },
    ])
    expect(credits).toEqual(
      new Map([
        [A, 1_000_000_000n],
        [B, 5_000_000_000n],
      ]),
    )
    expect(untracedRecipients(diffs, credits)).toEqual([B])
    const changes = foldPrestateDiffs(diffs, { credits, before: new Map([[B, { balance: 7n, nonce: 3n }]]) })
    expect(changes).toEqual([
      { address: A, before: { balance: 100n, nonce: 1n }, after: { balance: 80n + 1_000_000_000n, nonce: 2n } },
      { address: B, before: { balance: 7n, nonce: 3n }, after: { balance: 7n + 5_000_000_000n, nonce: 3n } },
    ])
    // A recipient neither traced nor read is a fault, never a guess.
    expect(() => foldPrestateDiffs([], { credits, before: new Map() })).toThrow(/withdrawal recipient/)
  })
})
