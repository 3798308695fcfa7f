import DataLoader from 'dataloader'
import { BATCH_PER_TURN } from './batching.js'
import { sql } from 'drizzle-orm'
import type { Address, Hex } from 'viem'
import { type BlockSelector, toQuantity } from '../codecs/index.js'
import { arrayLiteral, type Db, hexToBytea, renderStatement, schema } from '../db/index.js'
import { HeaderNotFoundError, UpstreamError } from '../errors.js'
import { LRUCache } from 'lru-cache'
import { type ForwardedTransactions, nonceAfter, type PendingBlock } from '../pending/index.js'
import type { History } from './history.js'
import type { Upstream } from '../upstream/index.js'
import { ANSWER_BYTES, type AnswerCache } from './cache.js'
import type { ChainState } from './chain.js'
import { isPendingTag, type PendingView } from './pending.js'

export type AccountState = { balance: bigint; nonce: bigint }
export type AccountParameters = { address: Address; block: BlockSelector }

/**
 * An account's balance and nonce changes are read whole, once, when there are at most this many: then any
 * indexed height below the head they were read at is answered from memory (an indexer walking an account's
 * history, a wallet polling old blocks). Busier accounts are read per block.
 */
const MAX_HISTORY_CHANGES = 4_096
/** An address as a batched read names it: 40 hex digits, no prefix. */
const ADDRESS_HEX = /^[0-9a-f]{40}$/
/** Memory one change takes in a cached history, for the answer cache's bound. */
const HISTORY_BYTES_PER_CHANGE = 80

/**
 * Every change of one account, as read when the index's head was `upTo`: the blocks that changed it, the
 * state after each, and the state before the first.
 */
type AccountHistory = { upTo: number; blocks: number[]; after: AccountState[]; first: AccountState | null }

/** The state at `number` (at most `history.upTo`), as `fromChanges` below would read it; `null` if it never changed. */
function stateAt(history: AccountHistory, number: number): AccountState | null {
  const { blocks } = history
  // The last change at or before `number`, by binary search.
  let low = 0
  let high = blocks.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (blocks[middle]! <= number) low = middle + 1
    else high = middle
  }
  // None at or before it: the state before the first change, if there is one.
  return low > 0 ? history.after[low - 1]! : history.first
}

/**
 * Balance and nonce at a block, from `account_changes` (written from `prestateTracer` diffs):
 * the latest change at or before the block, else the "before" values of the first change after it.
 * An account the index never saw change is read once from the upstream and cached, since its state is the
 * same at every indexed height; without tracing, every read goes through the cache to the upstream.
 */
const LATEST: BlockSelector = { kind: 'tag', tag: 'latest' }
/** Upstream reads of past state kept in memory (~200 bytes each). */
const MAX_UPSTREAM_READS = 100_000
/** Upstream pending reads kept (one per account and pending version), and for how long at most. */
const UPSTREAM_PENDING_READS = 10_000
const UPSTREAM_PENDING_TTL_MS = 1_000

const changes = schema.accountChanges
/**
 * Each (address, block) asked for, by its position in the arrays: the account's balance and nonce after its
 * latest change at or before the block, else the "before" values of its first change after it. Rendered
 * once: it runs for every batch of account reads.
 */
const CHANGED_STATE = renderStatement(sql`
  select asked.position::text as position, found.balance, found.nonce
  from unnest(${''}::text[], ${''}::bigint[]) with ordinality as asked(address, number, position)
  cross join lateral (
    (select ${changes.balance}::text as balance, ${changes.nonce}::text as nonce, 0 as side
      from ${changes}
      where ${changes.address} = decode(asked.address, 'hex') and ${changes.blockNumber} <= asked.number
      order by ${changes.blockNumber} desc limit 1)
    union all
    (select ${changes.balanceBefore}::text, ${changes.nonceBefore}::text, 1
      from ${changes}
      where ${changes.address} = decode(asked.address, 'hex') and ${changes.blockNumber} > asked.number
      order by ${changes.blockNumber} asc limit 1)
    order by side limit 1
  ) as found`)

export function createAccountResolvers({
  db,
  chain,
  upstream,
  cache,
  pendingView,
  forwarded,
  history,
}: {
  db: Db
  chain: ChainState
  upstream: Upstream | null
  cache: AnswerCache
  pendingView: PendingView
  /** Transactions forwarded (by this process, or by any with Redis) that no flashblock has shown yet: their nonces count as pending. */
  forwarded: ForwardedTransactions | null
  /** Refuses state below the index when the operator chose `--history refuse`. */
  history: History
}) {
  // Upstream reads of state the index does not hold (see readThrough), forgotten on a reorg.
  const upstreamReads = new LRUCache<string, AccountState>({ max: MAX_UPSTREAM_READS })
  const unchangedReads = new LRUCache<Address, { blockNumber: number; state: AccountState }>({ max: MAX_UPSTREAM_READS })
  const upstreamPendingReads = new LRUCache<string, Promise<AccountState>>({ max: UPSTREAM_PENDING_READS, ttl: UPSTREAM_PENDING_TTL_MS })
  let generation = 0
  cache.onClear(() => {
    generation++
    upstreamReads.clear()
    unchangedReads.clear()
    // The upstream's pending nonce is a floor under ours: read before a reorg, it still counts the replaced
    // blocks' transactions (its key, the pending version, is the same when no flashblock is pending).
    upstreamPendingReads.clear()
  })
  async function blockNumberFor(selector: BlockSelector): Promise<{ number: number; indexed: boolean }> {
    const resolved = await chain.resolve(selector)
    switch (resolved.status) {
      case 'known':
        return { number: resolved.number, indexed: true }
      case 'beforeIndex':
        // The "before" values of the first indexed block describe the state at the block preceding it;
        // older state is read through to the upstream, unless the operator refuses history.
        if (resolved.number === resolved.firstBlock - 1) return { number: resolved.number, indexed: true }
        if (history.mode === 'refuse') throw history.refusal(resolved.firstBlock)
        return { number: resolved.number, indexed: false }
      case 'beyondHead':
        throw new HeaderNotFoundError(describeBlock(selector))
      case 'unknownHash': {
        // A canonical block below the index, by its hash: its state is the upstream's, as by its number.
        const older = selector.kind === 'hash' ? await history.canonicalNumberOf(selector.hash) : null
        if (older !== null) return { number: older, indexed: false }
        throw new HeaderNotFoundError(describeBlock(selector))
      }
      case 'unavailable':
        throw new HeaderNotFoundError(resolved.tag)
    }
  }

  /**
   * Balance and nonce of the accounts asked for at the same moment (one event-loop turn), in one query: the
   * latest change of each at or before its block, else the "before" values of its first change after it.
   * Under concurrent load a round trip and a statement then serve several requests, as for receipts
   * (resolvers/receipts.ts). Nothing is kept between batches: that is the answer cache's job.
   */
  const changedState = new DataLoader<string, AccountState | null>(async (keys) => {
    const addresses: string[] = []
    const numbers: number[] = []
    for (const key of keys) {
      const [address, number] = key.split(':') as [string, string]
      addresses.push(address)
      numbers.push(Number(number))
    }
    // Two parameters, array literals (the client sends no array types), so that the statement text is the
    // same for any batch; the addresses are checked hex (the key is made below from a validated address).
    if (!addresses.every((address) => ADDRESS_HEX.test(address)) || !numbers.every(Number.isSafeInteger))
      throw new TypeError('account reads need addresses and whole block numbers')
    const rows = await db.query<{ position: string; balance: string; nonce: string }>(
      CHANGED_STATE.withParameters(arrayLiteral(addresses), arrayLiteral(numbers)),
    )
    const states: (AccountState | null)[] = keys.map(() => null)
    for (const row of rows) states[Number(row.position) - 1] = { balance: BigInt(row.balance), nonce: BigInt(row.nonce) }
    return states
  }, BATCH_PER_TURN)

  function fromChanges(address: Address, blockNumber: number): Promise<AccountState | null> {
    return changedState.load(`${address.slice(2).toLowerCase()}:${blockNumber}`)
  }

  /** A remembered upstream read at exactly `blockNumber`, or with `{ atOrAfter }` at any height from there on. */
  function fromCache(address: Address, at: number | { atOrAfter: number }): AccountState | null {
    if (typeof at === 'number') return upstreamReads.get(`${address}:${at}`) ?? null
    const read = unchangedReads.get(address)
    return read !== undefined && read.blockNumber >= at.atOrAfter ? read.state : null
  }

  /**
   * Reads state the index does not hold from the upstream and remembers it in memory (never in the
   * database: a serving process writes nothing, and may read from a replica), until a reorg.
   */
  async function readThrough(address: Address, blockNumber: number): Promise<AccountState> {
    if (upstream === null) throw new UpstreamError('account state not indexed and no upstream configured')
    // A read that started before a reorg is answered but not remembered after it.
    const readsGeneration = generation
    const block = toQuantity(blockNumber)
    let balance: Hex
    let nonce: Hex
    try {
      ;[balance, nonce] = await Promise.all([
        upstream.request<Hex>('eth_getBalance', [address, block]),
        upstream.request<Hex>('eth_getTransactionCount', [address, block]),
      ])
    } catch (error) {
      throw new UpstreamError('upstream state read failed', { cause: error })
    }
    const state = { balance: BigInt(balance), nonce: BigInt(nonce) }
    if (generation === readsGeneration) {
      upstreamReads.set(`${address}:${blockNumber}`, state)
      const unchanged = unchangedReads.get(address)
      if (unchanged === undefined || unchanged.blockNumber < blockNumber) unchangedReads.set(address, { blockNumber, state })
    }
    return state
  }

  /**
   * The upstream's own `pending` balance and nonce, asked once per account and pending version (a
   * flashblock applied or receipts arrived changes the version, so the answer is never stale).
   */
  async function upstreamPending(address: Address, version: string): Promise<AccountState> {
    if (upstream === null) throw new UpstreamError('no upstream configured')
    const key = `${address}:${version}`
    let read = upstreamPendingReads.get(key)
    if (read === undefined) {
      read = Promise.all([
        upstream.request<Hex>('eth_getBalance', [address, 'pending']),
        upstream.request<Hex>('eth_getTransactionCount', [address, 'pending']),
      ]).then(([balance, nonce]) => ({ balance: BigInt(balance), nonce: BigInt(nonce) }))
      upstreamPendingReads.set(key, read)
      read.catch(() => upstreamPendingReads.delete(key))
    }
    return read
  }

  /**
   * `pending`: the nonce after the account's pre-confirmed transactions and after those this process
   * forwarded and no flashblock has shown yet (so a sender firing transactions every few milliseconds never
   * leaves a gap, nor reuses a nonce), never below the upstream's own pending count. The balance: what a
   * legacy feed reported; otherwise the flashblocks-aware upstream's pending state (a frames-only upstream's
   * own `pending`), which covers accounts reached by internal calls too. When only the nonce is wanted
   * (`eth_getTransactionCount`), an upstream that fails leaves the frames' count: a wallet can still send.
   */
  /** The account's nonce after the sealed chain and its pre-confirmed blocks, with what they hold of it. */
  async function preConfirmed(address: Address): Promise<{ confirmed: AccountState; blocks: PendingBlock[]; nonce: bigint }> {
    const [blocks, confirmed] = await Promise.all([pendingView.blocks(), getAccount({ address, block: LATEST })])
    let nonce = confirmed.nonce
    for (const block of blocks) {
      // Its own sends, and the EIP-7702 authorizations it signed (a delegation moves its nonce too).
      for (const transaction of block.transactions) nonce = nonceAfter(address, nonce, transaction)
      // A contract a pre-confirmed transaction created starts at nonce 1 (EIP-161).
      if (nonce === 0n && block.receipts.some((receipt) => receipt?.contractAddress === address && receipt.status === '0x1')) nonce = 1n
    }
    return { confirmed, blocks, nonce }
  }

  async function pendingAccount(address: Address, wants: 'account' | 'nonce' = 'account'): Promise<AccountState> {
    const found = await preConfirmed(address)
    const { confirmed, blocks } = found
    let nonce = found.nonce
    if (forwarded !== null) nonce = await forwarded.nextNonce(address, nonce)
    const newest = blocks.at(-1)
    const version = newest === undefined ? 'none' : `${newest.number}:${newest.lastIndex}:${newest.version}`
    const fromFeed = blocks.length > 0 && blocks.every((block) => block.reportsBalances)
    let balance = confirmed.balance
    if (fromFeed) {
      for (const block of blocks.toReversed()) {
        const reported = block.balances.get(address)
        if (reported !== undefined) {
          balance = reported
          break
        }
      }
    }
    if (upstream === null) return { balance, nonce }
    if (blocks.length > 0 && !fromFeed) {
      let upstreamState: AccountState
      try {
        upstreamState = await upstreamPending(address, version)
      } catch (error) {
        if (wants === 'nonce') return { balance, nonce }
        throw new UpstreamError('upstream pending balance read failed', { cause: error })
      }
      return { balance: upstreamState.balance, nonce: nonce > upstreamState.nonce ? nonce : upstreamState.nonce }
    }
    // The nonce alone: the upstream may know of transactions sent elsewhere that no flashblock shows yet.
    const upstreamNonce = await upstreamPending(address, version).then(
      (state) => state.nonce,
      () => nonce,
    )
    return { balance, nonce: nonce > upstreamNonce ? nonce : upstreamNonce }
  }

  async function getAccount({ address, block }: AccountParameters): Promise<AccountState> {
    if (isPendingTag(block)) return pendingAccount(address)
    const { number, indexed } = await blockNumberFor(block)
    // An account's whole history pays off only when it is kept: without an answer cache, one probe per read.
    if (indexed && cache.enabled && (await chain.view()).accountSource === 'trace') {
      const history = await accountHistory(address)
      if (history !== null && number <= history.upTo) {
        const state = stateAt(history, number)
        if (state !== null) return state
        // Never changed while indexed: one state stands for every indexed height up to the history's head.
        return cache.remember(
          `account-unchanged:${address}:${history.upTo}`,
          () => loadAccount(address, number, indexed),
          () => ANSWER_BYTES.account,
        )
      }
    }
    return cache.remember(
      `account:${address}:${number}`,
      () => loadAccount(address, number, indexed),
      () => ANSWER_BYTES.account,
    )
  }

  /** The account's whole history of changes (cached), or `null` when it has too many to keep. */
  async function accountHistory(address: Address): Promise<AccountHistory | null> {
    const cached = await cache.remember(
      `account-history:${address}`,
      () => loadAccountHistory(address),
      (loaded) => (loaded.history === null ? 1 : loaded.history.blocks.length * HISTORY_BYTES_PER_CHANGE),
    )
    return cached.history
  }

  async function loadAccountHistory(address: Address): Promise<{ history: AccountHistory | null }> {
    // The head first: every change at or below it is committed, so the rows below are complete up to it.
    const upTo = (await chain.view()).head?.number ?? -1
    const rows = await db.query<{ block_number: string; balance: string; nonce: string; balance_before: string; nonce_before: string }>(sql`
      select ${changes.blockNumber}::text as block_number, ${changes.balance}::text as balance, ${changes.nonce}::text as nonce,
        ${changes.balanceBefore}::text as balance_before, ${changes.nonceBefore}::text as nonce_before
      from ${changes} where ${changes.address} = ${hexToBytea(address)}
      order by ${changes.blockNumber} limit ${MAX_HISTORY_CHANGES + 1}`)
    if (rows.length > MAX_HISTORY_CHANGES) return { history: null }
    return {
      history: {
        upTo,
        blocks: rows.map((row) => Number(row.block_number)),
        after: rows.map((row) => ({ balance: BigInt(row.balance), nonce: BigInt(row.nonce) })),
        first: rows[0] === undefined ? null : { balance: BigInt(rows[0].balance_before), nonce: BigInt(rows[0].nonce_before) },
      },
    }
  }

  async function loadAccount(address: Address, number: number, indexed: boolean): Promise<AccountState> {
    const view = await chain.view()
    const traced = view.accountSource === 'trace'
    if (indexed && traced) {
      const changed = await fromChanges(address, number)
      if (changed) return changed
      // Never changed while indexed: one cached read stands for every indexed height.
      const indexedFrom = (view.firstBlock ?? 0) - 1
      return fromCache(address, { atOrAfter: indexedFrom }) ?? readThrough(address, number)
    }
    return fromCache(address, number) ?? readThrough(address, number)
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_getbalance */
  async function getBalance(parameters: AccountParameters): Promise<Hex> {
    return toQuantity((await getAccount(parameters)).balance)
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_gettransactioncount */
  async function getTransactionCount(parameters: AccountParameters): Promise<Hex> {
    const state = isPendingTag(parameters.block) ? await pendingAccount(parameters.address, 'nonce') : await getAccount(parameters)
    return toQuantity(state.nonce)
  }

  return {
    getAccount,
    getBalance,
    getTransactionCount,
    /** The nonce the sealed chain and the pre-confirmed blocks give an account: what a pool transaction below it can never take. */
    preConfirmedNonce: async (address: Address): Promise<bigint> => (await preConfirmed(address)).nonce,
  }
}

/** A block as reth writes one in `block not found: …`: its number in hex, `hash 0x…`, `canonical hash 0x…`, or a tag. */
function describeBlock(selector: BlockSelector): string {
  if (selector.kind === 'number') return `0x${selector.number.toString(16)}`
  if (selector.kind === 'hash') return `${selector.requireCanonical ? 'canonical hash' : 'hash'} ${selector.hash}`
  return selector.tag
}
