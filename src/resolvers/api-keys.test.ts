import { setTimeout as sleep } from 'node:timers/promises'
import { eq, sql } from 'drizzle-orm'
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest'
import { createDb, type Db, schema } from '../db/index.js'
import { createApiKeyResolvers, KEY_CACHE_TTL_MS, KEY_REFRESH_AFTER_MS } from './api-keys.js'

describe('API key look-ups', () => {
  let db: Db
  beforeAll(async () => {
    db = await createDb({ databaseUrl: 'memory://' })
  })
  afterAll(async () => {
    await db?.close()
  })

  /** Counts the reads of the api_keys table the resolvers make (the real database answers each). */
  function countingReads() {
    const select = vi.spyOn(db.drizzle, 'select')
    return { count: () => select.mock.calls.length, restore: () => select.mockRestore() }
  }

  test('requests that need a key nobody has read yet share one query', async () => {
    const keys = createApiKeyResolvers({ db })
    const { key } = await keys.createApiKey({ name: 'shared-read', policy: 'dedicated', rateLimit: 0 })
    const reads = countingReads()
    try {
      const answers = await Promise.all(Array.from({ length: 50 }, () => keys.lookupApiKey(key)))
      expect(new Set(answers.map((record) => record?.name))).toEqual(new Set(['shared-read']))
      expect(reads.count()).toBe(1)
      // Read, the record is given at once, without a promise.
      const cached = keys.lookupApiKey(key)
      expect(cached).not.toBeInstanceOf(Promise)
      expect((cached as { name: string }).name).toBe('shared-read')
      expect(reads.count()).toBe(1)
    } finally {
      reads.restore()
    }
  })

  test('a key in use is read again in the background before it expires: no request waits, and a revocation is seen within the bound', async () => {
    const keys = createApiKeyResolvers({ db })
    const { key, record } = await keys.createApiKey({ name: 'refreshed', policy: 'dedicated', rateLimit: 0 })
    await keys.lookupApiKey(key)
    const reads = countingReads()
    try {
      await sleep(KEY_REFRESH_AFTER_MS + 100)
      // Past the refresh age the cached record is still given at once, and one read (not one per request) starts.
      for (let request = 0; request < 20; request++) expect(keys.lookupApiKey(key)).not.toBeInstanceOf(Promise)
      expect(reads.count()).toBe(1)
      // Another process revokes it (no Redis here to announce it): this one refuses it within KEY_CACHE_TTL_MS.
      await db.drizzle.update(schema.apiKeys).set({ revokedAt: sql`(extract(epoch from now()) * 1000)::bigint` }).where(eq(schema.apiKeys.id, record.id))
      const revokedAt = performance.now()
      let answer: unknown = record
      while (answer !== null && performance.now() - revokedAt < KEY_CACHE_TTL_MS + 1_000) {
        answer = await keys.lookupApiKey(key)
        await sleep(20)
      }
      expect(answer).toBeNull()
      expect(performance.now() - revokedAt).toBeLessThan(KEY_CACHE_TTL_MS + 500)
    } finally {
      reads.restore()
    }
  })

  test('a failed read is given to every request waiting on it and is not kept: the next look-up reads again', async () => {
    const closing = await createDb({ databaseUrl: 'memory://' })
    const keys = createApiKeyResolvers({ db: closing })
    const { key } = await keys.createApiKey({ name: 'failing-read', policy: 'dedicated', rateLimit: 0 })
    await closing.close()
    const select = vi.spyOn(closing.drizzle, 'select')
    const first = await Promise.allSettled([keys.lookupApiKey(key), keys.lookupApiKey(key)])
    expect(first.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected'])
    expect(select).toHaveBeenCalledTimes(1)
    await expect(Promise.resolve(keys.lookupApiKey(key))).rejects.toThrow()
    expect(select).toHaveBeenCalledTimes(2)
  })
})
