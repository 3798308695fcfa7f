import { LRUCache } from 'lru-cache'
import type { Hex } from 'viem'
import type { ClusterLink } from '../cluster/link.js'
import type { SharedRedis } from '../redis/index.js'

/** geth's deadline: a filter not polled for this long is uninstalled (eth/filters/api.go). */
export const FILTER_TIMEOUT_MS = 5 * 60_000
/**
 * Filters one store keeps at most. Full, it refuses new ones (`install` answers `false`) rather than push out
 * the least recently polled: a filter accepted is never lost before its timeout, as on geth, which only
 * expires them (clients of many addresses or keys once pushed out another client's filter in seconds).
 */
export const MAX_FILTERS = 10_000
/**
 * …and the bytes of their criteria and cursors at most: a filter is a few KB, but the `eth_getLogs` parser lets
 * one name up to 1,000 addresses and 1,000 topics per position (~300 KB), so the count alone does not bound
 * the memory clients can fill by installing filters and abandoning them.
 */
export const MAX_FILTER_BYTES = 64 * 1024 * 1024
/**
 * What one client (an API key, or an address on the public endpoint) may hold of a store: beyond it,
 * `install` refuses (`TooManyFiltersError`) rather than let the store's least-recently-used rule push out
 * other clients' filters. A client's filters expire as everyone's; an uninstall frees its share at once.
 */
export const MAX_FILTERS_PER_CLIENT = 1_000
export const MAX_FILTER_BYTES_PER_CLIENT = 4 * 1024 * 1024
/** A filter's own bytes besides its criteria and its cursor's hashes: id, cursor, the map's entry. */
const FILTER_OVERHEAD_BYTES = 256
/** What a hash in a cursor costs besides its characters: the string's header and its slot in the array. */
const CURSOR_HASH_OVERHEAD_BYTES = 24
/**
 * The most a cursor grows to: 64 hash prefixes of 8 bytes in hex (filters.ts FILTER_REORG_DEPTH and
 * FILTER_HASH_PREFIX_BYTES). Room for every filter's is kept, so that no poll pushes a filter out.
 */
const MAX_CURSOR_BYTES = 64 * (CURSOR_HASH_OVERHEAD_BYTES + 2 + 2 * 8)

/**
 * The bytes a filter is counted for: a cursor grows as the filter is polled (up to 64 hash prefixes, ~2.7 KB),
 * so it is counted again at each poll that moves it, not only at install.
 */
function filterBytes(criteriaBytes: number, cursor: FilterCursor): number {
  let bytes = FILTER_OVERHEAD_BYTES + criteriaBytes
  for (const hash of cursor.hashes) bytes += CURSOR_HASH_OVERHEAD_BYTES + hash.length
  return bytes
}

export type FilterKind = 'logs' | 'blocks' | 'pendingTransactions'

/**
 * Where a filter's next changes start. Blocks and logs: after block `number`; `hashes` are the first bytes of
 * the hashes of the last blocks up to it (64 of them, oldest first: filters.ts FILTER_REORG_DEPTH and
 * FILTER_HASH_PREFIX_BYTES), so that a poll after a reorg finds where the chain it delivered forked.
 * Pending transactions: at position `index` of block `number`, counting pre-confirmed and sealed blocks alike.
 */
export type FilterCursor = { number: number; index: number; hashes: Hex[] }

/** A filter as every process of a deployment sees it. `criteria`: the `eth_newFilter` object as sent (logs only). */
export type StoredFilter = { kind: FilterKind; criteria: unknown; cursor: FilterCursor }

/**
 * The filters of a deployment, by id: in this process, in the primary of `serve --workers N` (so that a
 * client's polls may land on any worker), or in Redis (`--redis-url`, so that they may land on any process).
 * A poll reads the filter, works out the changes, then moves the cursor only if no other poll moved it
 * meanwhile (`advance` compares): two polls of one filter never both deliver the same changes.
 */
export type FilterStore = {
  /**
   * Keeps the filter; `false` (and nothing kept) when `owner` already holds its share of the store. `owner`
   * names the client; `null` for none (counted against the store's bounds alone).
   */
  install(id: string, filter: StoredFilter, owner: string | null): Promise<boolean>
  /** The filter, its timeout restarted; `null` when unknown or expired. */
  get(id: string): Promise<StoredFilter | null>
  /** Moves the cursor from `from` to `to`; `false` (and nothing changed) when it is no longer at `from`. */
  advance(id: string, from: FilterCursor, to: FilterCursor): Promise<boolean>
  remove(id: string): Promise<boolean>
}

/** Whole cursors: a filter taking back a deep reorg over several polls changes its older hashes only. */
const sameCursor = (a: FilterCursor, b: FilterCursor) =>
  a.number === b.number && a.index === b.index && a.hashes.length === b.hashes.length && a.hashes.every((hash, at) => hash === b.hashes[at])

/** Filters in this process's memory; also the primary's store for its workers. */
export function createMemoryFilterStore({
  timeoutMs = FILTER_TIMEOUT_MS,
  max = MAX_FILTERS,
  maxBytes = MAX_FILTER_BYTES,
  maxPerClient = MAX_FILTERS_PER_CLIENT,
  maxBytesPerClient = MAX_FILTER_BYTES_PER_CLIENT,
  whenFull = 'refuse',
}: {
  timeoutMs?: number
  max?: number
  maxBytes?: number
  maxPerClient?: number
  maxBytesPerClient?: number
  /** `evict`: the least recently polled go, for a store that only keeps copies (Redis holds the filters). */
  whenFull?: 'refuse' | 'evict'
} = {}) {
  /** What each client holds: filters and their criteria's bytes (with a filter's overhead). */
  const held = new Map<string, { count: number; bytes: number }>()
  /** Each held filter's client and the bytes it is counted for there. */
  const charges = new Map<string, { owner: string; bytes: number }>()
  function release(id: string) {
    const charge = charges.get(id)
    if (charge === undefined) return
    charges.delete(id)
    const holding = held.get(charge.owner)!
    holding.count--
    holding.bytes -= charge.bytes
    if (holding.count === 0) held.delete(charge.owner)
  }
  // The criteria's bytes are counted once, at install; the cursor's at every set (filterBytes).
  const filters = new LRUCache<string, { filter: StoredFilter; criteriaBytes: number }>({
    max,
    maxSize: maxBytes,
    sizeCalculation: (entry) => filterBytes(entry.criteriaBytes, entry.filter.cursor),
    ttl: timeoutMs,
    updateAgeOnGet: true,
    // Gone (uninstalled, expired, or pushed out): its client's share is free again. A cursor moving (`set` over
    // the same filter) keeps it.
    dispose: (_entry, id, reason) => {
      if (reason !== 'set') release(id)
    },
  })
  const withinShare = (owner: string | null, bytes: number) => {
    const holding = owner === null ? undefined : held.get(owner)
    return holding === undefined || (holding.count < maxPerClient && holding.bytes + bytes <= maxBytesPerClient)
  }
  /** Whether one more filter of `bytes` fits with room for every cursor to grow to its most. */
  const roomFor = (bytes: number) =>
    whenFull === 'evict' || (filters.size < max && filters.calculatedSize + bytes + MAX_CURSOR_BYTES * (filters.size + 1) <= maxBytes)
  return {
    install(id: string, filter: StoredFilter, owner: string | null = null): boolean {
      const criteriaBytes = filter.criteria === null ? 0 : JSON.stringify(filter.criteria).length
      const bytes = FILTER_OVERHEAD_BYTES + criteriaBytes
      if (!withinShare(owner, bytes) || !roomFor(bytes)) {
        // Expired filters still count until something purges them.
        filters.purgeStale()
        if (!withinShare(owner, bytes) || !roomFor(bytes)) return false
      }
      if (owner !== null) {
        const holding = held.get(owner) ?? { count: 0, bytes: 0 }
        holding.count++
        holding.bytes += bytes
        held.set(owner, holding)
        charges.set(id, { owner, bytes })
      }
      filters.set(id, { filter, criteriaBytes })
      return true
    },
    get: (id: string): StoredFilter | null => filters.get(id)?.filter ?? null,
    advance(id: string, from: FilterCursor, to: FilterCursor): boolean {
      const entry = filters.get(id)
      if (entry === undefined || !sameCursor(entry.filter.cursor, from)) return false
      filters.set(id, { filter: { ...entry.filter, cursor: to }, criteriaBytes: entry.criteriaBytes })
      return true
    },
    remove: (id: string): boolean => filters.delete(id),
    get size() {
      return filters.size
    },
    /** What `owner` holds now: filters and counted bytes. */
    heldBy(owner: string): { count: number; bytes: number } {
      return { ...(held.get(owner) ?? { count: 0, bytes: 0 }) }
    },
  }
}

export type MemoryFilterStore = ReturnType<typeof createMemoryFilterStore>

function asyncStore(memory: MemoryFilterStore): FilterStore {
  return {
    install: async (id, filter, owner) => memory.install(id, filter, owner),
    get: async (id) => memory.get(id),
    advance: async (id, from, to) => memory.advance(id, from, to),
    remove: async (id) => memory.remove(id),
  }
}

/** A worker's view of its primary's store. */
function clusterStore(link: ClusterLink): FilterStore {
  return {
    install: (id, filter, owner) => link.request('filterInstall', id, filter, owner),
    get: (id) => link.request('filterGet', id),
    advance: (id, from, to) => link.request('filterAdvance', id, from, to),
    remove: (id) => link.request('filterRemove', id),
  }
}

/** Moves `c` only while it still holds the expected cursor, and restarts the filter's timeout. */
const ADVANCE_SCRIPT = `if redis.call('HGET', KEYS[1], 'c') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'c', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0`

/**
 * Filters in Redis, one hash per filter (`f`: kind and criteria, `c`: the cursor), expiring as in memory.
 * This process keeps a copy of each filter it installed or polled, so that while Redis fails its polls go on
 * from where they were (a filter only other processes polled is not found here meanwhile, and clients
 * install it again, as after a node restart). A filter installed or moved while Redis failed is this
 * process's until Redis answers again; its next poll then writes it back to Redis, cursor and all, so that
 * a poll after the outage neither repeats what was delivered during it nor loses the filter.
 */
function redisStore(redis: SharedRedis, timeoutMs: number): FilterStore {
  const local = createMemoryFilterStore({ timeoutMs, whenFull: 'evict' })
  /** Filters whose newest state is the local copy (installed or moved while Redis failed). */
  const diverged = new Set<string>()
  const key = (id: string) => redis.key(`filter:${id}`)
  async function write(id: string, filter: StoredFilter) {
    await redis.client
      .multi()
      .hset(key(id), 'f', JSON.stringify({ kind: filter.kind, criteria: filter.criteria }), 'c', JSON.stringify(filter.cursor))
      .pexpire(key(id), timeoutMs)
      .exec()
  }
  const keepLocally = <result>(id: string, result: result) => {
    diverged.add(id)
    return result
  }
  return {
    // A client's share is counted by each process for the filters installed through it (Redis keeps no count).
    install: async (id, filter, owner) => {
      if (!local.install(id, filter, owner)) return false
      return redis.attempt(
        'filters',
        async () => {
          await write(id, filter)
          return true
        },
        () => keepLocally(id, true),
      )
    },
    get: (id) => {
      const copy = local.get(id)
      if (diverged.has(id)) {
        if (copy === null) {
          diverged.delete(id)
          return Promise.resolve(null)
        }
        return redis.attempt(
          'filters',
          async () => {
            await write(id, copy)
            diverged.delete(id)
            return copy
          },
          () => copy,
        )
      }
      return redis.attempt(
        'filters',
        async () => {
          const [[, values], [, extended]] = (await redis.client.multi().hmget(key(id), 'f', 'c').pexpire(key(id), timeoutMs).exec()) as [
            [unknown, (string | null)[]],
            [unknown, number],
          ]
          const [definition, cursor] = values
          if (extended !== 1 || definition == null || cursor == null) {
            local.remove(id)
            return null
          }
          const { kind, criteria } = JSON.parse(definition) as Omit<StoredFilter, 'cursor'>
          const filter = { kind, criteria, cursor: JSON.parse(cursor) as FilterCursor }
          local.install(id, filter)
          return filter
        },
        () => copy,
      )
    },
    advance: (id, from, to) => {
      if (diverged.has(id)) return Promise.resolve(local.advance(id, from, to))
      return redis.attempt(
        'filters',
        async () => {
          const moved = (await redis.client.eval(ADVANCE_SCRIPT, 1, key(id), JSON.stringify(from), JSON.stringify(to), timeoutMs)) === 1
          if (moved) local.advance(id, from, to)
          return moved
        },
        () => (local.advance(id, from, to) ? keepLocally(id, true) : false),
      )
    },
    remove: (id) => {
      diverged.delete(id)
      const removed = local.remove(id)
      return redis.attempt(
        'filters',
        async () => (await redis.client.del(key(id))) === 1 || removed,
        () => removed,
      )
    },
  }
}

/** The deployment's store: Redis when configured, else the primary's for a worker, else this process's memory. */
export function createFilterStore({
  redis = null,
  cluster = null,
  timeoutMs = FILTER_TIMEOUT_MS,
}: {
  redis?: SharedRedis | null
  cluster?: ClusterLink | null
  timeoutMs?: number
}): FilterStore {
  if (redis !== null) return redisStore(redis, timeoutMs)
  if (cluster !== null) return clusterStore(cluster)
  return asyncStore(createMemoryFilterStore({ timeoutMs }))
}
