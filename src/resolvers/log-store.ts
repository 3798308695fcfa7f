import { type SQL, sql } from 'drizzle-orm'
import type { Hex } from 'viem'
import { CHUNK_BITS, CHUNK_LOGS, decodeChunk, type LogPredicate, postingKey } from '../codecs/log-chunks.js'
import { hexToBytea, type LogRow, type Queries, schema } from '../db/index.js'

const { blocks, logAddressPostings, logChunks, logTopicPostings } = schema

/** What a log query matches: addresses (any of), and per topic position any of the listed topics; `null` for any. */
export type LogMatch = { addresses: readonly Hex[] | null; topics: readonly (readonly Hex[] | null)[] }

/** Position of a log in the chain: a page of logs continues after it. */
export type LogCursor = { blockNumber: number; logIndex: number }

/** Chunks of one block to read: positions `first` to `last`, `chunks` of them (as far as the plan knows). */
type ChunkSpan = { blockNumber: number; first: number; last: number; chunks: number }

/**
 * The chunks a query reads, planned before any is read: the ones its postings name, or every chunk of its
 * range when it filters on neither an address nor a topic0. `chunks` counts them (`exact`) or bounds them.
 */
export type LogPlan = { spans: ChunkSpan[]; chunks: number }

/** The last position a span can name: the rest of a block. */
const BLOCK_END = 2 ** 31 - 1
/**
 * Chunks read per statement: 128 at first (~300 KB; most answers need fewer, so one statement), doubling
 * up to ~2.5 MB of compressed chunks held at once. A page that stops at its cap reads little past it.
 */
const FIRST_BATCH_CHUNKS = 128
const MAX_BATCH_CHUNKS = 1_024

/**
 * Reads of the logs stored in chunks (codecs/log-chunks.ts): plan which chunks a filter needs from the
 * postings, then read them in chain order, inflate them and keep the logs that match.
 */
export function createLogStore({ db }: { db: Queries }) {
  /** The chunks `match` needs between `fromNumber` and `toNumber`, in chain order. */
  async function plan(match: LogMatch, fromNumber: number, toNumber: number): Promise<LogPlan> {
    const statement = postingsStatement(match, fromNumber, toNumber)
    if (statement === null) {
      // No posting narrows it: every chunk of the range, counted from the primary key.
      const rows = await db.query<{ block_number: string; chunks: number | string }>(
        sql`select ${logChunks.blockNumber}::text as block_number, count(*) as chunks from ${logChunks}
          where ${logChunks.blockNumber} between ${fromNumber} and ${toNumber} group by ${logChunks.blockNumber} order by ${logChunks.blockNumber}`,
      )
      const spans = rows.map((row) => ({ blockNumber: Number(row.block_number), first: 0, last: BLOCK_END, chunks: Number(row.chunks) }))
      return { spans, chunks: rows.reduce((sum, row) => sum + Number(row.chunks), 0) }
    }
    const rows = await db.query<{ block_number: string; bits: string }>(statement)
    const spans: ChunkSpan[] = []
    let chunks = 0
    for (const row of rows) {
      const blockNumber = Number(row.block_number)
      const bits = BigInt.asUintN(64, BigInt(row.bits))
      for (let bit = 0; bit < CHUNK_BITS; bit++) {
        if (((bits >> BigInt(bit)) & 1n) === 0n) continue
        chunks++
        const last = bit === CHUNK_BITS - 1 ? BLOCK_END : bit
        const previous = spans.at(-1)
        // Neighbouring chunks of a block are one span.
        if (previous !== undefined && previous.blockNumber === blockNumber && previous.last === bit - 1) {
          previous.last = last
          previous.chunks++
        } else spans.push({ blockNumber, first: bit, last, chunks: 1 })
      }
    }
    return { spans, chunks }
  }

  /**
   * The logs `match` matches between `fromNumber` and `toNumber`, in chain order, after `after` when given,
   * at most `cap` of them (a caller asks for one more than it returns, to know whether there are more). When
   * the chunks to read number more than `maxChunks`, nothing is read and their count is returned instead.
   * With an address or topic0, one statement counts the chunks the postings name and reads the first of
   * them: a selective query is one round trip.
   */
  async function find(match: LogMatch, fromNumber: number, toNumber: number, { cap, after = null, maxChunks = Number.POSITIVE_INFINITY }: FindOptions): Promise<Found> {
    const from = after === null ? fromNumber : Math.max(fromNumber, after.blockNumber)
    const collect = collector(match, cap, after)
    const postings = postingsSource(match, from, toNumber)
    if (postings === null) {
      const scan = await plan(match, from, toNumber)
      if (scan.chunks > maxChunks) return { chunks: scan.chunks }
      await readSpans(scan.spans, collect)
      return { logs: collect.logs }
    }
    const rows = await db.query<ChunkRow & { total: number | string }>(sql`
      with hits as materialized (${postings}),
      positions as materialized (
        select h.block_number, i as chunk from hits h cross join lateral generate_series(0, ${CHUNK_BITS - 1}) i where (h.bits >> i) & 1 = 1),
      total as (select count(*) as chunks from positions),
      first as (select * from positions order by block_number, chunk limit ${FIRST_BATCH_CHUNKS})
      select t.chunks as total, c.block_number, c.chunk, c.deflated, b.hash, b.timestamp
      from total t
      left join (first f
        join ${logChunks} c on c.block_number = f.block_number and c.chunk between f.chunk and case when f.chunk = ${CHUNK_BITS - 1} then ${BLOCK_END} else f.chunk end
        join ${blocks} b on b.number = c.block_number) on t.chunks <= ${Math.min(maxChunks, BLOCK_END)}
      order by c.block_number, c.chunk`)
    const total = Number(rows[0]?.total ?? 0)
    if (total > maxChunks) return { chunks: total }
    const read = rows.filter((row) => row.deflated !== null)
    collect.rows(read)
    const last = read.at(-1)
    if (total <= FIRST_BATCH_CHUNKS || collect.full() || last === undefined) return { logs: collect.logs }
    // More than the first batch: the rest of the postings' chunks, after the last one read.
    const [lastBlock, lastChunk] = [Number(last.block_number), Number(last.chunk)]
    const rest = (await plan(match, lastBlock, toNumber)).spans.flatMap((span) => {
      if (span.blockNumber > lastBlock) return [span]
      if (span.last <= lastChunk) return []
      return [{ ...span, first: Math.max(span.first, lastChunk + 1) }]
    })
    await readSpans(rest, collect, FIRST_BATCH_CHUNKS * 2)
    return { logs: collect.logs }
  }

  /** Reads `spans` in batches, into `collect`, until it is full. */
  async function readSpans(spans: ChunkSpan[], collect: Collector, firstBatch = FIRST_BATCH_CHUNKS): Promise<void> {
    let batch = firstBatch
    for (let start = 0; start < spans.length && !collect.full(); batch = Math.min(MAX_BATCH_CHUNKS, batch * 2)) {
      // At least one span, however many chunks it has (a block's are read together).
      let end = start + 1
      for (let chunks = spans[start]!.chunks; end < spans.length && chunks + spans[end]!.chunks <= batch; end++) chunks += spans[end]!.chunks
      const slice = spans.slice(start, end)
      start = end
      collect.rows(
        await db.query<ChunkRow>(sql`
          select c.block_number, c.chunk, c.deflated, b.hash, b.timestamp
          from unnest(${intArray(slice.map((span) => span.blockNumber))}::bigint[], ${intArray(slice.map((span) => span.first))}::int[], ${intArray(slice.map((span) => span.last))}::int[]) as s(block_number, first, last)
          join ${logChunks} c on c.block_number = s.block_number and c.chunk between s.first and s.last
          join ${blocks} b on b.number = c.block_number
          order by c.block_number, c.chunk`),
      )
    }
  }

  return { plan, find }
}

export type LogStore = ReturnType<typeof createLogStore>

export type FindOptions = { cap: number; after?: LogCursor | null; maxChunks?: number }
/** The logs found, or, for a query that would read more chunks than allowed, how many. */
export type Found = { logs: LogRow[] } | { chunks: number }

type ChunkRow = { block_number: number | string; chunk: number | string; deflated: Uint8Array; hash: Uint8Array; timestamp: number | string }
type Collector = ReturnType<typeof collector>

/** Gathers the matching logs of chunk rows, in the order given, after `after`, up to `cap`. */
function collector(match: LogMatch, cap: number, after: LogCursor | null) {
  const matches = matcher(match)
  const logs: LogRow[] = []
  return {
    logs,
    full: () => logs.length >= cap,
    rows(rows: ChunkRow[]) {
      for (const row of rows) {
        const blockNumber = Number(row.block_number)
        if (after !== null && blockNumber < after.blockNumber) continue
        for (const log of decodeChunk(row.deflated, matches)) {
          if (after !== null && blockNumber === after.blockNumber && log.logIndex <= after.logIndex) continue
          const [topic0 = null, topic1 = null, topic2 = null, topic3 = null] = log.topics
          logs.push({
            blockNumber,
            logIndex: log.logIndex,
            blockHash: row.hash,
            blockTimestamp: Number(row.timestamp),
            transactionHash: log.transactionHash,
            transactionIndex: log.transactionIndex,
            address: log.address,
            topic0,
            topic1,
            topic2,
            topic3,
            data: log.data,
          })
          if (logs.length >= cap) return
        }
      }
    },
  }
}

/** Upper bound of the logs that reading `chunks` chunks examines: what `--max-query-cost` prices. */
export const examinedLogs = (chunks: number): number => chunks * CHUNK_LOGS

/**
 * The blocks of the range whose postings name `match`'s address or topic0 (both: the blocks and chunks that
 * hold both), with the bitmap of those chunks (`block_number`, `bits`, both `bigint`); `null` when it
 * filters on neither.
 */
function postingsSource(match: LogMatch, fromNumber: number, toNumber: number): SQL | null {
  const topic0 = match.topics[0] ?? null
  if (match.addresses !== null && topic0 !== null) {
    // Driven by the address's postings, each block probed for the topic's (an index-only look-up): a token's
    // few hundred blocks, not the 2,000 of a Transfer topic. bit_or over the join's rows ORs each side's alone.
    const [byAddress, byTopic] = [logAddressPostings, logTopicPostings]
    return sql`select ${byAddress.blockNumber} as block_number, bit_or(${byAddress.chunks}) & bit_or(${byTopic.chunks}) as bits
      from ${byAddress} join ${byTopic} on ${byTopic.blockNumber} = ${byAddress.blockNumber} and ${byTopic.key} = any(${keys(topic0)}::bigint[])
      where ${byAddress.key} = any(${keys(match.addresses)}::bigint[]) and ${byAddress.blockNumber} between ${fromNumber} and ${toNumber}
      group by ${byAddress.blockNumber} having bit_or(${byAddress.chunks}) & bit_or(${byTopic.chunks}) <> 0`
  }
  const [table, values] = match.addresses !== null ? [logAddressPostings, match.addresses] : topic0 !== null ? [logTopicPostings, topic0] : [null, null]
  if (table === null) return null
  return sql`select ${table.blockNumber} as block_number, bit_or(${table.chunks}) as bits from ${table}
    where ${table.key} = any(${keys(values)}::bigint[]) and ${table.blockNumber} between ${fromNumber} and ${toNumber}
    group by ${table.blockNumber}`
}

/** `postingsSource` in block order, as text (what `plan` reads, and what the bench explains). */
export function postingsStatement(match: LogMatch, fromNumber: number, toNumber: number): SQL | null {
  const source = postingsSource(match, fromNumber, toNumber)
  return source === null ? null : sql`select p.block_number::text as block_number, p.bits::text as bits from (${source}) p order by p.block_number`
}

/** The posting keys of addresses or topics (first 8 bytes), as a `bigint[]` literal. */
function keys(values: readonly Hex[]): string {
  return `{${[...new Set(values.map((value) => postingKey(hexToBytea(value)).toString()))].join(',')}}`
}

const intArray = (values: number[]) => `{${values.join(',')}}`

/** Whether a log's address and topics match, compared as lower-case hex without `0x`, in the chunk's bytes. */
function matcher(match: LogMatch): LogPredicate {
  const set = (values: readonly Hex[] | null) => (values === null ? null : new Set(values.map((value) => value.slice(2).toLowerCase())))
  const addresses = set(match.addresses)
  const topics = match.topics.map(set)
  return (bytes, address, logTopics) => {
    if (addresses !== null && !addresses.has(bytes.toString('hex', address, address + 20))) return false
    for (let position = 0; position < topics.length; position++) {
      const wanted = topics[position]
      if (wanted === null || wanted === undefined) continue
      const topic = logTopics[position]
      if (topic === undefined || !wanted.has(bytes.toString('hex', topic, topic + 32))) return false
    }
    return true
  }
}
