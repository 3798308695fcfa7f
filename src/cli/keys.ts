import { CommandLineError } from './flags.js'
import { z } from 'zod'
import { API_KEY_POLICIES, type ApiKeyPolicy, DEFAULT_REDIS_PREFIX } from '../config.js'
import { DatabaseInUseError, directoryHolder } from '../db/lock.js'
import { maskedDatabaseUrl, pgliteDirectory } from '../db/urls.js'
import type { ApiKeyRecord } from '../resolvers/index.js'
import { type AdminEndpoint, type AdminKeyRecord, readAdminEndpoint } from '../server/admin-endpoint.js'
import { chooseDatabase } from './databases.js'
import { UsageError } from './usage-error.js'

/** Requests per second of a new API key unless `--rate` says otherwise. */
const DEFAULT_KEY_RATE_LIMIT = 100
/** The largest rate a key can have (the column is a 32-bit integer). */
const MAX_KEY_RATE_LIMIT = 2_147_483_647
/** How long `keys` waits for a running gateway's admin endpoint. */
const ADMIN_TIMEOUT_MS = 10_000

const keyOptions = z.object({
  name: z
    .string({ error: 'is required' })
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, { error: 'must be 1 to 64 letters, digits, dots, dashes or underscores' })
    // `keys revoke <name|id>` takes digits alone for an id: such a name would hide the key with that id.
    .refine((name) => !/^\d+$/.test(name), { error: 'must not be digits alone (revoke takes those as a key id)' }),
  policy: z.enum(API_KEY_POLICIES, { error: `must be one of ${API_KEY_POLICIES.join(', ')}` }).default('dedicated'),
  rate: z
    .string()
    // An empty value (an unset shell variable) is a mistake, not "no limit": 0 says that.
    .regex(/^\d+$/, { error: 'must be a whole number of requests per second (0 for no limit)' })
    .transform(Number)
    .pipe(z.number().max(MAX_KEY_RATE_LIMIT, { error: `must be at most ${MAX_KEY_RATE_LIMIT} (0 for no limit)` }))
    .optional()
    .transform((rate) => rate ?? DEFAULT_KEY_RATE_LIMIT),
})

/**
 * Where `keys` reads and writes keys: the database itself (key-store.ts, loaded only then), or the running
 * gateway that holds it. A refusal (a name taken, say) throws a `UsageError`.
 */
export type KeyStore = {
  /** Which database, and how it was reached. */
  description: string
  create(parameters: { name: string; policy: ApiKeyPolicy; rateLimit: number }): Promise<{ key: string; record: ApiKeyRecord }>
  list(): Promise<ApiKeyRecord[]>
  revoke(nameOrId: string): Promise<ApiKeyRecord | null>
  close(): Promise<void>
}

function describeKey(key: ApiKeyRecord): string {
  const status = key.revokedAt === null ? 'active' : `revoked ${key.revokedAt.toISOString()}`
  const rate = key.rateLimit === 0 ? 'no limit' : `${key.rateLimit} req/s`
  return `${String(key.id).padStart(4)}  ${key.name.padEnd(24)} ${key.prefix}…  ${key.policy.padEnd(9)} ${rate.padEnd(12)} ${key.createdAt.toISOString()}  ${status}`
}

const fromWire = (record: AdminKeyRecord): ApiKeyRecord => ({
  ...record,
  createdAt: new Date(record.createdAt),
  revokedAt: record.revokedAt === null ? null : new Date(record.revokedAt),
})

/** The keys of a PGlite directory that a running `flashgate serve` or `dev` holds, through its admin endpoint. */
function adminKeyStore(endpoint: AdminEndpoint, description: string): KeyStore {
  async function call<answer>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<answer> {
    let response: Response
    try {
      response = await fetch(`${endpoint.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${endpoint.token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(ADMIN_TIMEOUT_MS),
      })
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name
      throw new UsageError(`could not reach the flashgate process (pid ${endpoint.pid}) that holds the database at ${endpoint.url} (${cause})`)
    }
    const answer = (await response.json().catch(() => ({ error: `HTTP ${response.status}` }))) as answer & { error?: string }
    if (!response.ok) throw new UsageError(`the running flashgate (pid ${endpoint.pid}) answered: ${answer.error ?? `HTTP ${response.status}`}`)
    return answer
  }
  return {
    description,
    async create(parameters) {
      const { key, record } = await call<{ key: string; record: AdminKeyRecord }>('POST', '/keys', parameters)
      return { key, record: fromWire(record) }
    },
    async list() {
      return (await call<{ keys: AdminKeyRecord[] }>('GET', '/keys')).keys.map(fromWire)
    },
    async revoke(nameOrId) {
      const { record } = await call<{ record: AdminKeyRecord | null }>('POST', '/keys/revoke', { nameOrId })
      return record === null ? null : fromWire(record)
    },
    async close() {},
  }
}

/**
 * Opens the keys of `databaseUrl`: Postgres directly (any number of processes share it); a PGlite directory
 * directly when nobody holds it, through the holder's admin endpoint when a gateway does, and not at all
 * (one line saying who holds it) otherwise. With `redis` (`--redis-url`), a revocation is announced to the
 * gateways at once; without it they see it within their key cache's lifetime.
 */
async function openKeyStore(databaseUrl: string, note: string | null, redis: { url: string; prefix: string } | null): Promise<KeyStore> {
  const shown = maskedDatabaseUrl(databaseUrl)
  const noted = note === null ? '' : ` (${note})`
  const directory = pgliteDirectory(databaseUrl)
  const holder = directory === null ? null : directoryHolder(directory)
  if (directory !== null && holder !== null) {
    const endpoint = readAdminEndpoint(directory)
    if (endpoint === null || endpoint.pid !== holder.pid) throw new DatabaseInUseError(databaseUrl, holder)
    return adminKeyStore(endpoint, `database: ${shown}, through the running flashgate ${holder.command} (pid ${holder.pid})${noted}`)
  }
  const { openDatabaseKeyStore } = await import('./key-store.js')
  return openDatabaseKeyStore(databaseUrl, `database: ${shown}${noted}`, redis)
}

/** `flashgate keys create|list|revoke`: API keys of the dedicated endpoints, in the configured database. */
export async function keysCommand({
  action,
  argument,
  flags,
  env,
  print = console.log,
  inform = console.error,
}: {
  action: string | undefined
  argument: string | undefined
  flags: Record<string, string | undefined>
  env: Record<string, string | undefined>
  /** The command's output (stdout). */
  print?: (line: string) => void
  /** Which database was used (stderr, so that stdout stays the output alone). */
  inform?: (line: string) => void
}) {
  if (action !== 'create' && action !== 'list' && action !== 'revoke') throw new CommandLineError('usage: flashgate keys create|list|revoke')
  let options: z.output<typeof keyOptions> | null = null
  if (action === 'create') {
    const parsed = keyOptions.safeParse({ name: flags.name, policy: flags.policy, rate: flags.rate })
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!
      throw new CommandLineError(`--${String(issue.path[0])} ${issue.message}`)
    }
    options = parsed.data
  }
  if (action === 'revoke' && argument === undefined) throw new CommandLineError('usage: flashgate keys revoke <name|id>')
  const { databaseUrl, note } = chooseDatabase(flags, env)
  // An empty flag leaves its environment variable in force, as in parseConfig.
  const given = (flag: string, name: string) => flags[flag] || env[name] || null
  const redisUrl = given('redis-url', 'REDIS_URL')
  const redis = redisUrl === null ? null : { url: redisUrl, prefix: given('redis-prefix', 'REDIS_PREFIX') ?? DEFAULT_REDIS_PREFIX }
  let store: KeyStore
  try {
    store = await openKeyStore(databaseUrl, note, redis)
  } catch (error) {
    if (error instanceof DatabaseInUseError) throw new UsageError(error.message)
    throw error
  }
  inform(store.description)
  try {
    if (options !== null) {
      const { key, record } = await store.create({ name: options.name, policy: options.policy, rateLimit: options.rate })
      print(`${key}

API key ${JSON.stringify(record.name)} (${record.policy}, ${record.rateLimit === 0 ? 'no rate limit' : `${record.rateLimit} req/s`}).`)
      print('Use it as POST /rpc/<key>. It is shown only now: flashgate stores a hash of it.')
    } else if (action === 'list') {
      const records = await store.list()
      if (records.length === 0) print('no API keys; create one with flashgate keys create --name NAME')
      for (const record of records) print(describeKey(record))
    } else {
      const record = await store.revoke(argument!)
      if (record === null) throw new UsageError(`no API key named or numbered ${JSON.stringify(argument)}`)
      print(describeKey(record))
    }
  } finally {
    await store.close()
  }
}
