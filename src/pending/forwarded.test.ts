import { beforeAll, describe, expect, test } from 'vitest'
import { useRedisPair } from '../../test/fixtures/redis.js'
import type { SharedRedis } from '../redis/index.js'
import { createForwardedTransactions, createNonceRegistry } from './forwarded.js'
import type { PendingTransaction } from './transactions.js'

const SENDER = `0x${'ab'.repeat(20)}` as const
const hash = (n: number) => `0x${n.toString(16).padStart(64, '0')}` as const

describe('forwarded transactions in the pending nonce', () => {
  test('forwarded nonces that continue the known one count, a gap stops the count, and passed nonces are forgotten', async () => {
    const forwarded = createForwardedTransactions()
    for (const nonce of [5, 6, 7, 9]) await forwarded.record({ from: SENDER, nonce, hash: hash(nonce) })
    expect(await forwarded.nextNonce(SENDER, 5n)).toBe(8n)
    // Checksummed or not, one sender.
    expect(await forwarded.nextNonce(SENDER.toUpperCase().replace('0X', '0x') as never, 5n)).toBe(8n)
    expect(await forwarded.nextNonce(`0x${'cd'.repeat(20)}`, 3n)).toBe(3n)
    // The chain caught up to 7: 5 and 6 go; 7 still counts, 9 still waits behind the gap at 8.
    expect(await forwarded.nextNonce(SENDER, 7n)).toBe(8n)
    expect(forwarded.size).toBe(2)
    await forwarded.record({ from: SENDER, nonce: 8, hash: hash(8) })
    expect(await forwarded.nextNonce(SENDER, 7n)).toBe(10n)
  })

  test('a self-sponsored EIP-7702 delegation takes its authorization\u2019s nonce too; a replacement without one gives it back', async () => {
    const forwarded = createForwardedTransactions()
    const delegation = { from: SENDER, nonce: 4, fields: { chainId: '0x2105' }, authorities: [{ address: SENDER, chainId: 8453, nonce: 5 }] } as never
    await forwarded.record({ from: SENDER, nonce: 4, hash: hash(4), transaction: delegation })
    expect(await forwarded.nextNonce(SENDER, 4n)).toBe(6n)
    // Known to be 5 (a count that saw the send but not its authorization): 5 is still taken.
    expect(await forwarded.nextNonce(SENDER, 5n)).toBe(6n)
    await forwarded.record({ from: SENDER, nonce: 4, hash: hash(40), transaction: { from: SENDER, nonce: 4, fields: {} } as never })
    expect(await forwarded.nextNonce(SENDER, 4n)).toBe(5n)
  })

  test('a replacement (same sender and nonce) takes the place of the first, which is no longer found by hash', async () => {
    const forwarded = createForwardedTransactions()
    const first = { hash: hash(1), index: -1 } as never
    const second = { hash: hash(2), index: -1 } as never
    await forwarded.record({ from: SENDER, nonce: 0, hash: hash(1), transaction: first })
    expect(await forwarded.transaction(hash(1))).toBe(first)
    await forwarded.record({ from: SENDER, nonce: 0, hash: hash(2), transaction: second })
    expect(await forwarded.transaction(hash(1))).toBeNull()
    expect(await forwarded.transaction(hash(2))).toBe(second)
    expect(forwarded.size).toBe(1)
  })

  test('a transaction no flashblock shows within the drop time stops counting', async () => {
    let clock = 0
    const forwarded = createForwardedTransactions({ now: () => clock, dropAfterMs: 1_000 })
    await forwarded.record({ from: SENDER, nonce: 0, hash: hash(0) })
    expect(await forwarded.nextNonce(SENDER, 0n)).toBe(1n)
    clock = 1_001
    expect(await forwarded.nextNonce(SENDER, 0n)).toBe(0n)
    expect(forwarded.size).toBe(0)
  })

  test('memory follows the send rate: entries past the drop time go on the next send, whether or not their senders ask again', async () => {
    let clock = 0
    const forwarded = createForwardedTransactions({ now: () => clock, dropAfterMs: 1_000 })
    const senders = Array.from({ length: 50 }, (_, index) => `0x${(index + 1).toString(16).padStart(40, '0')}` as const)
    for (const [index, sender] of senders.entries()) await forwarded.record({ from: sender, nonce: 0, hash: hash(index) })
    expect(forwarded.size).toBe(50)
    clock = 600
    await forwarded.record({ from: SENDER, nonce: 0, hash: hash(100) })
    expect(forwarded.size).toBe(51)
    clock = 1_500
    await forwarded.record({ from: SENDER, nonce: 1, hash: hash(101) })
    // The fifty from time 0 are gone; the two recent ones stay and still count.
    expect(forwarded.size).toBe(2)
    expect(await forwarded.nextNonce(SENDER, 0n)).toBe(2n)
  })
})

/** A pool transaction as a send records it, with the sender's public key only this process uses. */
const pooled = (nonce: number, tag = nonce): PendingTransaction => ({
  hash: hash(tag),
  index: -1,
  raw: '0x02f8',
  from: SENDER,
  nonce,
  to: `0x${'12'.repeat(20)}`,
  type: 2,
  fields: { type: '0x2', nonce: `0x${nonce.toString(16)}`, value: '0x1', accessList: [] },
  senderPublicKey: new Uint8Array(64).fill(7),
})

describe('forwarded sends kept by the primary of serve --workers N', () => {
  test('a send is found by hash while it counts: not once replaced, passed by its sender\u2019s nonce or dropped', () => {
    let clock = 0
    const registry = createNonceRegistry({ now: () => clock, dropAfterMs: 1_000 })
    registry.record(SENDER, 3, hash(3), pooled(3))
    registry.record(SENDER, 4, hash(4), pooled(4))
    expect(registry.transaction(hash(3))).toEqual(pooled(3))
    expect(registry.transaction(hash(99))).toBeNull()
    // Replaced: the first is gone, the second is found.
    registry.record(SENDER, 3, hash(33), pooled(3, 33))
    expect(registry.transaction(hash(3))).toBeNull()
    expect(registry.transaction(hash(33))).toEqual(pooled(3, 33))
    // The chain passed 3: found no more; 4 still is, until it is dropped.
    expect(registry.from(SENDER, 4n)).toEqual([4])
    expect(registry.transaction(hash(33))).toBeNull()
    expect(registry.transaction(hash(4))).toEqual(pooled(4))
    clock = 1_001
    expect(registry.transaction(hash(4))).toBeNull()
  })
})

describe('a self-sponsored EIP-7702 delegation in the shared stores', () => {
  const delegation = { from: SENDER, nonce: 4, fields: { chainId: '0x2105' }, authorities: [{ address: SENDER, chainId: 8453, nonce: 5 }] } as never
  const connections = useRedisPair()

  test('the primary of serve --workers N counts its authorization’s nonce for every worker', async () => {
    const registry = createNonceRegistry()
    registry.record(SENDER, 4, hash(4), delegation)
    expect(registry.from(SENDER, 4n)).toEqual([4, 5])
    expect(registry.from(SENDER, 5n)).toEqual([5])
    expect(registry.from(SENDER, 6n)).toEqual([])
  })

  test('a process sharing Redis counts it too: its pending nonce skips both', async () => {
    const { redis, other } = connections()
    const here = createForwardedTransactions({ redis })
    const there = createForwardedTransactions({ redis: other })
    await here.record({ from: SENDER, nonce: 4, hash: hash(4), transaction: delegation })
    expect(await there.nextNonce(SENDER, 4n)).toBe(6n)
    expect(await there.nextNonce(SENDER, 5n)).toBe(6n)
  })
})

describe('forwarded nonces shared through Redis', () => {
  // Two connections, as two serving processes have.
  const connections = useRedisPair()
  let redis: SharedRedis
  let other: SharedRedis
  beforeAll(() => {
    ;({ redis, other } = connections())
  })

  test("a send through one process counts in the other's pending nonce, with gaps, replacements and passed nonces as locally", async () => {
    const here = createForwardedTransactions({ redis })
    const there = createForwardedTransactions({ redis: other })
    for (const nonce of [5, 6, 7, 9]) await here.record({ from: SENDER, nonce, hash: hash(nonce) })
    expect(await there.nextNonce(SENDER.toUpperCase().replace('0X', '0x') as never, 5n)).toBe(8n)
    // The other process forwards 8: both now count through 9.
    await there.record({ from: SENDER, nonce: 8, hash: hash(8) })
    expect(await here.nextNonce(SENDER, 5n)).toBe(10n)
    // A replacement of 6 is still one nonce; the chain reaching 7 forgets 5 and 6 in Redis too.
    await there.record({ from: SENDER, nonce: 6, hash: hash(66) })
    expect(await here.nextNonce(SENDER, 7n)).toBe(10n)
    expect(await redis.client.zcard(redis.key(`forwarded:${SENDER}`))).toBe(3)
    // Only the sender's own nonces: another sender is untouched.
    expect(await there.nextNonce(`0x${'cd'.repeat(20)}`, 3n)).toBe(3n)
  })

  test('a shared send not seen within the drop time stops counting, and its Redis key expires', async () => {
    const sender = `0x${'ef'.repeat(20)}` as const
    let clock = Date.now()
    const here = createForwardedTransactions({ redis, dropAfterMs: 300, now: () => clock })
    const there = createForwardedTransactions({ redis: other, dropAfterMs: 300, now: () => clock })
    await here.record({ from: sender, nonce: 0, hash: hash(0) })
    expect(await there.nextNonce(sender, 0n)).toBe(1n)
    clock += 301
    expect(await there.nextNonce(sender, 0n)).toBe(0n)
    await expect.poll(() => redis.client.exists(redis.key(`forwarded:${sender}`)), { timeout: 2_000, interval: 50 }).toBe(0)
  })

  test('a send through one process is found by hash through the other, without its public key, until it is replaced or passed', async () => {
    const sender = SENDER
    const here = createForwardedTransactions({ redis })
    const there = createForwardedTransactions({ redis: other })
    const first = pooled(20, 20)
    await here.record({ from: sender, nonce: 20, hash: first.hash, transaction: first })
    const { senderPublicKey: _publicKey, ...expected } = first
    expect(await there.transaction(first.hash)).toEqual(expected)
    expect(await there.transaction(hash(12345))).toBeNull()
    // Replaced through the other process: the first is found nowhere, the replacement everywhere.
    const second = pooled(20, 2020)
    await there.record({ from: sender, nonce: 20, hash: second.hash, transaction: second })
    expect(await here.transaction(first.hash)).toBeNull()
    const { senderPublicKey: _other, ...expectedSecond } = second
    expect(await here.transaction(second.hash)).toEqual(expectedSecond)
    // The chain passes 20: no longer in anyone's pool.
    expect(await here.nextNonce(sender, 21n)).toBe(21n)
    expect(await here.transaction(second.hash)).toBeNull()
  })
})
