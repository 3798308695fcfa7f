import type { Hash } from 'viem'
import { describe, expect, test } from 'vitest'
import { withRetries } from './hydrate.js'
import type { UpstreamReceipt } from './state.js'

const hash = (n: number) => `0x${n.toString(16).padStart(64, '0')}` as Hash
const receipt = (h: Hash) => ({ transactionHash: h }) as unknown as UpstreamReceipt
const noWait = async () => {}

describe('hydration retries', () => {
  test('receipts the upstream lacks are asked for again, only those, until it has them', async () => {
    const asked: Hash[][] = []
    let round = 0
    const hydrate = withRetries(async (hashes) => {
      asked.push(hashes)
      round++
      return hashes.map((h) => (h === hash(2) && round < 3 ? null : receipt(h)))
    }, noWait)
    expect(await hydrate([hash(1), hash(2)])).toEqual([receipt(hash(1)), receipt(hash(2))])
    expect(asked).toEqual([[hash(1), hash(2)], [hash(2)], [hash(2)]])
  })

  test('a retry that fails keeps what the first answer gave', async () => {
    let round = 0
    const hydrate = withRetries(async (hashes) => {
      if (round++ > 0) throw new Error('upstream timed out')
      return hashes.map((h) => (h === hash(2) ? null : receipt(h)))
    }, noWait)
    expect(await hydrate([hash(1), hash(2)])).toEqual([receipt(hash(1)), null])
  })

  test('a failed first round trip fails the hydration', async () => {
    const hydrate = withRetries(async () => {
      throw new Error('upstream down')
    }, noWait)
    await expect(hydrate([hash(1)])).rejects.toThrow('upstream down')
  })

  test('no more retries once the flashblock no longer matters (its block sealed or dropped)', async () => {
    let rounds = 0
    let live = true
    const hydrate = withRetries(async (hashes) => {
      rounds++
      live = false
      return hashes.map(() => null)
    }, noWait)
    expect(await hydrate([hash(1)], { live: () => live })).toEqual([null])
    expect(rounds).toBe(1)
  })
})
