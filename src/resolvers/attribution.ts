import { type SQL, sql } from 'drizzle-orm'
import { type Address, getAddress, type Hex } from 'viem'
import type { AttributionRole } from '../attribution/decode.js'
import { type AttributedAction, attributedActions, ENTRY_POINTS, type EntryPoint } from '../attribution/user-operations.js'
import type { SeriesInterval } from '../codecs/index.js'
import { arrayLiteral, byteaToHex, type Db, schema } from '../db/index.js'
import type { PendingBlock, PendingState, PendingTransaction } from '../pending/index.js'
import type { ChainState } from './chain.js'
import { createRegistryReader, type RegistryStatus } from './registry.js'

/** Bucket width of each time-series interval, in seconds of chain time. */
export const SERIES_BUCKET_SECONDS: Record<SeriesInterval, number> = { minute: 60, hour: 3_600, day: 86_400 }
export const DEFAULT_SERIES_POINTS = 60
export const MAX_SERIES_POINTS = 1_000
export const DEFAULT_LEADERBOARD_SIZE = 20
export const MAX_LEADERBOARD_SIZE = 100

/**
 * Figures of one code over a set of transactions and user operations. Gas and wei are decimal strings
 * (they outgrow 2^53).
 */
export type AttributionFigures = {
  /** Transactions attributed by their own calldata (an EOA's, or a bundler's that carries a suffix). */
  transactions: number
  /** User operations (ERC-4337) attributed by their `callData`. */
  userOperations: number
  /** Distinct senders: the transactions' senders and the operations' smart accounts (never their bundlers). */
  reach: number
  /** Distinct smart accounts among them. */
  userOperationReach: number
  /** Distinct call targets (`to`); contract creations have none. */
  contracts: number
  /** Gas of both: each transaction's receipt, each operation's `actualGasUsed`. */
  gasUsed: string
  /** Of which the user operations'. */
  userOperationGasUsed: string
  suffixGas: string
  value: string
  /** Transactions and operations by what the code stood for: schema 2's app, wallet and service codes; `code` for schemas 0 and 1. */
  byRole: Record<AttributionRole, number>
  /** Block timestamps (unix seconds) of the first and last attributed transaction, `null` without any. */
  firstSeen: number | null
  lastSeen: number | null
}

/**
 * One bucket of a code's confirmed series, counted as the figures are: `transactions` by their own calldata,
 * `userOperations` apart; `reach` and `gasUsed` of both.
 */
export type SeriesPoint = { timestamp: number; transactions: number; userOperations: number; reach: number; gasUsed: string }

export type BuilderCodeStats = {
  builderCode: string
  registered: boolean
  /** The wallet that registered the code here; `null` for a code seen only on chain. */
  walletAddress: Address | null
  /** What the on-chain Builder Codes registry says of the code; `null` when no registry is followed. */
  onChain: RegistryStatus | null
  /** The indexed head the figures are consistent with: confirmed up to it, pending above it. */
  head: number | null
  confirmed: AttributionFigures
  pending: AttributionFigures
  series: { interval: SeriesInterval; bucketSeconds: number; points: SeriesPoint[] }
}

export type BuilderCodeSummary = {
  builderCode: string
  /** Registered here (`POST /v1/agents/builder-codes`). */
  registered: boolean
  walletAddress: Address | null
  /** Found in calldata on chain, confirmed or pending. */
  seen: boolean
  onChain: RegistryStatus | null
}

export type LeaderboardEntry = {
  builderCode: string
  registered: boolean
  transactions: number
  userOperations: number
  /** Pre-confirmed transactions and operations. */
  pendingTransactions: number
  reach: number
  gasUsed: string
  lastSeen: number | null
  /** What the on-chain registry says of the code; `null` when no registry is followed. */
  onChain: RegistryStatus | null
}

const EMPTY_FIGURES: AttributionFigures = {
  transactions: 0,
  userOperations: 0,
  reach: 0,
  userOperationReach: 0,
  contracts: 0,
  gasUsed: '0',
  userOperationGasUsed: '0',
  suffixGas: '0',
  value: '0',
  byRole: { app: 0, wallet: 0, service: 0, code: 0 },
  firstSeen: null,
  lastSeen: null,
}

type PendingAttribution = { block: PendingBlock; action: AttributedAction }

/**
 * Ties on the leaderboard go by code point, as `collate "C"` orders them in SQL, where the confirmed top is cut
 * at the limit: by locale (`_` before digits, `a` before `B`) a longer list would not begin with a shorter one.
 */
const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/**
 * Attribution analytics (DESIGN.md §7), shared by REST and GraphQL. Confirmed figures come from the
 * `attributions` rows the ingester writes; pending ones are counted from the pre-confirmed blocks in memory
 * (never stored). Both are taken against one head, so that a transaction is counted in exactly one of them
 * while its block moves from pending to confirmed.
 */
/** A builder code's time series: its bucket and how many buckets back from now. */
export type BuilderCodeStatsOptions = { interval?: SeriesInterval; points?: number }
/** How many builder codes the leaderboard lists. */
export type LeaderboardOptions = { limit?: number }

export function createAttributionResolvers({
  db,
  chain,
  pending,
  entryPoints = ENTRY_POINTS,
}: {
  db: Db
  chain: ChainState
  pending: PendingState | null
  entryPoints?: readonly EntryPoint[]
}) {
  const registry = createRegistryReader({ db, chain })
  // Pre-confirmed transactions are immutable objects: decode each one once, and again only when its receipt
  // arrives (it gives the operations' gas, and drops operations of a bundle that reverted).
  const decodedTransactions = new WeakMap<PendingTransaction, { withReceipt: boolean; actions: AttributedAction[] }>()

  function decodePending(transaction: PendingTransaction, receipt: PendingBlock['receipts'][number]): AttributedAction[] {
    const withReceipt = receipt !== null && receipt !== undefined
    let decoded = decodedTransactions.get(transaction)
    if (decoded === undefined || decoded.withReceipt !== withReceipt) {
      const actions = attributedActions(
        { from: transaction.from, to: transaction.to, input: transaction.fields.input as Hex | undefined, value: transaction.fields.value as Hex | undefined },
        withReceipt ? { gasUsed: receipt.gasUsed as Hex, logs: receipt.logs as { address: string; topics: Hex[]; data: Hex }[] } : null,
        entryPoints,
      )
      decodedTransactions.set(transaction, (decoded = { withReceipt, actions }))
    }
    return decoded.actions
  }

  function pendingAttributions(head: number): PendingAttribution[] {
    const found: PendingAttribution[] = []
    for (const block of pending?.blocks(head) ?? [])
      block.transactions.forEach((transaction, index) => {
        for (const action of decodePending(transaction, block.receipts[index] ?? null)) found.push({ block, action })
      })
    return found
  }

  function pendingFigures(code: string, attributed: PendingAttribution[]): AttributionFigures {
    if (attributed.length === 0) return EMPTY_FIGURES
    const byRole: Record<AttributionRole, number> = { app: 0, wallet: 0, service: 0, code: 0 }
    const senders = new Set<string>()
    const accounts = new Set<string>()
    const targets = new Set<string>()
    let transactions = 0
    let gasUsed = 0n
    let operationGasUsed = 0n
    let suffixGas = 0n
    let value = 0n
    let firstSeen = Number.POSITIVE_INFINITY
    let lastSeen = 0
    for (const { block, action } of attributed) {
      byRole[action.attribution.roles[action.attribution.codes.indexOf(code)] ?? 'code']++
      senders.add(action.sender)
      if (action.kind === 'userOperation') {
        accounts.add(action.sender)
        operationGasUsed += action.gasUsed ?? 0n
      } else transactions++
      if (action.target !== null) targets.add(action.target)
      gasUsed += action.gasUsed ?? 0n
      suffixGas += BigInt(action.attribution.suffixGas)
      value += action.value
      const timestamp = Number(block.header.timestamp)
      firstSeen = Math.min(firstSeen, timestamp)
      lastSeen = Math.max(lastSeen, timestamp)
    }
    return {
      transactions,
      userOperations: attributed.length - transactions,
      reach: senders.size,
      userOperationReach: accounts.size,
      contracts: targets.size,
      gasUsed: gasUsed.toString(),
      userOperationGasUsed: operationGasUsed.toString(),
      suffixGas: suffixGas.toString(),
      value: value.toString(),
      byRole,
      firstSeen,
      lastSeen,
    }
  }

  async function confirmedFigures(code: string, head: number): Promise<AttributionFigures> {
    const [row] = await db.query<{
      transactions: number
      user_operations: number
      reach: number
      user_operation_reach: number
      contracts: number
      gas_used: string
      user_operation_gas_used: string
      suffix_gas: string
      value: string
      app: number
      wallet: number
      service: number
      code: number
      first_seen: string | number | null
      last_seen: string | number | null
    }>(sql`
      select count(*) filter (where ${schema.attributions.kind} = 'transaction')::int as transactions,
        count(*) filter (where ${schema.attributions.kind} = 'userOperation')::int as user_operations,
        count(distinct ${schema.attributions.sender})::int as reach,
        count(distinct ${schema.attributions.sender}) filter (where ${schema.attributions.kind} = 'userOperation')::int as user_operation_reach,
        count(distinct ${schema.attributions.target})::int as contracts,
        coalesce(sum(${schema.attributions.gasUsed}), 0)::text as gas_used,
        coalesce(sum(${schema.attributions.gasUsed}) filter (where ${schema.attributions.kind} = 'userOperation'), 0)::text as user_operation_gas_used,
        coalesce(sum(${schema.attributions.suffixGas}), 0)::text as suffix_gas,
        coalesce(sum(${schema.attributions.value}), 0)::text as value,
        count(*) filter (where ${schema.attributions.role} = 'app')::int as app,
        count(*) filter (where ${schema.attributions.role} = 'wallet')::int as wallet,
        count(*) filter (where ${schema.attributions.role} = 'service')::int as service,
        count(*) filter (where ${schema.attributions.role} = 'code')::int as code,
        min(${schema.attributions.blockTimestamp}) as first_seen, max(${schema.attributions.blockTimestamp}) as last_seen
      from ${schema.attributions}
      where ${schema.attributions.code} = ${code} and ${schema.attributions.blockNumber} <= ${head}`)
    if (row === undefined) return EMPTY_FIGURES
    return {
      transactions: row.transactions,
      userOperations: row.user_operations,
      reach: row.reach,
      userOperationReach: row.user_operation_reach,
      contracts: row.contracts,
      gasUsed: row.gas_used,
      userOperationGasUsed: row.user_operation_gas_used,
      suffixGas: row.suffix_gas,
      value: row.value,
      byRole: { app: row.app, wallet: row.wallet, service: row.service, code: row.code },
      firstSeen: row.first_seen === null ? null : Number(row.first_seen),
      lastSeen: row.last_seen === null ? null : Number(row.last_seen),
    }
  }

  /** A dense series of `points` buckets of chain time, ending with the bucket of `endTimestamp`. */
  async function series(code: string, head: number, endTimestamp: number, interval: SeriesInterval, points: number): Promise<SeriesPoint[]> {
    const bucket = SERIES_BUCKET_SECONDS[interval]
    const last = Math.floor(endTimestamp / bucket) * bucket
    const first = last - (points - 1) * bucket
    const rows = await db.query<{ bucket: string | number; transactions: number; user_operations: number; reach: number; gas_used: string }>(sql`
      select (${schema.attributions.blockTimestamp} / ${bucket}) * ${bucket} as bucket,
        count(*) filter (where ${schema.attributions.kind} = 'transaction')::int as transactions,
        count(*) filter (where ${schema.attributions.kind} = 'userOperation')::int as user_operations,
        count(distinct ${schema.attributions.sender})::int as reach, sum(${schema.attributions.gasUsed})::text as gas_used
      from ${schema.attributions}
      where ${schema.attributions.code} = ${code} and ${schema.attributions.blockNumber} <= ${head}
        and ${schema.attributions.blockTimestamp} >= ${first}
      group by 1`)
    const byBucket = new Map(rows.map((row) => [Number(row.bucket), row]))
    return Array.from({ length: points }, (_, index) => {
      const timestamp = first + index * bucket
      const row = byBucket.get(timestamp)
      return {
        timestamp,
        transactions: row?.transactions ?? 0,
        userOperations: row?.user_operations ?? 0,
        reach: row?.reach ?? 0,
        gasUsed: row?.gas_used ?? '0',
      }
    })
  }

  async function walletOf(code: string): Promise<Address | null> {
    const rows = await db.query<{ wallet: Uint8Array }>(
      sql`select ${schema.builderCodes.wallet} as wallet from ${schema.builderCodes} where ${schema.builderCodes.code} = ${code} limit 1`,
    )
    const row = rows[0]
    return row ? getAddress(byteaToHex(row.wallet)) : null
  }

  /**
   * Everything the dashboard shows for one code, or `null` when the code is neither registered here nor
   * seen on chain (confirmed or pending).
   */
  async function builderCodeStats(code: string, options: BuilderCodeStatsOptions = {}): Promise<BuilderCodeStats | null> {
    const interval = options.interval ?? 'hour'
    const points = Math.min(Math.max(1, options.points ?? DEFAULT_SERIES_POINTS), MAX_SERIES_POINTS)
    const view = await chain.view()
    const head = view.head?.number ?? -1
    const pendingFor = pendingAttributions(head).filter((attributed) => attributed.action.attribution.codes.includes(code))
    const endTimestamp = Math.max(view.head?.timestamp ?? 0, ...pendingFor.map(({ block }) => Number(block.header.timestamp)))
    const [wallet, confirmed, seriesPoints, onChain] = await Promise.all([
      walletOf(code),
      confirmedFigures(code, head),
      series(code, head, endTimestamp, interval, points),
      registry.registryStatuses([code]).then((statuses) => statuses?.get(code) ?? null),
    ])
    const seen = confirmed.transactions + confirmed.userOperations > 0 || pendingFor.length > 0
    if (wallet === null && !seen && onChain?.registered !== true) return null
    return {
      builderCode: code,
      registered: wallet !== null,
      walletAddress: wallet,
      onChain,
      head: view.head?.number ?? null,
      confirmed,
      pending: pendingFigures(code, pendingFor),
      series: { interval, bucketSeconds: SERIES_BUCKET_SECONDS[interval], points: seriesPoints },
    }
  }

  /**
   * A code as `GET /v1/builder-codes/{code}` shows it: who registered it here, what the on-chain registry
   * says, and whether it was seen in calldata; `null` for a code unknown to all three.
   */
  async function builderCode(code: string): Promise<BuilderCodeSummary | null> {
    const view = await chain.view()
    const head = view.head?.number ?? -1
    const [wallet, seenRows, onChain] = await Promise.all([
      walletOf(code),
      db.query<{ one: number }>(
        sql`select 1 as one from ${schema.attributions} where ${schema.attributions.code} = ${code} and ${schema.attributions.blockNumber} <= ${head} limit 1`,
      ),
      registry.registryStatuses([code]).then((statuses) => statuses?.get(code) ?? null),
    ])
    const seen = seenRows.length > 0 || pendingAttributions(head).some(({ action }) => action.attribution.codes.includes(code))
    if (wallet === null && !seen && onChain?.registered !== true) return null
    return { builderCode: code, registered: wallet !== null, walletAddress: wallet, seen, onChain }
  }

  /** Codes ranked by transactions (confirmed plus pending), registered here or not. */
  async function builderCodeLeaderboard(options: LeaderboardOptions = {}): Promise<LeaderboardEntry[]> {
    const limit = Math.min(Math.max(1, options.limit ?? DEFAULT_LEADERBOARD_SIZE), MAX_LEADERBOARD_SIZE)
    const view = await chain.view()
    const head = view.head?.number ?? -1
    /** Confirmed figures by code, of the codes `where` picks, the most attributed first. */
    const confirmedFigures = (where: SQL, most: number | null) =>
      db.query<{
        code: string
        registered: boolean
        transactions: number
        user_operations: number
        reach: number
        gas_used: string
        last_seen: string | number
      }>(sql`
        select ${schema.attributions.code} as code, count(*) filter (where ${schema.attributions.kind} = 'transaction')::int as transactions,
          count(*) filter (where ${schema.attributions.kind} = 'userOperation')::int as user_operations,
          count(distinct ${schema.attributions.sender})::int as reach, sum(${schema.attributions.gasUsed})::text as gas_used,
          max(${schema.attributions.blockTimestamp}) as last_seen,
          exists (select 1 from ${schema.builderCodes} where ${schema.builderCodes.code} = ${schema.attributions.code}) as registered
        from ${schema.attributions}
        where ${schema.attributions.blockNumber} <= ${head} and ${where}
        group by ${schema.attributions.code}
        order by count(*) desc, code collate "C"
        ${most === null ? sql`` : sql`limit ${most}`}`)
    const rows = await confirmedFigures(sql`true`, limit)
    const pendingByCode = new Map<string, number>()
    for (const { action } of pendingAttributions(head)) for (const code of action.attribution.codes) pendingByCode.set(code, (pendingByCode.get(code) ?? 0) + 1)
    // A code with pre-confirmed attributions is ranked on all of its own: its confirmed figures too, though
    // they alone would not have made the confirmed top.
    const unlisted = [...pendingByCode.keys()].filter((code) => !rows.some((row) => row.code === code))
    if (unlisted.length > 0) rows.push(...(await confirmedFigures(sql`${schema.attributions.code} = any(${arrayLiteral(unlisted)}::text[])`, null)))
    const entries: LeaderboardEntry[] = rows.map((row) => ({
      builderCode: row.code,
      registered: row.registered,
      transactions: row.transactions,
      userOperations: row.user_operations,
      pendingTransactions: pendingByCode.get(row.code) ?? 0,
      reach: row.reach,
      gasUsed: row.gas_used,
      lastSeen: Number(row.last_seen),
      onChain: null,
    }))
    const listed = new Set(entries.map((entry) => entry.builderCode))
    for (const [code, count] of pendingByCode) {
      if (listed.has(code)) continue
      entries.push({
        builderCode: code,
        registered: (await walletOf(code)) !== null,
        transactions: 0,
        userOperations: 0,
        pendingTransactions: count,
        reach: 0,
        gasUsed: '0',
        lastSeen: null,
        onChain: null,
      })
    }
    const total = (entry: LeaderboardEntry) => entry.transactions + entry.userOperations + entry.pendingTransactions
    const ranked = entries.sort((a, b) => total(b) - total(a) || byCodePoint(a.builderCode, b.builderCode)).slice(0, limit)
    const statuses = await registry.registryStatuses(ranked.map((entry) => entry.builderCode))
    for (const entry of ranked) entry.onChain = statuses?.get(entry.builderCode) ?? null
    return ranked
  }

  return { builderCode, builderCodeStats, builderCodeLeaderboard }
}
