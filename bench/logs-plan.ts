import { sql } from 'drizzle-orm'
import type { Db } from '../src/db/index.js'
import { postingsStatement } from '../src/resolvers/log-store.js'
import type { RpcCall } from './rpc.js'

type AddressTopicFilter = { address: `0x${string}`; topics: [`0x${string}`]; fromBlock: `0x${string}`; toBlock: `0x${string}` }

/**
 * `EXPLAIN ANALYZE` of the postings look-up of the headline `eth_getLogs` shape (address + topic0 over a
 * block range), as src/resolvers/log-store.ts runs it before reading the chunks it names.
 */
export async function explainAddressTopicQuery(db: Db, call: RpcCall): Promise<string[]> {
  const filter = call.params[0] as AddressTopicFilter
  const statement = postingsStatement({ addresses: [filter.address], topics: [filter.topics] }, Number(filter.fromBlock), Number(filter.toBlock))!
  const rows = await db.query<Record<string, string>>(sql`explain (analyze, buffers) ${statement}`)
  return rows.map((row) => Object.values(row)[0]!)
}

/** On-disk size of each table with its indexes, and whether the planner has statistics for `log_chunks`. */
export async function describeStorage(db: Db): Promise<{ tables: Record<string, string>; logsAnalyzed: boolean }> {
  const sizes = await db.query<{ name: string; size: string }>(sql`
    select relname as name, pg_size_pretty(pg_total_relation_size(relid)) as size
    from pg_stat_user_tables order by pg_total_relation_size(relid) desc`)
  const stats = await db.query<{ analyzed: boolean }>(sql`
    select (last_analyze is not null or last_autoanalyze is not null) as analyzed
    from pg_stat_user_tables where relname = 'log_chunks'`)
  return { tables: Object.fromEntries(sizes.map((row) => [row.name, row.size])), logsAnalyzed: stats[0]?.analyzed === true }
}
