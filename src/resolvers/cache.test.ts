import { describe, expect, test, vi } from 'vitest'
import { createAnswerCache } from './cache.js'

/** Each entry counts its estimate plus the key's length; keys here are 2 characters, so 38 + 2 = 40 bytes. */
const ENTRY_BYTES = 40
const KEY_LENGTH = 2
const bytesOfEntry = () => ENTRY_BYTES - KEY_LENGTH

function deferred<value>() {
  let resolve!: (value: value) => void
  const promise = new Promise<value>((settle) => {
    resolve = settle
  })
  return { promise, resolve }
}

describe('createAnswerCache', () => {
  test('a second remember of the same key returns the cached answer without computing again', async () => {
    const cache = createAnswerCache({ maxBytes: 1_000 })
    const compute = vi.fn(async () => ({ blockNumber: 7 }))
    const first = await cache.remember('b7', compute, bytesOfEntry)
    const second = await cache.remember('b7', compute, bytesOfEntry)
    expect(compute).toHaveBeenCalledTimes(1)
    expect(second).toBe(first)
    expect(second).toEqual({ blockNumber: 7 })
    expect(cache.size).toBe(1)
  })

  test('different keys are computed and kept separately', async () => {
    const cache = createAnswerCache({ maxBytes: 1_000 })
    expect(await cache.remember('b1', async () => 'one', bytesOfEntry)).toBe('one')
    expect(await cache.remember('b2', async () => 'two', bytesOfEntry)).toBe('two')
    expect(await cache.remember('b1', async () => 'recomputed', bytesOfEntry)).toBe('one')
    expect(cache.size).toBe(2)
  })

  test('a null answer is returned but not cached', async () => {
    const cache = createAnswerCache({ maxBytes: 1_000 })
    const compute = vi.fn(async () => null)
    expect(await cache.remember('tx', compute, bytesOfEntry)).toBeNull()
    expect(await cache.remember('tx', compute, bytesOfEntry)).toBeNull()
    expect(compute).toHaveBeenCalledTimes(2)
    expect(cache.size).toBe(0)
  })

  test('maxBytes 0 keeps nothing: every remember computes, and the size stays 0', async () => {
    const cache = createAnswerCache({ maxBytes: 0 })
    const compute = vi.fn(async () => 'answer')
    expect(await cache.remember('b1', compute, bytesOfEntry)).toBe('answer')
    expect(await cache.remember('b1', compute, bytesOfEntry)).toBe('answer')
    expect(compute).toHaveBeenCalledTimes(2)
    expect(cache.size).toBe(0)
    expect(() => cache.clear()).not.toThrow()
    expect(cache.size).toBe(0)
    expect(cache.enabled).toBe(false)
    expect(createAnswerCache({ maxBytes: 1 }).enabled).toBe(true)
  })

  test('the byte bound evicts the least recently used entry', async () => {
    // 100 bytes hold two 40-byte entries, not three.
    const cache = createAnswerCache({ maxBytes: 100 })
    const computed: string[] = []
    const remember = (key: string) =>
      cache.remember(
        key,
        async () => {
          computed.push(key)
          return `answer ${key}`
        },
        bytesOfEntry,
      )
    await remember('k1')
    await remember('k2')
    await remember('k1') // k1 is now more recently used than k2
    await remember('k3') // evicts k2
    expect(cache.size).toBe(2)
    expect(computed).toEqual(['k1', 'k2', 'k3'])
    await remember('k1')
    await remember('k3')
    expect(computed).toEqual(['k1', 'k2', 'k3'])
    expect(await remember('k2')).toBe('answer k2') // evicts k1, the least recently used of k1 and k3
    expect(computed).toEqual(['k1', 'k2', 'k3', 'k2'])
    await remember('k1')
    expect(computed).toEqual(['k1', 'k2', 'k3', 'k2', 'k1'])
    expect(cache.size).toBe(2)
  })

  test('an answer larger than the whole bound is returned but not kept', async () => {
    const cache = createAnswerCache({ maxBytes: 100 })
    expect(
      await cache.remember(
        'big',
        async () => 'huge',
        () => 500,
      ),
    ).toBe('huge')
    expect(cache.size).toBe(0)
  })

  test('clear() empties the cache, so the next remember computes again', async () => {
    const cache = createAnswerCache({ maxBytes: 1_000 })
    const compute = vi.fn(async () => 'answer')
    await cache.remember('b1', compute, bytesOfEntry)
    await cache.remember('b2', compute, bytesOfEntry)
    expect(cache.size).toBe(2)
    cache.clear()
    expect(cache.size).toBe(0)
    await cache.remember('b1', compute, bytesOfEntry)
    expect(compute).toHaveBeenCalledTimes(3)
    expect(cache.size).toBe(1)
  })

  test('an answer computed across a clear() is returned but not stored', async () => {
    const cache = createAnswerCache({ maxBytes: 1_000 })
    const pending = deferred<string>()
    const inFlight = cache.remember('b1', () => pending.promise, bytesOfEntry)
    cache.clear() // a reorg while the answer for the old block was being read
    pending.resolve('pre-reorg answer')
    expect(await inFlight).toBe('pre-reorg answer')
    expect(cache.size).toBe(0)
    const compute = vi.fn(async () => 'post-reorg answer')
    expect(await cache.remember('b1', compute, bytesOfEntry)).toBe('post-reorg answer')
    expect(compute).toHaveBeenCalledTimes(1)
    expect(cache.size).toBe(1)
  })

  test('an answer started after a clear() is stored as usual', async () => {
    const cache = createAnswerCache({ maxBytes: 1_000 })
    cache.clear()
    const pending = deferred<string>()
    const inFlight = cache.remember('b1', () => pending.promise, bytesOfEntry)
    pending.resolve('answer')
    expect(await inFlight).toBe('answer')
    expect(cache.size).toBe(1)
  })
})
