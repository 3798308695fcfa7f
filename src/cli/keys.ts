import { z } from 'zod'
import { serveConfigSchema } from '../config.js'
import { createDb } from '../db/index.js'
import { isApiError } from '../errors.js'
import { API_KEY_POLICIES, type ApiKeyRecord, createResolvers } from '../resolvers/index.js'
import { UsageError } from './usage-error.js'

/** Requests per second of a new API key unless `--rate` says otherwise. */
const DEFAULT_KEY_RATE_LIMIT = 100

const keyOptions = z.object({
  name: z
    .string({ error: 'is required' })
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, { error: 'must be 1 to 64 letters, digits, dots, dashes or underscores' }),
  policy: z.enum(API_KEY_POLICIES, { error: `must be one of ${API_KEY_POLICIES.join(', ')}` }).default('dedicated'),
  rate: z.coerce.number({ error: 'must be a number' }).int({ error: 'must be a whole number' }).min(0, { error: 'must not be negative' }).default(DEFAULT_KEY_RATE_LIMIT),
})

function describeKey(key: ApiKeyRecord): string {
  const status = key.revokedAt === null ? 'active' : `revoked ${key.revokedAt.toISOString()}`
  const rate = key.rateLimit === 0 ? 'no limit' : `${key.rateLimit} req/s`
  return `${String(key.id).padStart(4)}  ${key.name.padEnd(24)} ${key.prefix}…  ${key.policy.padEnd(9)} ${rate.padEnd(12)} ${key.createdAt.toISOString()}  ${status}`
}

/** `flashgate keys create|list|revoke`: API keys of the dedicated endpoints, in the configured database. */
export async function keysCommand({
  action,
  argument,
  flags,
  env,
  print = console.log,
}: {
  action: string | undefined
  argument: string | undefined
  flags: Record<string, string | undefined>
  env: Record<string, string | undefined>
  print?: (line: string) => void
}) {
  const databaseUrl = flags['database-url'] ?? env.DATABASE_URL ?? serveConfigSchema.shape.databaseUrl.parse(undefined)
  if (action !== 'create' && action !== 'list' && action !== 'revoke') throw new UsageError('usage: flashgate keys create|list|revoke')
  let options: z.output<typeof keyOptions> | null = null
  if (action === 'create') {
    const parsed = keyOptions.safeParse({ name: flags.name, policy: flags.policy, rate: flags.rate })
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!
      throw new UsageError(`--${String(issue.path[0])} ${issue.message}`)
    }
    options = parsed.data
  }
  if (action === 'revoke' && argument === undefined) throw new UsageError('usage: flashgate keys revoke <name|id>')
  const db = await createDb({ databaseUrl })
  try {
    const resolvers = createResolvers({ db, upstream: null })
    if (options !== null) {
      const { key, record } = await resolvers.createApiKey({ name: options.name, policy: options.policy, rateLimit: options.rate })
      print(`${key}

API key ${JSON.stringify(record.name)} (${record.policy}, ${record.rateLimit === 0 ? 'no rate limit' : `${record.rateLimit} req/s`}).`)
      print('Use it as POST /rpc/<key>. It is shown only now: flashgate stores a hash of it.')
    } else if (action === 'list') {
      const records = await resolvers.listApiKeys()
      if (records.length === 0) print('no API keys; create one with flashgate keys create --name NAME')
      for (const record of records) print(describeKey(record))
    } else {
      const record = await resolvers.revokeApiKey(argument!)
      if (record === null) throw new UsageError(`no API key named or numbered ${JSON.stringify(argument)}`)
      print(describeKey(record))
    }
  } catch (error) {
    if (isApiError(error)) throw new UsageError(error.message)
    throw error
  } finally {
    await db.close()
  }
}
