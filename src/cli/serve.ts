import type { Logger } from 'pino'
import { type Gateway, startGateway } from '../app.js'
import { isClusterWorker, startClusterPrimary, startClusterWorker, workerCount } from '../cluster/index.js'
import type { ServeConfig } from '../config.js'
import { createDb, maskedDatabaseUrl, pgliteDirectory } from '../db/index.js'
import { createLogger } from '../logger.js'
import { startAdminServer } from '../server/admin.js'
import { VERSION } from '../version.js'
import { optionName } from './flags.js'
import type { Shutdown } from './shutdown.js'
import { explainListenFailure } from './usage-error.js'

/** On PGlite the gateway holds the directory alone, so `flashgate keys` reaches it through a loopback admin endpoint. */
export async function startAdmin(gateway: Gateway, databaseUrl: string, logger: Logger) {
  const directory = pgliteDirectory(databaseUrl)
  if (directory === null) return null
  return startAdminServer({ resolvers: gateway.resolvers, directory, logger: logger.child({ module: 'admin' }) })
}

export async function serve(config: ServeConfig, shutdown: Shutdown) {
  const logger = createLogger(config.logLevel)
  if (isClusterWorker()) {
    const gateway = await startClusterWorker({ config, logger })
    shutdown.stopWith(() => gateway.stop())
    return
  }
  const workers = workerCount(config)
  if (workers > 1) {
    const primary = await startClusterPrimary({ config, logger, workers }).catch((error: unknown) => {
      throw explainListenFailure(error, [{ port: config.port, option: optionName('port') }])
    })
    logger.info({ url: primary.url, workers }, 'flashgate serving')
    printServing(primary.url, config, `${workers} workers`)
    shutdown.stopWith(primary.stop)
    return
  }
  const gateway = await startGateway({ config, logger }).catch((error: unknown) => {
    throw explainListenFailure(error, [{ port: config.port, option: optionName('port') }])
  })
  const admin = await startAdmin(gateway, config.databaseUrl, logger).catch(async (error: unknown) => {
    await gateway.stop()
    throw error
  })
  logger.info({ url: gateway.url }, 'flashgate serving')
  printServing(gateway.url, config, 'one process')
  shutdown.stopWith(async () => {
    await admin?.close()
    await gateway.stop()
  })
}

/** What the process answers, and nothing it refuses: `--role ingest` answers health and metrics only (docs/DEPLOY.md). */
function printServing(url: string, { role, databaseUrl }: Pick<ServeConfig, 'role' | 'databaseUrl'>, processes: string) {
  const apis =
    role === 'ingest' ? [] : [`  JSON-RPC   ${url}/   (dedicated: ${url}/rpc/<apiKey>, keys from flashgate keys create)`, `  GraphQL    ${url}/graphql`]
  console.log(
    [
      `flashgate ${VERSION} (${processes})`,
      ...apis,
      `  health     ${url}/healthz  ${url}/readyz  ${url}/metrics`,
      `  database   ${maskedDatabaseUrl(databaseUrl)}`,
    ].join('\n'),
  )
}

export async function migrate(databaseUrl: string) {
  const db = await createDb({ databaseUrl })
  await db.close()
  console.log(`migrations applied to ${databaseUrl}`)
}
