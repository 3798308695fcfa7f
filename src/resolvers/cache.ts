import { LRUCache } from 'lru-cache'

/** Default memory for cached answers, per serving process. */
export const DEFAULT_ANSWER_CACHE_BYTES = 64 * 1024 * 1024

/**
 * Answers for a block the index holds never change until a reorg replaces that block, so each resolver
 * caches what it computed for a concrete block number (never for a tag), and the whole cache is dropped
 * when the chain reorganises (see `ChainState`: the ingester's event in-process, the `reorg_epoch` counter
 * for other processes). Bounded by an estimate of the bytes each answer takes.
 */
export function createAnswerCache({ maxBytes = DEFAULT_ANSWER_CACHE_BYTES }: { maxBytes?: number } = {}) {
  // `--answer-cache-mb 0`: nothing is kept (lru-cache needs a positive size).
  const store =
    maxBytes > 0 ? new LRUCache<string, { value: unknown; bytes: number }>({ maxSize: maxBytes, sizeCalculation: (entry) => Math.max(1, entry.bytes) }) : null

  // Bumped by `clear`, so that an answer computed before a reorg is not stored after it.
  let generation = 0
  const clearListeners: (() => void)[] = []

  return {
    /**
     * Returns the cached answer for `key`, or computes, caches and returns it. `null` answers are not
     * cached (a transaction unknown now may be indexed a moment later). Cached values are shared: read-only.
     */
    async remember<value>(key: string, compute: () => Promise<value>, bytes: (value: value) => number): Promise<value> {
      if (store === null) return compute()
      const hit = store.get(key)
      if (hit !== undefined) return hit.value as value
      const startedAt = generation
      const value = await compute()
      if (value !== null && startedAt === generation) store.set(key, { value, bytes: bytes(value) + key.length })
      return value
    },
    clear() {
      generation++
      store?.clear()
      for (const listener of clearListeners) listener()
    },
    /** Calls `listener` on each `clear`: for caches of their own that a reorg must empty too. */
    onClear(listener: () => void) {
      clearListeners.push(listener)
    },
    /** `false` with `--answer-cache-mb 0`: nothing computed is kept, so callers should not compute more than one answer needs. */
    get enabled() {
      return store !== null
    },
    get size() {
      return store?.size ?? 0
    },
    /** The memory it may take (`--answer-cache-mb`). */
    maxBytes,
  }
}

export type AnswerCache = ReturnType<typeof createAnswerCache>

/** Rough JSON sizes, enough to bound memory without serialising anything. */
export const ANSWER_BYTES = { account: 120, log: 700, transaction: 900, header: 1_600 } as const
