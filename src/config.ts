// Read by every command, `--help` and a bad flag included: only light modules here (no viem, drivers or ABIs).
import * as Address from 'ox/Address'
import { z } from 'zod'
import { parseEntryPointSetting } from './attribution/entry-point-setting.js'
import { databaseUrlProblem, isPostgresUrl } from './db/urls.js'
import { FEED_FORMATS } from './devnet/feed-format.js'
import type { StartBlock } from './ingest/index.js'
import { PENDING_SOURCE_MODES } from './pending/hydrate.js'
import { DEFAULT_ANSWER_CACHE_BYTES } from './resolvers/cache.js'
import { DEFAULT_MAX_LOGS_BYTES } from './resolvers/limits.js'

export const DEFAULT_DATABASE_URL = './.flashgate/pglite'

export const MIB = 1024 * 1024

/**
 * Flags and environment variables are strings: only plain decimals count as numbers (`z.coerce` would take
 * `" "` as 0 and `0x10` as 16). Numbers given directly (tests, embedding) pass as they are.
 */
const decimal = (error: string) =>
  z.preprocess((value) => (typeof value === 'string' ? (/^-?\d+(\.\d+)?$/.test(value) ? Number(value) : Number.NaN) : value), z.number({ error }))

const port = decimal('must be a port number').pipe(
  z.number().int({ error: 'must be a whole number' }).min(0, { error: 'must be between 0 and 65535' }).max(65_535, { error: 'must be between 0 and 65535' }),
)

const positiveInt = decimal('must be a number').pipe(z.number().int({ error: 'must be a whole number' }).positive({ error: 'must be positive' }))

const nonNegative = decimal('must be a number').pipe(z.number().min(0, { error: 'must not be negative' }))

const nonNegativeInt = decimal('must be a number').pipe(z.number().int({ error: 'must be a whole number' }).min(0, { error: 'must not be negative' }))

const url = (protocols: string[]) =>
  z.string().refine(
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

const databaseUrl = z
  .string()
  .min(1, { error: 'must not be empty' })
  .superRefine((url, context) => {
    const problem = databaseUrlProblem(url)
    if (problem !== null) context.addIssue({ code: 'custom', message: problem })
  })
/**
 * What a `serve` process does: `ingest` keeps the index (and answers health and metrics only), `serve`
 * answers the APIs and never writes what a read brings, `all` both (one process, the default).
 */
export const ROLES = ['all', 'ingest', 'serve'] as const
export type Role = (typeof ROLES)[number]

/** `--history`: a read below the index goes to the upstream, or is refused with a clear error (src/resolvers/history.ts). */
export const HISTORY_MODES = ['upstream', 'refuse'] as const
export type HistoryMode = (typeof HISTORY_MODES)[number]

/** Keys and channels of one deployment start with this, unless `--redis-prefix` says otherwise (src/redis). */
export const DEFAULT_REDIS_PREFIX = 'flashgate:'
/** Seconds a stop (SIGTERM, SIGINT, SIGHUP) may take before the process exits 1 (src/cli/shutdown.ts). */
export const DEFAULT_STOP_TIMEOUT_S = 30

/** Seconds a client has to send a whole request, head and body, by default: geth's `ReadTimeout`. */
export const DEFAULT_REQUEST_TIMEOUT_S = 30
/** The longest `--request-timeout`: an hour. */
const MAX_REQUEST_TIMEOUT_S = 3_600

/** `flashgate keys create --policy`: a key opens an endpoint with the dedicated or the public limits (src/policy). */
export const API_KEY_POLICIES = ['dedicated', 'public'] as const
export type ApiKeyPolicy = (typeof API_KEY_POLICIES)[number]

/** `flashgate attribution`: the gateway's port on this host, unless `--url` (FLASHGATE_URL) names the gateway. */
export const attributionConfigSchema = z.object({ port: port.default(8545) })

/** `flashgate attribution --url` (FLASHGATE_URL): where the gateway answers JSON-RPC. */
export const gatewayUrl = url(['http:', 'https:'])

/** `flashgate devnet --profile` (src/devnet/profile.ts): none, or Base's shape. */
export const LOAD_PROFILES = ['none', 'base'] as const
export type LoadProfileName = (typeof LOAD_PROFILES)[number]

export const serveConfigSchema = z.object({
  port: port.default(8545),
  host: z.string().min(1).default('127.0.0.1'),
  databaseUrl: databaseUrl.default(DEFAULT_DATABASE_URL),
  // Reads from a streaming replica; writes (registrations, keys) still go to `databaseUrl` (docs/DEPLOY.md).
  databaseReadUrl: databaseUrl.optional(),
  role: z.enum(ROLES, { error: `must be one of ${ROLES.join(', ')}` }).default('all'),
  // Serving workers on one port (src/cluster); absent: one per core on Postgres, one process on PGlite.
  workers: positiveInt.optional(),
  upstreamRpc: url(['http:', 'https:', 'ws:', 'wss:']),
  upstreamWs: url(['ws:', 'wss:']).optional(),
  flashblocksWs: url(['ws:', 'wss:']).optional(),
  pendingSource: z.enum(PENDING_SOURCE_MODES, { error: `must be one of ${PENDING_SOURCE_MODES.join(', ')}` }).default('auto'),
  // Threads decoding flashblock transactions (src/pending/decode-pool.ts); absent: one per core up to 4, from 4 cores.
  decodeThreads: nonNegativeInt.optional(),
  history: z.enum(HISTORY_MODES, { error: `must be one of ${HISTORY_MODES.join(', ')}` }).default('upstream'),
  corsOrigins: z.string().min(1, { error: 'must not be empty' }).default('*'),
  // Shared by all serving processes: rate limits, key revocations, forwarded nonces (src/redis).
  redisUrl: url(['redis:', 'rediss:']).optional(),
  redisPrefix: z.string().min(1, { error: 'must not be empty' }).default(DEFAULT_REDIS_PREFIX),
  startBlock: startBlock.prefault('latest-10000'),
  // The on-chain Builder Codes registry (src/attribution/registry.ts): an address, `default` (Base's, on Base
  // mainnet and Sepolia; none elsewhere) or `off`.
  builderCodeRegistry: z
    .union(
      [z.enum(['default', 'off']), z.string().refine((value) => Address.validate(value, { strict: false }), { error: 'must be an address, default or off' })],
      {
        error: 'must be an address, default or off',
      },
    )
    .default('default')
    .transform((value) => (value === 'off' ? null : value === 'default' ? ('default' as const) : (value.toLowerCase() as `0x${string}`))),
  // ERC-4337 EntryPoints whose user operations are attributed (src/attribution/user-operations.ts).
  entryPoints: z
    .string()
    .default('canonical')
    .transform((value, context) => {
      try {
        return parseEntryPointSetting(value)
      } catch (error) {
        context.addIssue({ code: 'custom', message: `must be canonical or version=address,… (${(error as Error).message})` })
        return z.NEVER
      }
    }),
  // Keep the newest N blocks, prune older history in the background (src/ingest/retention.ts); absent: keep all.
  retainBlocks: positiveInt.optional(),
  // Endpoint policies (src/policy): the public endpoint's limits, then the dedicated endpoints' ones.
  publicRateLimit: nonNegative.default(50),
  publicMaxBatch: positiveInt.default(100),
  publicMaxBatchResponse: positiveInt.default(10 * 1024 * 1024),
  publicMaxBody: positiveInt.default(1024 * 1024),
  publicMaxBlockRange: positiveInt.default(2_000),
  publicMaxLogs: positiveInt.default(10_000),
  publicMaxLogsBytes: positiveInt.default(25 * MIB),
  maxBatch: positiveInt.default(1_000),
  maxBatchResponse: positiveInt.default(25 * 1024 * 1024),
  maxBody: positiveInt.default(5 * 1024 * 1024),
  maxBlockRange: positiveInt.default(10_000),
  maxLogs: positiveInt.default(10_000),
  maxLogsBytes: positiveInt.default(DEFAULT_MAX_LOGS_BYTES),
  trustProxy: z.stringbool({ error: 'must be true or false (or 1/0, yes/no, on/off)' }).default(false),
  maxQueryCost: nonNegative.default(250_000),
  answerCacheMb: nonNegativeInt.default(DEFAULT_ANSWER_CACHE_BYTES / MIB),
  ingestBatchSize: positiveInt.default(100),
  // Seconds without an answer from the upstream after which /readyz calls it unresponsive (src/app.ts).
  readyUpstreamSilence: positiveInt.default(30),
  requestTimeout: decimal('must be a number')
    .pipe(
      z
        .number()
        .int({ error: 'must be a whole number' })
        .positive({ error: 'must be positive' })
        .max(MAX_REQUEST_TIMEOUT_S, { error: `must be at most ${MAX_REQUEST_TIMEOUT_S}` }),
    )
    .default(DEFAULT_REQUEST_TIMEOUT_S),
  stopTimeout: positiveInt.default(DEFAULT_STOP_TIMEOUT_S),
  registrationRateLimit: nonNegative.default(20),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
})

export type ServeConfig = z.output<typeof serveConfigSchema>

/** Refuses a role or replica that cannot work with the database named: before anything is opened. */
export function checkDeployment(config: ServeConfig) {
  const postgres = isPostgresUrl(config.databaseUrl)
  if (config.role !== 'all' && !postgres)
    throw new ConfigError(
      `invalid configuration: --role ${config.role} needs a Postgres database shared by several processes (PGlite is one process: use --role all)`,
    )
  if (config.databaseReadUrl !== undefined && !(postgres && isPostgresUrl(config.databaseReadUrl)))
    throw new ConfigError('invalid configuration: --database-read-url needs Postgres, for it and for --database-url (its primary)')
  if (config.databaseReadUrl !== undefined && config.role === 'ingest')
    throw new ConfigError('invalid configuration: --database-read-url is for serving processes; --role ingest writes to --database-url')
}

/** The devnet's options, `dev`'s and `devnet`'s alike (their block and flashblock times checked together below). */
const devnetOptionsSchema = z.object({
  port: port.default(8546),
  flashblocksPort: port.default(8547),
  blockTime: decimal('must be a number of seconds')
    .pipe(z.number().positive({ error: 'must be positive' }))
    .default(2),
  flashblockInterval: positiveInt.default(200),
  // A flag without a value on the command line (src/cli/flags.ts), true or false in FLASHBLOCKS_PLAIN.
  plain: z.stringbool({ error: 'must be true or false (or 1/0, yes/no, on/off)' }).default(false),
  feedFormat: z.enum(FEED_FORMATS, { error: `must be one of ${FEED_FORMATS.join(', ')}` }).default('current'),
  profile: z.enum(LOAD_PROFILES, { error: `must be one of ${LOAD_PROFILES.join(', ')}` }).default('none'),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
})

/**
 * A block is a whole number of flashblocks (src/devnet/sequencer.ts): checked with the other values, so that
 * `--block-time 0.1` is refused as a bad value (exit 2) before the devnet starts.
 */
const wholeFlashblocks = (config: { blockTime: number; flashblockInterval: number }, context: z.RefinementCtx) => {
  const blockTimeMs = Math.round(config.blockTime * 1_000)
  const flashblocks = blockTimeMs / config.flashblockInterval
  if (!Number.isInteger(flashblocks) || flashblocks < 1)
    context.addIssue({
      code: 'custom',
      path: ['flashblockInterval'],
      message: `must divide --block-time (BLOCK_TIME) into whole flashblocks: ${blockTimeMs} ms is not a positive multiple of ${config.flashblockInterval} ms`,
    })
}

/** `flashgate devnet`: the local chain alone (DESIGN.md §6). */
export const devnetConfigSchema = devnetOptionsSchema.superRefine(wholeFlashblocks)

export type DevnetConfig = z.output<typeof devnetConfigSchema>

/** `flashgate dev`: the devnet's options, its JSON-RPC on `--devnet-port` (`--port` is the gateway's). */
export const devConfigSchema = devnetOptionsSchema
  .omit({ port: true })
  .extend({ devnetPort: port.default(8546) })
  .superRefine(wholeFlashblocks)

export type DevConfig = z.output<typeof devConfigSchema>

/** Flag name, environment variable, and what it sets: the single table behind `--help` and the README. */
export const OPTIONS = [
  { key: 'port', flag: 'port', env: 'PORT', help: 'gateway HTTP port (default 8545)' },
  { key: 'host', flag: 'host', env: 'HOST', help: 'interface to bind (default 127.0.0.1)' },
  { key: 'databaseUrl', flag: 'database-url', env: 'DATABASE_URL', help: `postgres://… or a PGlite directory or memory:// (default ${DEFAULT_DATABASE_URL})` },
  {
    key: 'databaseReadUrl',
    flag: 'database-read-url',
    env: 'DATABASE_READ_URL',
    help: "postgres://… of a streaming replica to read from; the head served is the replica's own (optional)",
  },
  { key: 'role', flag: 'role', env: 'ROLE', help: 'all (default), ingest (index only; health and metrics) or serve (APIs only, no ingester)' },
  {
    key: 'workers',
    flag: 'workers',
    env: 'WORKERS',
    help: 'serving workers on one port, sharing one feed and ingester (default: one per core on Postgres; 1 on PGlite)',
  },
  { key: 'upstreamRpc', flag: 'upstream-rpc', env: 'UPSTREAM_RPC_URL', help: 'upstream node JSON-RPC URL (http(s) or ws(s))' },
  { key: 'upstreamWs', flag: 'upstream-ws', env: 'UPSTREAM_WS_URL', help: 'upstream WebSocket URL for newHeads (optional; polling otherwise)' },
  { key: 'flashblocksWs', flag: 'flashblocks-ws', env: 'FLASHBLOCKS_WS_URL', help: 'Flashblocks WebSocket feed for the pending view (optional)' },
  {
    key: 'pendingSource',
    flag: 'pending-source',
    env: 'PENDING_SOURCE',
    help: 'pre-confirmed receipts and balances when the feed has none: auto|hydrate|frames|execute (default auto)',
  },
  {
    key: 'decodeThreads',
    flag: 'decode-threads',
    env: 'DECODE_THREADS',
    help: 'threads decoding flashblock transactions and recovering their senders (default: one per core up to 4, from 4 cores; 0: the main thread)',
  },
  {
    key: 'history',
    flag: 'history',
    env: 'HISTORY',
    help: 'reads below the first indexed block: upstream (answered from the node) or refuse (default upstream)',
  },
  {
    key: 'corsOrigins',
    flag: 'cors-origins',
    env: 'CORS_ORIGINS',
    help: 'origins allowed to call the JSON-RPC, GraphQL and REST endpoints from a browser: * or a comma-separated list (default *)',
  },
  {
    key: 'redisUrl',
    flag: 'redis-url',
    env: 'REDIS_URL',
    help: 'redis://… shared by all serving processes: rate limits, key revocations, forwarded nonces (optional; per process otherwise)',
  },
  {
    key: 'redisPrefix',
    flag: 'redis-prefix',
    env: 'REDIS_PREFIX',
    help: `prefix of flashgate's Redis keys and channels, one per deployment sharing a Redis (default ${DEFAULT_REDIS_PREFIX})`,
  },
  { key: 'startBlock', flag: 'start-block', env: 'START_BLOCK', help: 'first block of a new index: a number or latest-N (default latest-10000)' },
  {
    key: 'builderCodeRegistry',
    flag: 'builder-code-registry',
    env: 'BUILDER_CODE_REGISTRY',
    help: "on-chain Builder Codes registry whose codes' owners and payout addresses are shown: an address, default (Base's, on Base and Base Sepolia) or off",
  },
  {
    key: 'entryPoints',
    flag: 'entry-points',
    env: 'ENTRY_POINTS',
    help: 'ERC-4337 EntryPoints whose user operations are attributed: canonical (0.6, 0.7, 0.8 at their canonical addresses) or version=address,… (default canonical)',
  },
  {
    key: 'retainBlocks',
    flag: 'retain-blocks',
    env: 'RETAIN_BLOCKS',
    help: 'keep the newest N blocks and prune older ones in the background; reads below follow --history (default: keep all)',
  },
  {
    key: 'publicRateLimit',
    flag: 'public-rate-limit',
    env: 'PUBLIC_RATE_LIMIT',
    help: 'public endpoint: requests per second per client address, 0 for no limit (default 50)',
  },
  { key: 'publicMaxBatch', flag: 'public-max-batch', env: 'PUBLIC_MAX_BATCH', help: 'public endpoint: calls per batch (default 100)' },
  {
    key: 'publicMaxBatchResponse',
    flag: 'public-max-batch-response',
    env: 'PUBLIC_MAX_BATCH_RESPONSE',
    help: 'public endpoint: bytes of results per batch, past which the calls not yet started are -32003 (default 10485760)',
  },
  { key: 'publicMaxBody', flag: 'public-max-body', env: 'PUBLIC_MAX_BODY', help: 'public endpoint: bytes per request body (default 1048576)' },
  {
    key: 'publicMaxBlockRange',
    flag: 'public-max-block-range',
    env: 'PUBLIC_MAX_BLOCK_RANGE',
    help: 'public endpoint: largest eth_getLogs block range (default 2000)',
  },
  { key: 'publicMaxLogs', flag: 'public-max-logs', env: 'PUBLIC_MAX_LOGS', help: 'public endpoint: largest eth_getLogs result (default 10000)' },
  {
    key: 'publicMaxLogsBytes',
    flag: 'public-max-logs-bytes',
    env: 'PUBLIC_MAX_LOGS_BYTES',
    help: 'public endpoint: largest eth_getLogs answer in bytes, past which it is -32602 with a range that fits (default 26214400)',
  },
  { key: 'maxBatch', flag: 'max-batch', env: 'MAX_BATCH', help: 'dedicated endpoints: calls per batch (default 1000)' },
  {
    key: 'maxBatchResponse',
    flag: 'max-batch-response',
    env: 'MAX_BATCH_RESPONSE',
    help: 'dedicated endpoints: bytes of results per batch, past which the calls not yet started are -32003 (default 26214400)',
  },
  { key: 'maxBody', flag: 'max-body', env: 'MAX_BODY', help: 'dedicated endpoints: bytes per request body (default 5242880)' },
  { key: 'maxBlockRange', flag: 'max-block-range', env: 'MAX_BLOCK_RANGE', help: 'dedicated endpoints: largest eth_getLogs block range (default 10000)' },
  { key: 'maxLogs', flag: 'max-logs', env: 'MAX_LOGS', help: 'dedicated endpoints: largest eth_getLogs result (default 10000)' },
  {
    key: 'maxLogsBytes',
    flag: 'max-logs-bytes',
    env: 'MAX_LOGS_BYTES',
    help: 'dedicated endpoints: largest eth_getLogs answer in bytes, past which it is -32602 with a range that fits (default 104857600)',
  },
  {
    key: 'maxQueryCost',
    flag: 'max-query-cost',
    env: 'MAX_QUERY_COST',
    help: 'largest planner cost of an eth_getLogs that no index answers exactly, 0 for no estimate (default 250000)',
  },
  {
    key: 'answerCacheMb',
    flag: 'answer-cache-mb',
    env: 'ANSWER_CACHE_MB',
    help: 'memory for answers kept by block (receipts, logs, account reads), in MiB; 0 for none (default 64)',
  },
  {
    key: 'trustProxy',
    flag: 'trust-proxy',
    env: 'TRUST_PROXY',
    help: 'take client addresses from X-Forwarded-For, behind a reverse proxy (true/false, default false)',
  },
  { key: 'ingestBatchSize', flag: 'ingest-batch-size', env: 'INGEST_BATCH_SIZE', help: 'blocks written per transaction while backfilling (default 100)' },
  {
    key: 'readyUpstreamSilence',
    flag: 'ready-upstream-silence',
    env: 'READY_UPSTREAM_SILENCE',
    help: 'seconds without an answer from the upstream after which /readyz calls it unresponsive (default 30)',
  },
  {
    key: 'requestTimeout',
    flag: 'request-timeout',
    env: 'REQUEST_TIMEOUT',
    help: `seconds a client has to send a whole request, head and body, before a 408 closes the connection (default ${DEFAULT_REQUEST_TIMEOUT_S})`,
  },
  {
    key: 'stopTimeout',
    flag: 'stop-timeout',
    env: 'STOP_TIMEOUT',
    help: `seconds a stop on SIGTERM, SIGINT or SIGHUP may take before the process exits 1 (default ${DEFAULT_STOP_TIMEOUT_S})`,
  },
  {
    key: 'registrationRateLimit',
    flag: 'registration-rate-limit',
    env: 'REGISTRATION_RATE_LIMIT',
    help: 'builder-code registrations per second per client address, 0 for no limit (default 20)',
  },
  { key: 'devnetPort', flag: 'devnet-port', env: 'DEVNET_PORT', help: "dev: the devnet's JSON-RPC port (default 8546; devnet itself takes --port)" },
  { key: 'flashblocksPort', flag: 'flashblocks-port', env: 'FLASHBLOCKS_PORT', help: 'dev and devnet: Flashblocks WebSocket port (default 8547)' },
  { key: 'blockTime', flag: 'block-time', env: 'BLOCK_TIME', help: 'dev and devnet: seconds per block (default 2)' },
  { key: 'flashblockInterval', flag: 'flashblock-interval', env: 'FLASHBLOCK_INTERVAL', help: 'dev and devnet: milliseconds per flashblock (default 200)' },
  {
    key: 'plain',
    flag: 'plain',
    env: 'FLASHBLOCKS_PLAIN',
    help: 'dev and devnet: send JSON text frames instead of Brotli: a flag without a value, true or false in the variable (default false)',
  },
  {
    key: 'feedFormat',
    flag: 'feed-format',
    env: 'FEED_FORMAT',
    help: 'dev and devnet: Flashblocks format, current (Base since Azul) or legacy (with receipts and balances) (default current)',
  },
  {
    key: 'profile',
    flag: 'profile',
    env: 'LOAD_PROFILE',
    help: 'dev and devnet: load profile, none or base (~250 transactions and ~1,500 logs a block, ERC-8021 suffixes on a share) (default none)',
  },
  { key: 'logLevel', flag: 'log-level', env: 'LOG_LEVEL', help: 'fatal|error|warn|info|debug|trace|silent (default info)' },
] as const

export class ConfigError extends Error {
  override readonly name = 'ConfigError'
}

/** An empty value counts as absent, so an empty flag leaves its environment variable in force. */
export const nonEmpty = (value: string | undefined) => (value === '' ? undefined : value)

/** Merges flags over environment variables and validates them; a bad value names itself in one line. */
export function parseConfig<schema extends z.ZodObject>(
  schema: schema,
  flags: Record<string, string | undefined>,
  env: Record<string, string | undefined>,
): z.output<schema> {
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
