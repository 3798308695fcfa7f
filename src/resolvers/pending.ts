import type { Address, Hash } from 'viem'
import type { BlockSelector, LogFilter } from '../codecs/index.js'
import type { PendingBlock, PendingLog, PendingReceipt, PendingState } from '../pending/index.js'
import type { ChainState } from './chain.js'
import { countsWithdrawals, type SizeConvention } from '../objects/block.js'

const LATEST: BlockSelector = { kind: 'tag', tag: 'latest' }

export function isPendingTag(selector: BlockSelector | undefined): boolean {
  return selector?.kind === 'tag' && selector.tag === 'pending'
}

export function matchesFilter(log: { address: Address; topics: Hash[] }, filter: Pick<LogFilter, 'addresses' | 'topics'>): boolean {
  const { addresses, topics } = compiled(filter)
  if (addresses !== null && !addresses.has(log.address)) return false
  for (let position = 0; position < topics.length; position++) {
    const alternatives = topics[position]
    if (alternatives === null || alternatives === undefined) continue
    const topic = log.topics[position]
    if (topic === undefined || !alternatives.has(topic)) return false
  }
  return true
}

type CompiledFilter = { addresses: Set<string> | null; topics: (Set<string> | null)[] }
/**
 * Each filter's addresses and topic alternatives as sets, made once per filter object: a subscription or a
 * stateful filter may name 1,000 addresses and 1,000 alternatives per topic, and is matched against every log
 * of every block (scanned as lists, 100 such subscriptions took 20 s of CPU for a block of 3,000 logs).
 */
const compiledFilters = new WeakMap<object, CompiledFilter>()

function compiled(filter: Pick<LogFilter, 'addresses' | 'topics'>): CompiledFilter {
  let found = compiledFilters.get(filter)
  if (found === undefined) {
    found = {
      addresses: filter.addresses === null ? null : new Set(filter.addresses),
      topics: filter.topics.map((alternatives) => (alternatives === null ? null : new Set(alternatives))),
    }
    compiledFilters.set(filter, found)
  }
  return found
}

/**
 * A log against a subscription's criteria, as geth and reth match them: addresses and topics, and where given,
 * numbered ends of a block range (a tag leaves its end open) and a block hash.
 */
export type LogCriteria = Pick<LogFilter, 'addresses' | 'topics'> & { from: bigint | null; to: bigint | null; blockHash: Hash | null }

export function matchesCriteria(
  log: { address: Address; topics: Hash[]; blockNumber: string | null; blockHash: string | null },
  criteria: LogCriteria,
): boolean {
  if (criteria.blockHash !== null && log.blockHash !== criteria.blockHash) return false
  if (criteria.from !== null || criteria.to !== null) {
    if (log.blockNumber === null) return false
    const number = BigInt(log.blockNumber)
    if ((criteria.from !== null && number < criteria.from) || (criteria.to !== null && number > criteria.to)) return false
  }
  return matchesFilter(log, criteria)
}

/**
 * A block argument resolved once: the pre-confirmed block when it names `pending` and there is one, else a
 * selector the index answers (`pending` without pre-confirmed state reads as `latest`, DESIGN.md §3).
 */
export type ResolvedBlockArgument = { kind: 'pending'; block: PendingBlock } | { kind: 'confirmed'; selector: BlockSelector }

/**
 * A block range split where the index ends: the confirmed part (none when the range is pending only, or
 * empty) and the pre-confirmed blocks after it (none unless the range ends at `pending`, or starts there and
 * ends at a number, and there are some).
 */
export type SplitRange = { confirmed: { fromBlock: BlockSelector; toBlock: BlockSelector } | null; pending: PendingBlock[] }

/** The pre-confirmed blocks above the indexed head, as the resolvers see them. */
export function createPendingView({ chain, pending }: { chain: ChainState; pending: PendingState | null }) {
  // geth and reth count withdrawals in a block's size, anvil does not: assumed, then read off sealed blocks.
  const sizeConvention: SizeConvention = { countsWithdrawals: true }

  async function blocks(): Promise<PendingBlock[]> {
    if (pending === null) return []
    const view = await chain.view()
    return pending.blocks(view.head?.number ?? -1)
  }

  async function newest(): Promise<PendingBlock | null> {
    return (await blocks()).at(-1) ?? null
  }

  /** Receipts known so far for a pending block, in transaction order. */
  function receiptsOf(block: PendingBlock): PendingReceipt[] {
    return block.receipts.filter((receipt): receipt is PendingReceipt => receipt !== null)
  }

  return {
    blocks,
    sizeConvention,
    /** A sealed block arrived (before its pre-confirmation goes): learn from it how the node counts `size`. */
    observeSealed(sealed: Record<string, unknown>) {
      const number = Number(sealed.number)
      const pendingBlock = pending?.blocks(number - 1).find((block) => block.number === number)
      if (pendingBlock === undefined) return
      const learnt = countsWithdrawals(sealed, pendingBlock)
      if (learnt !== null) sizeConvention.countsWithdrawals = learnt
    },
    /** The newest pending block, or `null` when `pending` should answer as `latest`. */
    newest,
    /** Resolves a block argument once into the pre-confirmed block or a selector the index answers. */
    async resolve(selector: BlockSelector): Promise<ResolvedBlockArgument> {
      if (!isPendingTag(selector)) return { kind: 'confirmed', selector }
      const block = await newest()
      return block === null ? { kind: 'confirmed', selector: LATEST } : { kind: 'pending', block }
    },
    /**
     * Splits `fromBlock`–`toBlock` into the index's part and the pre-confirmed blocks (`toBlock: pending`). A
     * `fromBlock` that numbers a pre-confirmed block (a client polling from the head + 1) starts there: no
     * indexed part, and only the pre-confirmed blocks from it on; past them all, the range is the index's
     * (which refuses a start beyond its head). `fromBlock: pending` up to anything else: see below; neither
     * part (`confirmed: null`, no pending blocks) is an empty range.
     */
    async split({ fromBlock, toBlock }: { fromBlock: BlockSelector; toBlock: BlockSelector }): Promise<SplitRange> {
      if (isPendingTag(fromBlock) && !isPendingTag(toBlock)) {
        // From `pending` on, as reth and Base's node take it: up to another tag (`latest`…) is always empty;
        // up to a number, the pending block if it is not past it, or `latest` without one.
        if (toBlock.kind !== 'number') return { confirmed: null, pending: [] }
        const pendingBlock = await newest()
        if (pendingBlock !== null) return { confirmed: null, pending: BigInt(pendingBlock.number) <= toBlock.number ? [pendingBlock] : [] }
        return { confirmed: { fromBlock, toBlock }, pending: [] }
      }
      const pendingBlocks = isPendingTag(toBlock) ? await blocks() : []
      // Pending only, while the feed is followed but the next block has no flashblock yet: nothing is
      // pre-confirmed, so no logs (as Base's node answers), not `latest`'s sealed ones a second time.
      if (isPendingTag(fromBlock) && isPendingTag(toBlock) && pendingBlocks.length === 0 && pending?.following() === true)
        return { confirmed: null, pending: [] }
      if (pendingBlocks.length === 0) return { confirmed: { fromBlock, toBlock }, pending: [] }
      // `pending` as a start is the pending block alone, as everywhere else (`eth_getBlockByNumber`): not the sealed
      // blocks before it that the index has yet to take, which a node answers as sealed (by number, or `latest`).
      if (isPendingTag(fromBlock)) return { confirmed: null, pending: pendingBlocks.slice(-1) }
      if (fromBlock.kind === 'number' && fromBlock.number >= BigInt(pendingBlocks[0]!.number)) {
        const from = fromBlock.number
        const among = pendingBlocks.filter((block) => BigInt(block.number) >= from)
        return among.length === 0 ? { confirmed: { fromBlock, toBlock }, pending: [] } : { confirmed: null, pending: among }
      }
      return { confirmed: { fromBlock, toBlock: LATEST }, pending: pendingBlocks }
    },
    receiptsOf,
    /** Pre-confirmed logs of `among` (all pending blocks by default) that match, in block and log order. */
    async logs(filter: Pick<LogFilter, 'addresses' | 'topics'>, among?: PendingBlock[]): Promise<PendingLog[]> {
      const matching: PendingLog[] = []
      for (const block of among ?? (await blocks()))
        for (const receipt of receiptsOf(block)) for (const log of receipt.logs) if (matchesFilter(log, filter)) matching.push(log)
      return matching
    },
    async transaction(hash: Hash): Promise<{ block: PendingBlock; position: number } | null> {
      for (const block of await blocks()) {
        const position = block.transactions.findIndex((transaction) => transaction.hash === hash)
        if (position !== -1) return { block, position }
      }
      return null
    },
    async receipt(hash: Hash): Promise<PendingReceipt | null> {
      for (const block of await blocks()) {
        const position = block.transactions.findIndex((transaction) => transaction.hash === hash)
        if (position !== -1) return block.receipts[position] ?? null
      }
      return null
    },
  }
}

export type PendingView = ReturnType<typeof createPendingView>
