import { and, eq, gte, sql } from 'drizzle-orm'
import type { Address, Hex } from 'viem'
import { type BlockSelector, toQuantity } from '../codecs/index.js'
import { type Db, hexToBytea, schema } from '../db/index.js'
import { HeaderNotFoundError, UpstreamError } from '../errors.js'
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

export function createAccountResolvers({
  db,
  chain,
  upstream,
  cache,
  pendingView,
}: { db: Db; chain: ChainState; upstream: Upstream | null; cache: AnswerCache; pendingView: PendingView }) {
  async function blockNumberFor(selector: BlockSelector): Promise<{ number: number; indexed: boolean }> {
    const resolved = await chain.resolve(selector)
    switch (resolved.status) {
      case 'known':
        return { number: resolved.number, indexed: true }
      case 'beforeIndex':
        // The "before" values of the first indexed block describe the state at the block preceding it.
        return { number: resolved.number, indexed: resolved.number === resolved.firstBlock - 1 }
      case 'beyondHead':
        throw new HeaderNotFoundError()
      case 'unknownHash':
        throw new HeaderNotFoundError('header for hash not found')
      case 'unavailable':
        throw new HeaderNotFoundError(`${resolved.tag} block not found`)
    }
  }

  async function fromChanges(address: Uint8Array, blockNumber: number): Promise<AccountState | null> {
    const rows = await db.query<{ balance: string; nonce: string }>(sql`
      (select ${schema.accountChanges.balance}::text as balance, ${schema.accountChanges.nonce}::text as nonce, 0 as side
        from ${schema.accountChanges}
        where ${schema.accountChanges.address} = ${address} and ${schema.accountChanges.blockNumber} <= ${blockNumber}
        order by ${schema.accountChanges.blockNumber} desc limit 1)
      union all
      (select ${schema.accountChanges.balanceBefore}::text, ${schema.accountChanges.nonceBefore}::text, 1
        from ${schema.accountChanges}
        where ${schema.accountChanges.address} = ${address} and ${schema.accountChanges.blockNumber} > ${blockNumber}
        order by ${schema.accountChanges.blockNumber} asc limit 1)
      order by side limit 1`)
    const row = rows[0]
    return row ? { balance: BigInt(row.balance), nonce: BigInt(row.nonce) } : null
  }

  /** A cached read at exactly `blockNumber`, or with `{ atOrAfter }` at any height from there on. */
  async function fromCache(address: Uint8Array, at: number | { atOrAfter: number }): Promise<AccountState | null> {
    const rows = await db.drizzle
      .select({ balance: schema.accountReads.balance, nonce: schema.accountReads.nonce })
      .from(schema.accountReads)
      .where(
        and(
          eq(schema.accountReads.address, address),
          typeof at === 'number' ? eq(schema.accountReads.blockNumber, at) : gte(schema.accountReads.blockNumber, at.atOrAfter),
        ),
      )
      .limit(1)
    const row = rows[0]
    return row ? { balance: BigInt(row.balance), nonce: BigInt(row.nonce) } : null
  }

  async function readThrough(address: Address, blockNumber: number): Promise<AccountState> {
    if (upstream === null) throw new UpstreamError('account state not indexed and no upstream configured')
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
    await db.drizzle
      .insert(schema.accountReads)
      .values({ address: hexToBytea(address), blockNumber, balance: state.balance.toString(), nonce: Number(state.nonce) })
      .onConflictDoNothing()
    return state
  }

  /**
   * `pending`: the nonce after the account's pre-confirmed transactions (so a sender firing transactions
   * every few milliseconds never leaves a gap), and the balance the feed last reported for it. A feed that
   * reports no balances is made up for by the upstream's own `pending` state.
   */
  async function pendingAccount(address: Address): Promise<AccountState> {
    const [blocks, confirmed] = await Promise.all([pendingView.blocks(), getAccount({ address, block: LATEST })])
    if (blocks.length === 0) return confirmed
    let nonce = confirmed.nonce
    for (const block of blocks)
      for (const transaction of block.transactions)
        if (transaction.from === address && BigInt(transaction.nonce) >= nonce) nonce = BigInt(transaction.nonce) + 1n
    for (const block of blocks.toReversed()) {
      const balance = block.balances.get(address)
      if (balance !== undefined) return { balance, nonce }
    }
    if (blocks.every((block) => block.reportsBalances) || upstream === null) return { balance: confirmed.balance, nonce }
    try {
      return { balance: BigInt(await upstream.request<Hex>('eth_getBalance', [address, 'pending'])), nonce }
    } catch (error) {
      throw new UpstreamError('upstream pending balance read failed', { cause: error })
    }
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
        return cache.remember(`account-unchanged:${address}:${history.upTo}`, () => loadAccount(address, number, indexed), () => ANSWER_BYTES.account)
      }
    }
    return cache.remember(`account:${address}:${number}`, () => loadAccount(address, number, indexed), () => ANSWER_BYTES.account)
  }

  /** The account's whole history of changes (cached), or `null` when it has too many to keep. */
  async function accountHistory(address: Address): Promise<AccountHistory | null> {
    const cached = await cache.remember(`account-history:${address}`, () => loadAccountHistory(address), (loaded) =>
      loaded.history === null ? 1 : loaded.history.blocks.length * HISTORY_BYTES_PER_CHANGE,
    )
    return cached.history
  }

  async function loadAccountHistory(address: Address): Promise<{ history: AccountHistory | null }> {
    // The head first: every change at or below it is committed, so the rows below are complete up to it.
    const upTo = (await chain.view()).head?.number ?? -1
    const changes = schema.accountChanges
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
    const key = hexToBytea(address)
    const traced = view.accountSource === 'trace'
    if (indexed && traced) {
      const changed = await fromChanges(key, number)
      if (changed) return changed
      // Never changed while indexed: one cached read stands for every indexed height.
      const indexedFrom = (view.firstBlock ?? 0) - 1
      return (await fromCache(key, { atOrAfter: indexedFrom })) ?? readThrough(address, number)
    }
    return (await fromCache(key, number)) ?? readThrough(address, number)
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_getbalance */
  async function getBalance(parameters: AccountParameters): Promise<Hex> {
    return toQuantity((await getAccount(parameters)).balance)
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_gettransactioncount */
  async function getTransactionCount(parameters: AccountParameters): Promise<Hex> {
    return toQuantity((await getAccount(parameters)).nonce)
  }

  return { getAccount, getBalance, getTransactionCount }
}
