import { createDb } from '../db/index.js'
import { isApiError } from '../errors.js'
import { createLogger } from '../logger.js'
import { createRedis } from '../redis/index.js'
import { createResolvers } from '../resolvers/index.js'
import type { KeyStore } from './keys.js'
import { UsageError } from './usage-error.js'

/**
 * The keys of a database `flashgate keys` opens itself (Postgres, or a PGlite directory nobody holds). With
 * `redis`, a revocation is announced to the gateways at once.
 */
export async function openDatabaseKeyStore(databaseUrl: string, description: string, redis: { url: string; prefix: string } | null): Promise<KeyStore> {
  const db = await createDb({ databaseUrl })
  const shared = redis === null ? null : await createRedis({ ...redis, logger: createLogger('warn') })
  const resolvers = createResolvers({ db, upstream: null, redis: shared })
  /** A refusal of the resolvers (a name already taken) is the command's one line. */
  const refusals = <result>(work: Promise<result>) =>
    work.catch((error: unknown) => {
      throw isApiError(error) ? new UsageError(error.message) : error
    })
  return {
    description,
    create: (parameters) => refusals(resolvers.createApiKey(parameters)),
    list: () => refusals(resolvers.listApiKeys()),
    revoke: (nameOrId) => refusals(resolvers.revokeApiKey(nameOrId)),
    async close() {
      await shared?.close()
      await db.close()
    },
  }
}
