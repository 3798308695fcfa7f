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
    /** What it holds now: entries, and the bytes they are counted as. */
    figures: () => ({ entries: store?.size ?? 0, bytes: store?.calculatedSize ?? 0 }),
    /** The memory it may take (`--answer-cache-mb`). */
    maxBytes,
  }
}

export type AnswerCache = ReturnType<typeof createAnswerCache>

/** Rough JSON sizes of the fixed parts, enough to bound memory without serialising anything (a log's: logs.ts). */
export const ANSWER_BYTES = { account: 120, transaction: 900, header: 1_600 } as const

/**
 * A transaction's JSON, estimated: the fixed part and what grows with it (its input, access list, authorizations
 * and blob hashes), which can be a hundred times the rest.
 */
export function transactionBytes(transaction: unknown): number {
  if (typeof transaction !== 'object' || transaction === null) return ANSWER_BYTES.transaction
  const { input, accessList, authorizationList, blobVersionedHashes } = transaction as Record<string, unknown>
  let bytes = ANSWER_BYTES.transaction + (typeof input === 'string' ? input.length : 0)
  if (Array.isArray(accessList)) for (const entry of accessList) bytes += 60 + 70 * ((entry as { storageKeys?: unknown[] }).storageKeys?.length ?? 0)
  if (Array.isArray(authorizationList)) bytes += 350 * authorizationList.length
  if (Array.isArray(blobVersionedHashes)) bytes += 70 * blobVersionedHashes.length
  return bytes
}

/** A block's JSON, estimated: its header and its transactions (objects, or hashes). */
export function blockBytes(block: { transactions: readonly unknown[] } | null): number {
  let bytes = ANSWER_BYTES.header
  for (const transaction of block?.transactions ?? []) bytes += typeof transaction === 'string' ? 70 : transactionBytes(transaction)
  return bytes
}
