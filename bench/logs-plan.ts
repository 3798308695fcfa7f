import { sql } from 'drizzle-orm'
import type { Db } from '../src/db/index.js'
import { schema } from '../src/db/index.js'
import { logAddressIsAnyOf, logTopic0IsAnyOf } from '../src/db/log-keys.js'
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
      and ${logAddressIsAnyOf(schema.logs.address, [filter.address])} and ${logTopic0IsAnyOf(schema.logs.topic0, filter.topics)}
    order by block_number, log_index
    limit ${RESOLVER_LIMIT}`)
  return rows.map((row) => row['QUERY PLAN'])
}

/** On-disk size of each table with its indexes, and whether the planner has statistics for `logs`. */
export async function describeStorage(db: Db): Promise<{ tables: Record<string, string>; logsAnalyzed: boolean }> {
  // A partitioned table (logs) counts as the sum of its partitions.
  const sizes = await db.query<{ name: string; size: string }>(sql`
    select coalesce(pg_partition_root(relid), relid)::regclass::text as name, pg_size_pretty(sum(pg_total_relation_size(relid))) as size
    from pg_stat_user_tables group by 1 order by sum(pg_total_relation_size(relid)) desc`)
  const stats = await db.query<{ analyzed: boolean }>(sql`
    select bool_and(last_analyze is not null or last_autoanalyze is not null) as analyzed
    from pg_stat_user_tables where coalesce(pg_partition_root(relid), relid) = 'logs'::regclass`)
  return { tables: Object.fromEntries(sizes.map((row) => [row.name, row.size])), logsAnalyzed: stats[0]?.analyzed === true }
}
