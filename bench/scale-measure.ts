import type postgres from 'postgres'
import type { Address, Hash } from 'viem'
import type { BlockSelector, LogFilter } from '../src/codecs/index.js'
import type { Db } from '../src/db/index.js'
import { LimitExceededError } from '../src/errors.js'
import { createResolvers } from '../src/resolvers/index.js'
import { createRandom, type Random } from '../test/fixtures/random.js'
import { ADDRESS_KIND, EVENT_SIGNATURE_SALT, EVENT_TOPICS, POPULATION, SYSTEM_ADDRESSES, TRANSACTIONS_PER_BLOCK } from './scale-data.js'
import { BLOCK_TABLES, type BlockTable, type ScaleLayout } from './scale-layouts.js'
import { nearestRank } from './quantile.js'

/** Blocks spanned by the headline `eth_getLogs` (address + topic0), as in issue 14. */
export const HEADLINE_RANGE_BLOCKS = 2_000
/** Blocks spanned by the topic-only `eth_getLogs`: ~3 minutes of Base, a few thousand logs for the commonest tail event. */
export const TOPIC_ONLY_RANGE_BLOCKS = 100
/**
 * Headline parameters skip the hottest tokens and pools: their Transfers or Swaps over 2,000 blocks pass
 * `maxLogs` (10,000), and such a query is refused, not answered. Ranks below this are not drawn.
 */
const HEADLINE_MIN_RANK = 10
/** Of the headline queries, this share asks for a token's Transfers, the rest for a pool's Swaps. */
const HEADLINE_TRANSFER_SHARE = 0.8
/** Hot accounts: the most active senders; tail accounts: senders ranked in this range that changed at least once. */
const HOT_SENDER_RANKS = 10
const TAIL_SENDER_RANKS = [10_000, 200_000] as const
/** Untimed queries run before each series, so that the first timed one does not pay for connections and plans. */
const WARMUP_QUERIES = 20
/**
 * A backend publishes its I/O counters when it goes idle, but at most once a second: counters held back are
 * published within 10 s (PostgreSQL 15's PGSTAT_IDLE_INTERVAL). Read them after that long.
 */
const STATS_FLUSH_MS = 11_000

export type LatencyFigures = {
  queries: number
  p50Ms: number
  p99Ms: number
  meanMs: number
  maxMs: number
  /** Logs (getLogs) or JSON bytes (receipts) per answer: median and 99th percentile. */
  sizeP50?: number
  sizeP99?: number
  /** Answers refused (result cap): not in the latencies. */
  refused: number
  /**
   * Shared-buffer pages each call touched on average, found in memory (`hit`) or read from the OS (`read`:
   * page cache or disk): a cost that does not depend on what else runs on the machine, as latency does.
   */
  pagesHitPerQuery: number
  pagesReadPerQuery: number
}

export const QUERY_SERIES = [
  'headlineLogs',
  'topicOnlyLogs',
  'blockLogs',
  'blockReceipts',
  'transactionByHash',
  'receiptByHash',
  'accountsHot',
  'accountsTail',
] as const
export type QuerySeries = (typeof QUERY_SERIES)[number]

export type TableSize = { tableBytes: number; indexBytes: number; totalBytes: number; bytesPerLog: number; indexes: Record<string, number> }

/** Heap (with TOAST) and index bytes of each block-keyed table, wherever the layout keeps its rows (all partitions summed). */
export async function measureSizes(sql: postgres.Sql, layout: ScaleLayout, logs: number): Promise<Record<BlockTable, TableSize>> {
  const sizes = {} as Record<BlockTable, TableSize>
  for (const table of BLOCK_TABLES) {
    const relation = layout.storage[table]
    const [heap] = await sql`select coalesce(sum(pg_table_size(leaf)), 0)::bigint as bytes from ${leaves(sql, relation)}`
    // Every index of every leaf: since migrations 0015 and 0016 a partition of `logs` has indexes of its own
    // and the parent none (reading the parent's, as before, counted none of them). Summed by kind: a
    // partition's `logs_30000000_pk` counts as `logs_pk`.
    const indexRows = await sql`
      select c.relname as leaf, i.indexrelid::regclass::text as name, pg_relation_size(i.indexrelid)::bigint as bytes
      from ${leaves(sql, relation)} join pg_class c on c.oid = leaf join pg_index i on i.indrelid = leaf`
    const indexes: Record<string, number> = {}
    for (const row of indexRows) {
      const [leaf, name] = [row.leaf as string, row.name as string]
      const kind = name.startsWith(`${leaf}_`) ? `${relation}_${name.slice(leaf.length + 1)}` : name
      indexes[kind] = (indexes[kind] ?? 0) + Number(row.bytes)
    }
    const tableBytes = Number(heap!.bytes)
    const indexBytes = Object.values(indexes).reduce((sum, bytes) => sum + bytes, 0)
    sizes[table] = { tableBytes, indexBytes, totalBytes: tableBytes + indexBytes, bytesPerLog: (tableBytes + indexBytes) / logs, indexes }
  }
  return sizes
}

/**
 * The relations holding a table's rows, as `leaves(leaf)`: itself, or the leaf partitions of a partitioned one
 * (`pg_partition_tree` lists nothing for a relation that is not partitioned).
 */
function leaves(sql: postgres.Sql, relation: string) {
  return sql`(select relid from pg_partition_tree(${relation}::regclass) where isleaf
    union all select ${relation}::regclass where (select relkind from pg_class where oid = ${relation}::regclass) <> 'p') leaves (leaf)`
}

const atBlock = (number: number): BlockSelector => ({ kind: 'number', number: BigInt(number) })
const blockIn = (random: Random, from: number, to: number) => random.int(from, to)
/** A rank of `population` drawn as the generator draws it (scale-data.ts, `bench_zipf`), at least `min`. */
function zipfRank(random: Random, population: number, min = 1): number {
  for (;;) {
    const rank = Math.floor(Math.exp(random.next() * Math.log(population)))
    if (rank >= min) return rank
  }
}

/**
 * Latencies of the real resolvers (`createResolvers` over `db`, no HTTP) with the answer cache off, so that
 * every call reads the database: `queries` calls per series, one at a time, each with parameters drawn from
 * the generated distributions.
 */
export async function measureQueries({
  db,
  sql,
  firstBlock,
  head,
  queries,
  seed,
  series: measured,
}: {
  db: Db
  /** For the generator's functions (addresses of drawn ranks). */
  sql: postgres.Sql
  firstBlock: number
  head: number
  queries: number
  seed: number
  series: readonly QuerySeries[]
}): Promise<Partial<Record<QuerySeries, LatencyFigures>>> {
  const resolvers = createResolvers({ db, upstream: null, cacheBytes: 0, history: 'refuse' })
  const address = async (kind: number, rank: number) => {
    const [row] = await sql`select bench_hex(bench_addr(${kind}, ${rank}::bigint)) as hex`
    return row!.hex as Address
  }
  const eventSignature = async (rank: number) => {
    const [row] = await sql`select bench_hex(bench_b32(${rank}::bigint, ${EVENT_SIGNATURE_SALT})) as hex`
    return row!.hex as Hash
  }
  const random = createRandom(seed)
  const tailAccounts = measured.includes('accountsTail') ? await tailSenders(sql, random) : []
  const hotAccounts: Address[] = [
    SYSTEM_ADDRESSES.sequencerFeeVault,
    SYSTEM_ADDRESSES.baseFeeVault,
    SYSTEM_ADDRESSES.l1FeeVault,
    ...(await Promise.all(Array.from({ length: HOT_SENDER_RANKS }, (_, index) => address(ADDRESS_KIND.account, index + 1)))),
  ]

  const logCount = async (filter: LogFilter) => (await resolvers.getLogs({ filter, limits: resolvers.limits })).length
  const accountRead = (accounts: Address[]) => async (random: Random) => {
    const account = random.pick(accounts)
    const block = atBlock(blockIn(random, firstBlock, head))
    const read = random.chance(0.5) ? resolvers.getBalance : resolvers.getTransactionCount
    return () => read({ address: account, block }).then(() => 0)
  }

  /** A look-up by the hash of a transaction drawn at random from the history (wallets poll receipts this way). */
  const byHash = (read: (hash: Hash) => Promise<unknown>) => async (random: Random) => {
    const [row] = await sql`select bench_hex(hash) as hex from transactions
      where block_number = ${blockIn(random, firstBlock, head)} and transaction_index = ${random.int(0, TRANSACTIONS_PER_BLOCK - 1)}`
    const hash = row!.hex as Hash
    return async () => {
      if ((await read(hash)) == null) throw new Error(`transaction ${hash} not found`)
      return 0
    }
  }

  const series: Record<QuerySeries, (random: Random) => Promise<() => Promise<number>>> = {
    async headlineLogs(random) {
      const transfers = random.chance(HEADLINE_TRANSFER_SHARE)
      const contract = transfers
        ? await address(ADDRESS_KIND.token, zipfRank(random, POPULATION.tokens, HEADLINE_MIN_RANK))
        : await address(ADDRESS_KIND.pool, zipfRank(random, POPULATION.pools, HEADLINE_MIN_RANK))
      const from = blockIn(random, firstBlock, Math.max(firstBlock, head - HEADLINE_RANGE_BLOCKS + 1))
      const to = Math.min(head, from + HEADLINE_RANGE_BLOCKS - 1)
      const topic0 = transfers ? EVENT_TOPICS.transfer : EVENT_TOPICS.swap
      return () => logCount({ addresses: [contract], topics: [[topic0]], fromBlock: atBlock(from), toBlock: atBlock(to) })
    },
    async topicOnlyLogs(random) {
      const topic0 = await eventSignature(random.int(1, POPULATION.tailEvents))
      const from = blockIn(random, firstBlock, Math.max(firstBlock, head - TOPIC_ONLY_RANGE_BLOCKS + 1))
      const to = Math.min(head, from + TOPIC_ONLY_RANGE_BLOCKS - 1)
      return () => logCount({ addresses: null, topics: [[topic0]], fromBlock: atBlock(from), toBlock: atBlock(to) })
    },
    /** Every log of one block (a whole-block `eth_getLogs`, as an indexer without a filter reads a block). */
    async blockLogs(random) {
      const block = atBlock(blockIn(random, firstBlock, head))
      return () => logCount({ addresses: null, topics: [], fromBlock: block, toBlock: block })
    },
    async blockReceipts(random) {
      const block = atBlock(blockIn(random, firstBlock, head))
      // `.bytes` inflates: the JSON a client that does not accept `deflate` is sent.
      return async () => (await resolvers.getBlockReceipts({ block }))!.bytes.length
    },
    transactionByHash: byHash((hash) => resolvers.getTransaction({ hash })),
    receiptByHash: byHash((hash) => resolvers.getTransactionReceipt({ hash }).then((answer) => answer?.bytes)),
    accountsHot: accountRead(hotAccounts),
    accountsTail: accountRead(tailAccounts),
  }

  const figures: Partial<Record<QuerySeries, LatencyFigures>> = {}
  for (const name of measured) {
    const calls = []
    for (let index = 0; index < WARMUP_QUERIES + queries; index++) calls.push(await series[name](random))
    figures[name] = await timeCalls(sql, calls.slice(WARMUP_QUERIES), calls.slice(0, WARMUP_QUERIES), name.endsWith('Logs') || name === 'blockReceipts')
  }
  return figures
}

/** Senders of the tail (ranked 10,000-200,000 of 5 million) that the loaded history holds changes of. */
async function tailSenders(sql: postgres.Sql, random: Random): Promise<Address[]> {
  const ranks = Array.from({ length: 400 }, () =>
    Math.floor(Math.exp(Math.log(TAIL_SENDER_RANKS[0]) + random.next() * Math.log(TAIL_SENDER_RANKS[1] / TAIL_SENDER_RANKS[0]))),
  )
  const rows = await sql`
    select bench_hex(bench_addr(${ADDRESS_KIND.account}, rank)) as hex from unnest(${ranks}::bigint[]) rank
    where exists (select 1 from account_changes where address = bench_addr(${ADDRESS_KIND.account}, rank))`
  if (rows.length === 0) throw new Error('no tail account has a change in the loaded history')
  return rows.map((row) => row.hex as Address)
}

/** The database's shared-buffer hits and reads so far, once the resolvers' backends have published theirs. */
async function pageCounters(sql: postgres.Sql): Promise<{ hit: number; read: number }> {
  await new Promise((resolve) => setTimeout(resolve, STATS_FLUSH_MS))
  const [row] = await sql`select blks_hit::bigint as hit, blks_read::bigint as read from pg_stat_database where datname = current_database()`
  return { hit: Number(row!.hit), read: Number(row!.read) }
}

async function timeCalls(sql: postgres.Sql, calls: (() => Promise<number>)[], warmup: (() => Promise<number>)[], reportSize: boolean): Promise<LatencyFigures> {
  for (const call of warmup) await call().catch(() => 0)
  const before = await pageCounters(sql)
  const latencies: number[] = []
  const sizes: number[] = []
  let refused = 0
  for (const call of calls) {
    const started = performance.now()
    try {
      const size = await call()
      latencies.push(performance.now() - started)
      sizes.push(size)
    } catch (error) {
      if (!(error instanceof LimitExceededError)) throw error
      refused++
    }
  }
  const after = await pageCounters(sql)
  latencies.sort((left, right) => left - right)
  sizes.sort((left, right) => left - right)
  const round = (value: number) => Math.round(value * 1000) / 1000
  return {
    queries: calls.length,
    p50Ms: round(percentile(latencies, 0.5)),
    p99Ms: round(percentile(latencies, 0.99)),
    meanMs: round(latencies.reduce((sum, value) => sum + value, 0) / Math.max(1, latencies.length)),
    maxMs: round(latencies.at(-1) ?? 0),
    ...(reportSize ? { sizeP50: percentile(sizes, 0.5), sizeP99: percentile(sizes, 0.99) } : {}),
    refused,
    pagesHitPerQuery: Math.round((after.hit - before.hit) / calls.length),
    pagesReadPerQuery: Math.round((after.read - before.read) / calls.length),
  }
}

function percentile(sorted: number[], fraction: number): number {
  return sorted.length === 0 ? 0 : nearestRank(sorted, fraction)
}

/**
 * `EXPLAIN (ANALYZE, BUFFERS)` of one headline query (a mid-ranked token's Transfers over the last 2,000
 * blocks) and one topic-only query (the tenth commonest tail event over the last 100), written as
 * src/resolvers/logs.ts builds them.
 */
/** `column` equal to `value` by its 8-byte key from `offset` and by the whole value. */
const keyed = (column: string, offset: number, value: string) => `substr(${column}, ${offset}, 8) = substr(${value}, ${offset}, 8) and ${column} = ${value}`

export async function explainLogQueries(sql: postgres.Sql, head: number, firstBlock: number): Promise<{ headline: string[]; topicOnly: string[] }> {
  const explain = async (condition: string, rangeBlocks: number) => {
    const rows = await sql.unsafe(
      `explain (analyze, buffers) select * from logs where block_number between $1 and $2 and ${condition}
       order by block_number, log_index limit 10001`,
      [Math.max(firstBlock, head - rangeBlocks + 1), head],
    )
    return rows.map((row) => row['QUERY PLAN'] as string)
  }
  return {
    // By each value's key (src/db/log-keys.ts) and the value, as the resolvers write them.
    headline: await explain(
      `${keyed('address', 13, `bench_addr(${ADDRESS_KIND.token}, 100)`)} and ${keyed('topic0', 1, `'\\x${EVENT_TOPICS.transfer.slice(2)}'::bytea`)}`,
      HEADLINE_RANGE_BLOCKS,
    ),
    topicOnly: await explain(keyed('topic0', 1, `bench_b32(10, ${EVENT_SIGNATURE_SALT})`), TOPIC_ONLY_RANGE_BLOCKS),
  }
}
