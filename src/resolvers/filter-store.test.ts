import { setTimeout as sleep } from 'node:timers/promises'
import type { Hex } from 'viem'
import { describe, expect, test } from 'vitest'
import { pino } from 'pino'
import { freePort } from '../../test/fixtures/ports.js'
import { startRedisServer, stopRedisServer, useRedisPair } from '../../test/fixtures/redis.js'
import { createRedis } from '../redis/index.js'
import { createFilterStore, createMemoryFilterStore, type FilterCursor, type StoredFilter } from './filter-store.js'

const at = (number: number, index = 0): FilterCursor => ({ number, index, hashes: [] })
const blocks = (number: number): StoredFilter => ({ kind: 'blocks', criteria: null, cursor: at(number) })
const logs = (addresses: number): StoredFilter => ({
  kind: 'logs',
  criteria: { address: Array.from({ length: addresses }, (_, index) => `0x${index.toString(16).padStart(40, '0')}`), topics: [] },
  cursor: at(1),
})

describe('filters in memory', () => {
  test('a poll moves the cursor only from where it read it: a second poll from the same place delivers nothing twice', () => {
    const store = createMemoryFilterStore()
    store.install('0xa', blocks(5), null)
    expect(store.advance('0xa', at(5), at(7))).toBe(true)
    expect(store.advance('0xa', at(5), at(6))).toBe(false)
    expect(store.get('0xa')?.cursor).toEqual(at(7))
    expect(store.advance('0xunknown', at(5), at(6))).toBe(false)
    expect(store.remove('0xa')).toBe(true)
    expect(store.remove('0xa')).toBe(false)
    expect(store.get('0xa')).toBeNull()
  })

  test('a filter not polled within the timeout is gone; each poll restarts it', async () => {
    const store = createMemoryFilterStore({ timeoutMs: 150 })
    store.install('0xpolled', blocks(1), null)
    store.install('0xidle', blocks(1), null)
    for (let poll = 0; poll < 4; poll++) {
      await sleep(60)
      expect(store.get('0xpolled')).not.toBeNull()
    }
    expect(store.get('0xidle')).toBeNull()
  })

  test("the criteria's bytes are bounded: once they are full, installs are refused and every filter kept stays", () => {
    const store = createMemoryFilterStore({ maxBytes: 200_000 })
    const installed = Array.from({ length: 10 }, (_, filter) => store.install(`0x${filter}`, logs(1_000)))
    // ~43 KB each, with room kept for each cursor to grow: four fit; the others are refused, not the first pushed out.
    expect(installed).toEqual([true, true, true, true, false, false, false, false, false, false])
    expect(store.size).toBe(4)
    expect(store.get('0x0')).not.toBeNull()
    expect(store.get('0x9')).toBeNull()
    // Uninstalling one makes room again.
    expect(store.remove('0x0')).toBe(true)
    expect(store.install('0xnext', logs(1_000))).toBe(true)
  })

  test('room is kept for every cursor to grow to its most: polls never push a filter out', () => {
    // 64 hash prefixes, as a filter remembers after 64 blocks (filters.ts FILTER_REORG_DEPTH).
    const full = (number: number): FilterCursor => ({
      number,
      index: 0,
      hashes: Array.from({ length: 64 }, (_, at) => `0x${(number + at).toString(16).padStart(16, '0')}` as Hex),
    })
    const store = createMemoryFilterStore({ maxBytes: 24_000 })
    const installed = Array.from({ length: 10 }, (_, filter) => store.install(`0x${filter}`, blocks(1)))
    // ~260 bytes each while their cursors are empty, but ~2.9 KB once polled 64 blocks: only those fit.
    expect(store.size).toBeLessThan(10)
    expect(store.size).toBe(installed.filter(Boolean).length)
    // Every one kept is polled to a full cursor, and stays.
    const kept = installed.flatMap((ok, filter) => (ok ? [`0x${filter}`] : []))
    expect(kept.map((id, position) => store.advance(id, at(1), full(100 + position)))).toEqual(kept.map(() => true))
    expect(kept.map((id) => store.get(id) !== null)).toEqual(kept.map(() => true))
  })

  test("a client's share: past it, its installs are refused and other clients' filters stay; uninstalling or expiry frees it", async () => {
    const store = createMemoryFilterStore({ maxBytes: 1_000_000, maxPerClient: 3, maxBytesPerClient: 100_000, timeoutMs: 200 })
    expect(store.install('0xtheirs', blocks(1), 'key:1')).toBe(true)
    // ~43 KB each: two fit in 100 KB, a third does not.
    expect(store.install('0xbig1', logs(1_000), 'ip:a')).toBe(true)
    expect(store.install('0xbig2', logs(1_000), 'ip:a')).toBe(true)
    expect(store.install('0xbig3', logs(1_000), 'ip:a')).toBe(false)
    expect(store.get('0xbig3')).toBeNull()
    // A small one still fits; then the count is the bound.
    expect(store.install('0xsmall1', blocks(1), 'ip:a')).toBe(true)
    expect(store.install('0xsmall2', blocks(1), 'ip:a')).toBe(false)
    expect(store.heldBy('ip:a').count).toBe(3)
    expect(store.get('0xtheirs')).not.toBeNull()
    // A cursor moving keeps the filter counted once.
    expect(store.advance('0xsmall1', at(1), at(2))).toBe(true)
    expect(store.heldBy('ip:a').count).toBe(3)
    expect(store.remove('0xbig1')).toBe(true)
    expect(store.heldBy('ip:a').count).toBe(2)
    expect(store.install('0xbig3', logs(1_000), 'ip:a')).toBe(true)
    // Expired filters free the share though nothing polled them since.
    await sleep(250)
    expect(store.install('0xlater', logs(1_000), 'ip:a')).toBe(true)
    expect(store.heldBy('ip:a').count).toBe(1)
    expect(store.heldBy('key:1').count).toBe(0)
  })

  test('at most `max` filters: the next is refused, those kept stay until uninstalled or expired', async () => {
    const store = createMemoryFilterStore({ max: 3, timeoutMs: 200 })
    const installed = Array.from({ length: 5 }, (_, filter) => store.install(`0x${filter}`, blocks(filter)))
    expect(installed).toEqual([true, true, true, false, false])
    expect(store.get('0x0')?.cursor).toEqual(at(0))
    expect(store.get('0x4')).toBeNull()
    // Expired, they make room.
    await sleep(250)
    expect(store.install('0x5', blocks(5))).toBe(true)
  })

  test('a copy store (Redis holds the filters) pushes out the least recently polled instead', () => {
    const store = createMemoryFilterStore({ max: 3, whenFull: 'evict' })
    for (let filter = 0; filter < 5; filter++) expect(store.install(`0x${filter}`, blocks(filter))).toBe(true)
    expect(store.size).toBe(3)
    expect(store.get('0x1')).toBeNull()
    expect(store.get('0x4')?.cursor).toEqual(at(4))
  })
})

describe('filters in Redis (--redis-url)', () => {
  const connections = useRedisPair()

  test('a filter installed by one process is polled by another, and a poll from a stale cursor moves nothing', async () => {
    const { redis, other } = connections()
    const one = createFilterStore({ redis })
    const two = createFilterStore({ redis: other })
    const filter = logs(2)
    await one.install('0xshared', filter, null)
    expect(await two.get('0xshared')).toEqual(filter)
    expect(await two.advance('0xshared', at(1), at(9, 3))).toBe(true)
    expect(await one.advance('0xshared', at(1), at(2))).toBe(false)
    expect((await one.get('0xshared'))?.cursor).toEqual(at(9, 3))
    expect(await one.remove('0xshared')).toBe(true)
    expect(await two.get('0xshared')).toBeNull()
    expect(await two.remove('0xshared')).toBe(false)
  })

  test('expires when not polled; each poll restarts the timeout', async () => {
    const { redis, other } = connections()
    const one = createFilterStore({ redis, timeoutMs: 300 })
    const two = createFilterStore({ redis: other, timeoutMs: 300 })
    await one.install('0xpolled', blocks(1), null)
    await one.install('0xidle', blocks(1), null)
    for (let poll = 0; poll < 4; poll++) {
      await sleep(120)
      expect(await two.get('0xpolled')).not.toBeNull()
    }
    expect(await two.get('0xidle')).toBeNull()
    expect(await redis.client.exists(redis.key('filter:0xidle'))).toBe(0)
  })
})

test('through a Redis outage (frozen, then back with its data): each poll of a filter moves on from the one before, nothing repeated or lost, and the filters are shared again after', async () => {
  const port = await freePort()
  const server = await startRedisServer(port)
  const connect = () => createRedis({ url: `redis://127.0.0.1:${port}`, logger: pino({ level: 'silent' }) })
  const [redis, other] = [await connect(), await connect()]
  try {
    const store = createFilterStore({ redis })
    const elsewhere = createFilterStore({ redis: other })
    await store.install('0xbefore', blocks(1), null)
    const polled = await store.get('0xbefore')
    expect(await store.advance('0xbefore', polled!.cursor, at(2))).toBe(true)

    server.kill('SIGSTOP')
    try {
      // The filter this process polled goes on from its own copy; one installed meanwhile lives here.
      const during = await store.get('0xbefore')
      expect(during?.cursor).toEqual(at(2))
      expect(await store.advance('0xbefore', at(2), at(3))).toBe(true)
      await store.install('0xduring', blocks(3), null)
      expect(await store.advance('0xduring', at(3), at(4))).toBe(true)
      expect((await store.get('0xduring'))?.cursor).toEqual(at(4))
    } finally {
      server.kill('SIGCONT')
    }

    // Back: each filter's next poll continues from where the outage left it (not from Redis's older copy)…
    await expect.poll(async () => await redis.client.ping().catch(() => null), { timeout: 10_000 }).toBe('PONG')
    await sleep(1_100)
    expect((await store.get('0xbefore'))?.cursor).toEqual(at(3))
    expect(await store.advance('0xbefore', at(3), at(5))).toBe(true)
    expect((await store.get('0xduring'))?.cursor).toEqual(at(4))
    // …and the filters are in Redis again, for the other processes.
    expect((await elsewhere.get('0xbefore'))?.cursor).toEqual(at(5))
    expect((await elsewhere.get('0xduring'))?.cursor).toEqual(at(4))
    expect(await elsewhere.advance('0xduring', at(4), at(6))).toBe(true)
    expect((await store.get('0xduring'))?.cursor).toEqual(at(6))
    expect(await store.remove('0xduring')).toBe(true)
    expect(await elsewhere.get('0xduring')).toBeNull()
  } finally {
    await redis.close()
    await other.close()
    await stopRedisServer(server)
  }
}, 30_000)
