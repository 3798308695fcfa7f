import { createHash, randomBytes } from 'node:crypto'
import { asc, eq, type SQL, sql } from 'drizzle-orm'
import { LRUCache } from 'lru-cache'
import type { ApiKeyPolicy } from '../config.js'
import { type Db, schema } from '../db/index.js'
import { DuplicateApiKeyNameError } from '../errors.js'
import type { SharedRedis } from '../redis/index.js'

/** Keys are 32 random bytes: far beyond guessing, and a plain SHA-256 digest of one cannot be reversed. */
const KEY_BYTES = 32
/** `fg_` marks a flashgate key, so that secret scanners and people can tell it apart. */
const KEY_PREFIX = 'fg_'
/** Characters of a key kept in plain text to tell keys apart in listings. */
const DISPLAY_PREFIX_LENGTH = 10
/**
 * A key's record is given from the cache for at most this long after it was read: a revocation takes effect
 * everywhere within it. With Redis, a revocation is announced and every process drops its cache at once; this
 * is the bound when Redis is down or a message is lost.
 */
export const KEY_CACHE_TTL_MS = 2_000
/**
 * A record older than this is read again in the background while it is still given, so that a key in steady
 * use is never waited on: before, every request arriving in the millisecond or two after a record expired
 * missed the cache and sent a query of its own (tens of the same query, every 2 s, per busy key).
 */
export const KEY_REFRESH_AFTER_MS = 1_500
const KEY_CACHE_MAX_ENTRIES = 10_000
/** The Redis channel on which a revocation is announced to every process of the deployment. */
const API_KEYS_REVOKED_CHANNEL = 'api-keys:revoked'

export type ApiKeyRecord = {
  id: number
  name: string
  /** The first characters of the key (the rest is never stored). */
  prefix: string
  policy: ApiKeyPolicy
  /** Requests per second; 0 for no limit. */
  rateLimit: number
  createdAt: Date
  revokedAt: Date | null
}

export type CreateApiKeyParameters = { name: string; policy: ApiKeyPolicy; rateLimit: number }

const digest = (key: string) => createHash('sha256').update(key).digest()

function toRecord(row: typeof schema.apiKeys.$inferSelect): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    policy: row.policy as ApiKeyPolicy,
    rateLimit: row.rateLimit,
    createdAt: new Date(row.createdAt),
    revokedAt: row.revokedAt === null ? null : new Date(row.revokedAt),
  }
}

/**
 * API keys of the dedicated endpoints: created and revoked by `flashgate keys`, looked up per request. With
 * `redis` (`--redis-url`), a revocation reaches every process's cache through a pub/sub message: no Redis
 * call per request.
 */
export function createApiKeyResolvers({ db, readDb = db, redis = null }: { db: Db; readDb?: Db; redis?: SharedRedis | null }) {
  // Unknown keys are cached too (as `null`), so that a flood of made-up keys costs no queries.
  const cache = new LRUCache<string, { record: ApiKeyRecord | null; readAt: number }>({ max: KEY_CACHE_MAX_ENTRIES })
  /** Reads under way, by key: the requests that need one key's record at once share one query. */
  const reading = new Map<string, Promise<ApiKeyRecord | null>>()
  // Bumped at each revocation: a look-up that read the database before it does not cache what it read.
  let generation = 0
  function forgetKeys() {
    generation++
    cache.clear()
    reading.clear()
  }
  redis?.subscribe(API_KEYS_REVOKED_CHANNEL, forgetKeys)

  /** Creates a key and returns it in plain text: the only time it is ever shown. */
  async function createApiKey({ name, policy, rateLimit }: CreateApiKeyParameters): Promise<{ key: string; record: ApiKeyRecord }> {
    const key = `${KEY_PREFIX}${randomBytes(KEY_BYTES).toString('base64url')}`
    const rows = await db.drizzle
      .insert(schema.apiKeys)
      .values({ name, keyHash: digest(key), prefix: key.slice(0, DISPLAY_PREFIX_LENGTH), policy, rateLimit })
      .onConflictDoNothing({ target: schema.apiKeys.name })
      .returning()
    if (rows.length === 0) throw new DuplicateApiKeyNameError(name)
    return { key, record: toRecord(rows[0]!) }
  }

  async function listApiKeys(): Promise<ApiKeyRecord[]> {
    const rows = await db.drizzle.select().from(schema.apiKeys).orderBy(asc(schema.apiKeys.id))
    return rows.map(toRecord)
  }

  /**
   * Revokes the key with this name, or else with this id; `null` when there is none. A name wins over an id,
   * so that revoking "3" never takes a key named "3" and key number 3 together. Revoking twice keeps the
   * first time.
   */
  async function revokeApiKey(nameOrId: string): Promise<ApiKeyRecord | null> {
    const revoke = (where: SQL) =>
      db.drizzle
        .update(schema.apiKeys)
        .set({ revokedAt: sql`coalesce(${schema.apiKeys.revokedAt}, (extract(epoch from now()) * 1000)::bigint)` })
        .where(where)
        .returning()
    let rows = await revoke(eq(schema.apiKeys.name, nameOrId))
    if (rows.length === 0 && /^\d{1,9}$/.test(nameOrId)) rows = await revoke(eq(schema.apiKeys.id, Number(nameOrId)))
    forgetKeys()
    if (rows.length > 0) await redis?.publish(API_KEYS_REVOKED_CHANNEL, String(rows[0]!.id))
    return rows[0] === undefined ? null : toRecord(rows[0])
  }

  /**
   * The record of a live key, or `null` for a key that is unknown or revoked: at once when it was read less
   * than `KEY_CACHE_TTL_MS` ago (and read again in the background past `KEY_REFRESH_AFTER_MS`), else once the
   * one read of it under way ends.
   */
  function lookupApiKey(key: string): ApiKeyRecord | null | Promise<ApiKeyRecord | null> {
    const cached = cache.get(key)
    if (cached === undefined) return readOnce(key)
    const age = performance.now() - cached.readAt
    if (age >= KEY_CACHE_TTL_MS) return readOnce(key)
    if (age >= KEY_REFRESH_AFTER_MS && !reading.has(key))
      // A failed refresh changes nothing: the record is given until it expires, and then read in the foreground.
      readOnce(key).catch(() => {})
    return cached.record
  }

  function readOnce(key: string): Promise<ApiKeyRecord | null> {
    const under = reading.get(key)
    if (under !== undefined) return under
    const read = readApiKey(key).finally(() => {
      if (reading.get(key) === read) reading.delete(key)
    })
    reading.set(key, read)
    return read
  }

  const keyRow = (from: Db, key: string) =>
    from.drizzle
      .select()
      .from(schema.apiKeys)
      .where(eq(schema.apiKeys.keyHash, digest(key)))
      .limit(1)
      .then((rows) => rows[0])

  /**
   * Looked up where the process reads (a replica, with `--database-read-url`), so that keys keep working while
   * the primary is away; a key the replica does not have yet (made a moment ago) is looked for on the primary.
   */
  async function readApiKey(key: string): Promise<ApiKeyRecord | null> {
    const startedIn = generation
    const readAt = performance.now()
    const row = (await keyRow(readDb, key)) ?? (readDb === db ? undefined : await keyRow(db, key))
    const record = row === undefined || row.revokedAt !== null ? null : toRecord(row)
    // Dated from when the read began: no record is given longer than KEY_CACHE_TTL_MS after the database said it.
    if (generation === startedIn) cache.set(key, { record, readAt })
    return record
  }

  return { createApiKey, listApiKeys, revokeApiKey, lookupApiKey }
}
