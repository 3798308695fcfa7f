import { parseArgs } from 'node:util'

/** Logs generated for a full run, and for `--quick` (a smoke run of the whole pipeline). */
export const FULL_LOGS = 1_000_000
export const QUICK_LOGS = 50_000
/** Blocks spanned by each `eth_getLogs` query (address + topic0), clamped to the chain for small runs. */
export const GET_LOGS_RANGE_BLOCKS = 2_000
/** autocannon: time and concurrency per method and target (the same for flashgate and anvil). */
export const LOAD_DURATION_S = 10
export const QUICK_LOAD_DURATION_S = 3
export const LOAD_CONNECTIONS = 16
/** Sequential `eth_getLogs` queries (one in flight) for the headline latency, per target. */
export const HEADLINE_QUERIES = 500
export const QUICK_HEADLINE_QUERIES = 100
/** The whole run is aborted (and cleaned up) after this long. */
export const FULL_DEADLINE_MS = 45 * 60_000
export const QUICK_DEADLINE_MS = 12 * 60_000
export const DEFAULT_SEED = 8021
/** Maintenance database of the local Postgres; bench databases are created and dropped through it. */
export const DEFAULT_ADMIN_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/postgres'

export type BenchOptions = {
  quick: boolean
  logs: number
  pglite: boolean
  adminDatabaseUrl: string
  seed: number
  loadDurationS: number
  connections: number
  headlineQueries: number
  deadlineMs: number
}

const USAGE = `npm run bench -- [--quick] [--logs N] [--pglite] [--duration S] [--connections N] [--seed N] [--admin-database-url URL]
       npm run bench -- --scale [--sizes 10M,50M,100M] …   (bench/scale.ts)
       npm run bench -- --follow [--duration S] …          (bench/follow.ts)
       npm run bench -- --execute …                         (bench/execute.ts)
       npm run bench -- --ponder [--rounds N] [--pglite]    (bench/ponder.ts)`

export function parseBenchOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      logs: { type: 'string' },
      pglite: { type: 'boolean', default: false },
      duration: { type: 'string' },
      connections: { type: 'string' },
      seed: { type: 'string' },
      'admin-database-url': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  })
  if (values.help) {
    console.log(USAGE)
    process.exit(0)
  }
  const number = (name: string, value: string | undefined, fallback: number) => {
    if (value === undefined) return fallback
    const parsed = Number(value.replaceAll('_', ''))
    if (!Number.isInteger(parsed) || parsed <= 0) throw new Error(`--${name} must be a positive whole number (got ${JSON.stringify(value)})\n${USAGE}`)
    return parsed
  }
  const quick = values.quick
  return {
    quick,
    logs: number('logs', values.logs, quick ? QUICK_LOGS : FULL_LOGS),
    pglite: values.pglite,
    adminDatabaseUrl: values['admin-database-url'] ?? process.env.BENCH_ADMIN_DATABASE_URL ?? DEFAULT_ADMIN_DATABASE_URL,
    seed: number('seed', values.seed, DEFAULT_SEED),
    loadDurationS: number('duration', values.duration, quick ? QUICK_LOAD_DURATION_S : LOAD_DURATION_S),
    connections: number('connections', values.connections, LOAD_CONNECTIONS),
    headlineQueries: quick ? QUICK_HEADLINE_QUERIES : HEADLINE_QUERIES,
    deadlineMs: quick ? QUICK_DEADLINE_MS : FULL_DEADLINE_MS,
  }
}
