import { sql } from 'drizzle-orm'
import type { Db } from '../src/db/index.js'
import { hexToBytea } from '../src/db/index.js'
import type { RpcCall } from './rpc.js'

/** The result cap the resolver adds (`maxLogs + 1` with the default `maxLogs`). */
const RESOLVER_LIMIT = 10_001

type AddressTopicFilter = { address: `0x${string}`; topics: [`0x${string}`]; fromBlock: `0x${string}`; toBlock: `0x${string}` }

/**
 * `EXPLAIN ANALYZE` of the headline `eth_getLogs` shape, written as src/resolvers/logs.ts builds it
 * (address + topic0 over a block range, ordered by block and log index), to show which index serves it.
 */
export async function explainAddressTopicQuery(db: Db, call: RpcCall): Promise<string[]> {
  const filter = call.params[0] as AddressTopicFilter
  const rows = await db.query<{ 'QUERY PLAN': string }>(sql`
    explain (analyze, buffers)
    select * from logs
    where block_number between ${Number(filter.fromBlock)} and ${Number(filter.toBlock)}
      and address = ${hexToBytea(filter.address)} and topic0 = ${hexToBytea(filter.topics[0])}
    order by block_number, log_index
    limit ${RESOLVER_LIMIT}`)
  return rows.map((row) => row['QUERY PLAN'])
}

/** On-disk size of each table with its indexes, and whether the planner has statistics for `logs`. */
export async function describeStorage(db: Db): Promise<{ tables: Record<string, string>; logsAnalyzed: boolean }> {
  const sizes = await db.query<{ name: string; size: string }>(sql`
    select relname as name, pg_size_pretty(pg_total_relation_size(relid)) as size
    from pg_stat_user_tables order by pg_total_relation_size(relid) desc`)
  const stats = await db.query<{ analyzed: boolean }>(sql`
    select (last_analyze is not null or last_autoanalyze is not null) as analyzed
    from pg_stat_user_tables where relname = 'logs'`)
  return { tables: Object.fromEntries(sizes.map((row) => [row.name, row.size])), logsAnalyzed: stats[0]?.analyzed === true }
}
