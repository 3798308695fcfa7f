import { z } from 'zod'
import type { StartBlock } from './ingest/index.js'
import { DEFAULT_ANSWER_CACHE_BYTES } from './resolvers/cache.js'

export const DEFAULT_DATABASE_URL = './.flashgate/pglite'

export const MIB = 1024 * 1024

/**
 * Flags and environment variables are strings: only plain decimals count as numbers (`z.coerce` would take
 * `" "` as 0 and `0x10` as 16). Numbers given directly (tests, embedding) pass as they are.
 */
const decimal = (error: string) =>
  z.preprocess(
    (value) => (typeof value === 'string' ? (/^-?\d+(\.\d+)?$/.test(value) ? Number(value) : Number.NaN) : value),
    z.number({ error }),
  )

const port = decimal('must be a port number').pipe(
  z
    .number()
    .int({ error: 'must be a whole number' })
    .min(0, { error: 'must be between 0 and 65535' })
    .max(65_535, { error: 'must be between 0 and 65535' }),
)

const positiveInt = decimal('must be a number').pipe(z.number().int({ error: 'must be a whole number' }).positive({ error: 'must be positive' }))

const nonNegative = decimal('must be a number').pipe(z.number().min(0, { error: 'must not be negative' }))

const nonNegativeInt = decimal('must be a number').pipe(z.number().int({ error: 'must be a whole number' }).min(0, { error: 'must not be negative' }))

const url = (protocols: string[]) =>
  z
    .string()
    .refine(
      (value) => {
        try {
          return protocols.includes(new URL(value).protocol)
        } catch {
          return false
        }
      },
      { error: `must be a ${protocols.map((protocol) => protocol.replace(':', '')).join(' or ')} URL` },
    )

/** `--start-block`: a block number, or `latest-N` for N blocks behind the upstream's head at first start. */
export const startBlock = z
  .string()
  .regex(/^(\d+|latest(-\d+)?)$/, { error: 'must be a block number or latest-N' })
  .transform((value): StartBlock => {
    if (value === 'latest') return { latestMinus: 0 }
    if (value.startsWith('latest-')) return { latestMinus: Number(value.slice('latest-'.length)) }
    return Number(value)
  })

const databaseUrl = z.string().min(1, { error: 'must not be empty' })

export const serveConfigSchema = z.object({
  port: port.default(8545),
  host: z.string().min(1).default('127.0.0.1'),
  databaseUrl: databaseUrl.default(DEFAULT_DATABASE_URL),
  upstreamRpc: url(['http:', 'https:', 'ws:', 'wss:']),
  upstreamWs: url(['ws:', 'wss:']).optional(),
  flashblocksWs: url(['ws:', 'wss:']).optional(),
  startBlock: startBlock.prefault('latest-10000'),
  // Endpoint policies (src/policy): the public endpoint's limits, then the dedicated endpoints' ones.
  publicRateLimit: nonNegative.default(50),
  publicMaxBatch: positiveInt.default(100),
  publicMaxBody: positiveInt.default(1024 * 1024),
  publicMaxBlockRange: positiveInt.default(2_000),
  publicMaxLogs: positiveInt.default(10_000),
  maxBatch: positiveInt.default(1_000),
  maxBody: positiveInt.default(5 * 1024 * 1024),
  maxBlockRange: positiveInt.default(10_000),
  maxLogs: positiveInt.default(10_000),
  trustProxy: z.stringbool({ error: 'must be true or false' }).default(false),
  maxQueryCost: nonNegative.default(250_000),
  answerCacheMb: nonNegativeInt.default(DEFAULT_ANSWER_CACHE_BYTES / MIB),
  ingestBatchSize: positiveInt.default(100),
  registrationRateLimit: nonNegative.default(20),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
})

export type ServeConfig = z.output<typeof serveConfigSchema>

/** `flashgate devnet`: the local chain alone (DESIGN.md §6). */
export const devnetConfigSchema = z.object({
  port: port.default(8546),
  flashblocksPort: port.default(8547),
  blockTime: decimal('must be a number of seconds').pipe(z.number().positive({ error: 'must be positive' })).default(2),
  flashblockInterval: positiveInt.default(200),
  plain: z.stringbool().default(false),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
})

export type DevnetConfig = z.output<typeof devnetConfigSchema>

/** Flag name, environment variable, and what it sets: the single table behind `--help` and the README. */
export const OPTIONS = [
  { key: 'port', flag: 'port', env: 'PORT', help: 'gateway HTTP port (default 8545)' },
  { key: 'host', flag: 'host', env: 'HOST', help: 'interface to bind (default 127.0.0.1)' },
  { key: 'databaseUrl', flag: 'database-url', env: 'DATABASE_URL', help: `postgres://… or a PGlite directory or memory:// (default ${DEFAULT_DATABASE_URL})` },
  { key: 'upstreamRpc', flag: 'upstream-rpc', env: 'UPSTREAM_RPC_URL', help: 'upstream node JSON-RPC URL (http(s) or ws(s))' },
  { key: 'upstreamWs', flag: 'upstream-ws', env: 'UPSTREAM_WS_URL', help: 'upstream WebSocket URL for newHeads (optional; polling otherwise)' },
  { key: 'flashblocksWs', flag: 'flashblocks-ws', env: 'FLASHBLOCKS_WS_URL', help: 'Flashblocks WebSocket feed for the pending view (optional)' },
  { key: 'startBlock', flag: 'start-block', env: 'START_BLOCK', help: 'first block of a new index: a number or latest-N (default latest-10000)' },
  { key: 'publicRateLimit', flag: 'public-rate-limit', env: 'PUBLIC_RATE_LIMIT', help: 'public endpoint: requests per second per client address, 0 for no limit (default 50)' },
  { key: 'publicMaxBatch', flag: 'public-max-batch', env: 'PUBLIC_MAX_BATCH', help: 'public endpoint: calls per batch (default 100)' },
  { key: 'publicMaxBody', flag: 'public-max-body', env: 'PUBLIC_MAX_BODY', help: 'public endpoint: bytes per request body (default 1048576)' },
  { key: 'publicMaxBlockRange', flag: 'public-max-block-range', env: 'PUBLIC_MAX_BLOCK_RANGE', help: 'public endpoint: largest eth_getLogs block range (default 2000)' },
  { key: 'publicMaxLogs', flag: 'public-max-logs', env: 'PUBLIC_MAX_LOGS', help: 'public endpoint: largest eth_getLogs result (default 10000)' },
  { key: 'maxBatch', flag: 'max-batch', env: 'MAX_BATCH', help: 'dedicated endpoints: calls per batch (default 1000)' },
  { key: 'maxBody', flag: 'max-body', env: 'MAX_BODY', help: 'dedicated endpoints: bytes per request body (default 5242880)' },
  { key: 'maxBlockRange', flag: 'max-block-range', env: 'MAX_BLOCK_RANGE', help: 'dedicated endpoints: largest eth_getLogs block range (default 10000)' },
  { key: 'maxLogs', flag: 'max-logs', env: 'MAX_LOGS', help: 'dedicated endpoints: largest eth_getLogs result (default 10000)' },
  { key: 'maxQueryCost', flag: 'max-query-cost', env: 'MAX_QUERY_COST', help: 'largest planner cost of an eth_getLogs that no index answers exactly, 0 for no estimate (default 250000)' },
  { key: 'answerCacheMb', flag: 'answer-cache-mb', env: 'ANSWER_CACHE_MB', help: 'memory for answers kept by block (receipts, logs, account reads), in MiB; 0 for none (default 64)' },
  { key: 'trustProxy', flag: 'trust-proxy', env: 'TRUST_PROXY', help: 'take client addresses from X-Forwarded-For, behind a reverse proxy (true/false, default false)' },
  { key: 'ingestBatchSize', flag: 'ingest-batch-size', env: 'INGEST_BATCH_SIZE', help: 'blocks written per transaction while backfilling (default 100)' },
  { key: 'registrationRateLimit', flag: 'registration-rate-limit', env: 'REGISTRATION_RATE_LIMIT', help: 'builder-code registrations per second per client address, 0 for no limit (default 20)' },
  { key: 'flashblocksPort', flag: 'flashblocks-port', env: 'FLASHBLOCKS_PORT', help: 'devnet: Flashblocks WebSocket port (default 8547)' },
  { key: 'blockTime', flag: 'block-time', env: 'BLOCK_TIME', help: 'devnet: seconds per block (default 2)' },
  { key: 'flashblockInterval', flag: 'flashblock-interval', env: 'FLASHBLOCK_INTERVAL', help: 'devnet: milliseconds per flashblock (default 200)' },
  { key: 'plain', flag: 'plain', env: 'FLASHBLOCKS_PLAIN', help: 'devnet: send JSON text frames instead of Brotli (true/false)' },
  { key: 'logLevel', flag: 'log-level', env: 'LOG_LEVEL', help: 'fatal|error|warn|info|debug|trace|silent (default info)' },
] as const

export class ConfigError extends Error {
  override readonly name = 'ConfigError'
}

/** Merges flags over environment variables and validates them; a bad value names itself in one line. */
export function parseConfig<schema extends z.ZodObject>(
  schema: schema,
  flags: Record<string, string | undefined>,
  env: Record<string, string | undefined>,
): z.output<schema> {
  // An empty value counts as absent, so an empty flag leaves its environment variable in force.
  const nonEmpty = (value: string | undefined) => (value === '' ? undefined : value)
  const given = (option: (typeof OPTIONS)[number]) => nonEmpty(flags[option.flag]) ?? nonEmpty(env[option.env])
  const input: Record<string, string> = {}
  for (const option of OPTIONS) {
    if (!(option.key in schema.shape)) continue
    const value = given(option)
    if (value !== undefined) input[option.key] = value
  }
  const result = schema.safeParse(input)
  if (result.success) return result.data
  const issue = result.error.issues[0]!
  const option = OPTIONS.find((candidate) => candidate.key === issue.path[0])
  const name = option ? `--${option.flag} (${option.env})` : String(issue.path[0])
  const value = option ? given(option) : undefined
  const detail = issue.code === 'invalid_type' && value === undefined ? 'is required' : issue.message
  throw new ConfigError(`invalid configuration: ${name} ${detail}${value === undefined ? '' : ` (got ${JSON.stringify(value)})`}`)
}
