import type { RegistryProgress } from '../attribution/registry.js'
import DataLoader from 'dataloader'
import { desc, inArray, sql } from 'drizzle-orm'
import type { Hash } from 'viem'
import { type BlockSelector, isHashText } from '../codecs/index.js'
import { byteaArrayLiteral, byteaToHex, type Db, hexToBytea, renderStatement, SYNC_KEYS, schema } from '../db/index.js'
import { BATCH_PER_TURN } from './batching.js'

/** How long a serving process trusts its view of the head before asking the database again. */
const HEAD_CACHE_MS = 100

export type BlockRef = { number: number; hash: Hash; timestamp: number }

export type ChainView = {
  chainId: number | null
  /** First block the index holds; `null` before the first block is written. */
  firstBlock: number | null
  head: BlockRef | null
  safe: number | null
  finalized: number | null
  /** `trace` when `account_changes` are complete for the indexed range (see resolvers/accounts.ts). */
  accountSource: 'trace' | 'read-through'
  /** Bumped by each reorg the ingester undoes. */
  reorgEpoch: number
  /** The on-chain Builder Codes registry followed, and how much of it below the index is read; `null` for none. */
  registry: RegistryProgress | null
}

/**
 * The blocks the index holds, first to head, as of the last view loaded. `current` while that view is the one
 * `view()` would answer now without loading (so `latest` is `head` for every resolver too).
 */
export type IndexedRange = { first: number; head: number; current: boolean }

export type ChainState = {
  view(): Promise<ChainView>
  /**
   * The indexed range of the last view loaded, without waiting (it lags the database by up to a moment, and
   * starts a load when it is older than that); `null` before the first load.
   */
  indexed(): IndexedRange | null
  /** Forget the cached view: the ingester calls this after each commit and after a reorg. */
  invalidate(): void
  /** Resolves a tag, number or EIP-1898 hash to a block number the index holds, or `null`. */
  resolve(selector: BlockSelector): Promise<ResolvedBlock>
  blockByHash(hash: Hash): Promise<BlockRef | null>
}

/**
 * `known`: the index holds it. `beyondHead`: a number above the indexed head. `unknownHash`: no block with
 * that hash. `unavailable`: the tag has no block yet (empty index, or no safe/finalized from upstream).
 * `beforeIndex`: below the first indexed block.
 */
export type ResolvedBlock =
  | { status: 'known'; number: number }
  | { status: 'beyondHead'; number: number; head: number | null }
  | { status: 'beforeIndex'; number: number; firstBlock: number }
  | { status: 'unknownHash' }
  | { status: 'unavailable'; tag: string }

/**
 * Blocks' numbers and times by their hashes (one parameter, a `bytea[]` literal, so that the text is the same
 * for any batch), rendered once: built with the query builder per call, it cost more of the gateway's time than
 * Postgres took to answer (every `eth_getLogs` by block hash asks it).
 */
const BLOCKS_BY_HASH = renderStatement(
  sql`select ${schema.blocks.number} as number, ${schema.blocks.hash} as hash, ${schema.blocks.timestamp} as timestamp
        from ${schema.blocks} where ${schema.blocks.hash} = any(${''}::bytea[])`,
)

/** A failed load is handled where it is awaited (and forgotten by `view`). */
const ignoreFailure = () => undefined

export function createChainState({ db, onReorg }: { db: Db; onReorg(): void }): ChainState {
  let cached: { at: number; view: Promise<ChainView> } | null = null
  let reorgEpoch: unknown
  // The last view loaded, with the load it came from.
  let settled: { view: ChainView; load: Promise<ChainView> } | null = null

  async function load(): Promise<ChainView> {
    const [headRows, stateRows] = await Promise.all([
      db.drizzle
        .select({ number: schema.blocks.number, hash: schema.blocks.hash, timestamp: schema.blocks.timestamp })
        .from(schema.blocks)
        .orderBy(desc(schema.blocks.number))
        .limit(1),
      db.drizzle
        .select()
        .from(schema.syncState)
        .where(inArray(schema.syncState.key, Object.values(SYNC_KEYS))),
    ])
    const state = new Map(stateRows.map((row) => [row.key, row.value as number | null]))
    const accountSource = stateRows.find((row) => row.key === SYNC_KEYS.accountSource)?.value
    const epoch = stateRows.find((row) => row.key === SYNC_KEYS.reorgEpoch)?.value ?? 0
    if (reorgEpoch !== undefined && epoch !== reorgEpoch) onReorg()
    reorgEpoch = epoch
    const headRow = headRows[0]
    const head = headRow ? { number: headRow.number, hash: byteaToHex(headRow.hash), timestamp: headRow.timestamp } : null
    const capped = (value: number | null | undefined) => (value === null || value === undefined || head === null ? null : Math.min(value, head.number))
    return {
      chainId: state.get(SYNC_KEYS.chainId) ?? null,
      firstBlock: state.get(SYNC_KEYS.firstBlock) ?? null,
      head,
      safe: capped(state.get(SYNC_KEYS.safe)),
      finalized: capped(state.get(SYNC_KEYS.finalized)),
      accountSource: accountSource === 'trace' ? 'trace' : 'read-through',
      reorgEpoch: Number(epoch),
      registry: (stateRows.find((row) => row.key === SYNC_KEYS.builderCodeRegistry)?.value as RegistryProgress | null | undefined) ?? null,
    }
  }

  function view(): Promise<ChainView> {
    const now = Date.now()
    if (cached === null || now - cached.at > HEAD_CACHE_MS) {
      const pending = load()
      cached = { at: now, view: pending }
      pending.then((value) => {
        settled = { view: value, load: pending }
      }, ignoreFailure)
      // A failed load must not be remembered.
      pending.catch(() => {
        if (cached?.view === pending) cached = null
      })
    }
    return cached.view
  }

  /**
   * Blocks asked for by hash at the same moment (one event-loop turn), in one statement: every ethers and viem
   * client polls the newest block's logs by its hash, each with its own filter. Nothing is kept between batches:
   * a hash a reorg undid must not be found a moment later.
   */
  const blocksByHash = new DataLoader<Hash, BlockRef | null>(async (hashes) => {
    const rows = await db.query<{ number: number | string; hash: Uint8Array; timestamp: number | string }>(
      // Only well-formed hashes go in the literal: one that is not would fail the statement for the whole batch.
      BLOCKS_BY_HASH.withParameters(byteaArrayLiteral([...new Set(hashes.filter(isHashText))].map(hexToBytea))),
    )
    const byHash = new Map(rows.map((row) => [byteaToHex(row.hash), row]))
    return hashes.map((hash) => {
      const row = byHash.get(hash.toLowerCase() as Hash)
      return row === undefined ? null : { number: Number(row.number), hash, timestamp: Number(row.timestamp) }
    })
  }, BATCH_PER_TURN)

  function blockByHash(hash: Hash): Promise<BlockRef | null> {
    return blocksByHash.load(hash)
  }

  async function resolve(selector: BlockSelector): Promise<ResolvedBlock> {
    if (selector.kind === 'hash') {
      const block = await blockByHash(selector.hash)
      return block ? { status: 'known', number: block.number } : { status: 'unknownHash' }
    }
    const current = await view()
    const head = current.head?.number ?? null
    let number: number | null
    if (selector.kind === 'number') {
      if (selector.number > BigInt(Number.MAX_SAFE_INTEGER)) return { status: 'beyondHead', number: Number.MAX_SAFE_INTEGER, head }
      number = Number(selector.number)
    } else {
      switch (selector.tag) {
        case 'earliest':
          number = 0
          break
        case 'latest':
        case 'pending':
          number = head
          break
        case 'safe':
          number = current.safe
          break
        case 'finalized':
          number = current.finalized
          break
      }
      if (number === null) return { status: 'unavailable', tag: selector.tag }
    }
    if (head === null || number > head) return { status: 'beyondHead', number, head }
    if (current.firstBlock !== null && number < current.firstBlock) return { status: 'beforeIndex', number, firstBlock: current.firstBlock }
    return { status: 'known', number }
  }

  return {
    view,
    indexed() {
      // Callers that answer without a view of their own (the JSON-RPC memo) still keep it fresh: one load
      // per HEAD_CACHE_MS at most, not awaited (the range of the last load is answered meanwhile).
      const fresh = cached !== null && Date.now() - cached.at <= HEAD_CACHE_MS
      if (!fresh) void view()
      if (settled === null || settled.view.head === null) return null
      return { first: settled.view.firstBlock ?? 0, head: settled.view.head.number, current: fresh && cached?.view === settled.load }
    },
    invalidate() {
      cached = null
    },
    resolve,
    blockByHash,
  }
}
