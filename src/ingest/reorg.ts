import type { Logger } from 'pino'
import { SYNC_KEYS } from '../db/index.js'
import type { BlockFetcher } from './fetch-block.js'
import type { Store, StoredHead } from './store.js'

/** Blocks compared per round trip while looking for the common ancestor of a reorg. */
const REORG_PROBE_BATCH = 16

export type Rewind = {
  /** The highest stored block the upstream still has; `firstBlock - 1` when it has none of them. */
  ancestor: number
  /** The first block of the index. */
  firstBlock: number
  removedLogs: number
}

/** A common ancestor found, whose rewind goes with the write of the new branch's first blocks (ingest/index.ts). */
export type DeferredRewind = { ancestor: number; ancestorHash: string; from: number }

/** Walks back from the stored head until the upstream agrees on a block hash: the common ancestor, nothing deleted. */
export async function findCommonAncestor(
  { store, fetcher }: { store: Store; fetcher: BlockFetcher },
  head: StoredHead,
): Promise<{ ancestor: number; ancestorHash: string | null; firstBlock: number }> {
  const state = await store.syncState()
  const firstBlock = (state.get(SYNC_KEYS.firstBlock) as number | undefined) ?? 0
  for (let top = head.number; top >= firstBlock; top -= REORG_PROBE_BATCH) {
    const bottom = Math.max(firstBlock, top - REORG_PROBE_BATCH + 1)
    const [stored, upstreamHeaders] = await Promise.all([
      store.hashesFrom(bottom, top),
      Promise.all(Array.from({ length: top - bottom + 1 }, (_, index) => fetcher.fetchHeader(top - index))),
    ])
    for (const header of upstreamHeaders) {
      if (header === null) continue
      const number = Number.parseInt(header.number, 16)
      if (stored.get(number) === header.hash) return { ancestor: number, ancestorHash: header.hash, firstBlock }
    }
  }
  return { ancestor: firstBlock - 1, ancestorHash: null, firstBlock }
}

/**
 * Walks back from the stored head until the upstream agrees on a block hash, and deletes everything above
 * that common ancestor in one transaction.
 */
export async function rewindToCommonAncestor(
  { store, fetcher, logger }: { store: Store; fetcher: BlockFetcher; logger: Logger },
  head: StoredHead,
): Promise<Rewind> {
  const { ancestor, firstBlock } = await findCommonAncestor({ store, fetcher }, head)
  const removedLogs = await store.rewindTo(ancestor)
  logger.warn({ from: head.number, ancestor, removedLogs }, 'chain reorganisation')
  return { ancestor, firstBlock, removedLogs }
}
