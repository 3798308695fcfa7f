import type { Logger } from 'pino'
import { type Gateway, startGateway } from '../app.js'
import { type DevnetConfig, type LoadProfileName, nonEmpty, serveConfigSchema } from '../config.js'
import { BASE_TRANSACTIONS_PER_BLOCK, createTrafficGenerator, type Devnet, type FeedFormat, startDevnet } from '../devnet/index.js'
import { DEVNET_REGISTRY_ADDRESS } from '../devnet/registry-contract.js'
import { maskedDatabaseUrl } from '../db/urls.js'
import { createLogger } from '../logger.js'
import { VERSION } from '../version.js'
import { DEV_DATABASE_DIR } from './databases.js'
import { type DevCommandLine, devGatewayConfig, optionName } from './flags.js'
import { startAdmin } from './serve.js'
import type { Shutdown } from './shutdown.js'
import { explainListenFailure } from './usage-error.js'

export async function devnet(config: DevnetConfig, shutdown: Shutdown) {
  const logger = createLogger(config.logLevel)
  const chain = await startDevnet(devnetOptions(config, config.port, logger)).catch((error: unknown) => {
    throw explainListenFailure(error, [
      { port: config.port, option: optionName('port') },
      { port: config.flashblocksPort, option: optionName('flashblocksPort') },
    ])
  })
  console.log(
    [
      `flashgate devnet (${config.blockTime}s blocks, a flashblock every ${config.flashblockInterval} ms${profileLabel(config.profile)})`,
      `  JSON-RPC     ${chain.rpcUrl}   (pending: the pre-confirmed block, as a Base node answers it)`,
      `  Flashblocks  ${chain.flashblocksUrl}${config.plain ? ' (text frames' : ' (Brotli frames'}, ${feedFormatLabel(config.feedFormat)})`,
    ].join('\n'),
  )
  shutdown.stopWith(chain.stop)
}

/** The devnet's options from `devnet`'s or `dev`'s configuration; the JSON-RPC port is named differently in each. */
function devnetOptions(
  config: Pick<DevnetConfig, 'flashblocksPort' | 'blockTime' | 'flashblockInterval' | 'plain' | 'feedFormat' | 'profile'>,
  port: number,
  logger: Logger,
): Parameters<typeof startDevnet>[0] {
  return {
    port,
    flashblocksPort: config.flashblocksPort,
    blockTimeMs: Math.round(config.blockTime * 1000),
    flashblockIntervalMs: config.flashblockInterval,
    plain: config.plain,
    feedFormat: config.feedFormat,
    profile: config.profile,
    logger: logger.child({ module: 'devnet' }),
  }
}

function profileLabel(profile: LoadProfileName): string {
  return profile === 'none' ? '' : `, load profile ${profile}: ~${BASE_TRANSACTIONS_PER_BLOCK} transactions a block`
}

function feedFormatLabel(format: FeedFormat): string {
  return format === 'current' ? "Base's current format: no receipts or balances" : 'legacy format: with receipts and balances'
}

/** `flashgate dev`, its database already wiped when it is the dev one (`wipeDevDatabase`). */
export async function dev(flags: Record<string, string | undefined>, { devConfig, databaseUrl, logLevel }: DevCommandLine, shutdown: Shutdown) {
  const logger = createLogger(devConfig.logLevel)
  let chain: Devnet | null = null
  let gateway: Gateway | null = null
  let admin: Awaited<ReturnType<typeof startAdmin>> = null
  let stopTraffic = async () => {}
  const stop = async () => {
    await stopTraffic()
    await admin?.close()
    await gateway?.stop()
    await chain?.stop()
  }
  // `stop` stops whatever has started (the dev database is wiped at every start): at once, even while starting.
  shutdown.stopWith(stop)
  try {
    chain = await startDevnet(devnetOptions(devConfig, devConfig.devnetPort, logger))
    const config = devGatewayConfig(
      flags,
      { databaseUrl: databaseUrl ?? DEV_DATABASE_DIR, logLevel },
      {
        rpcUrl: chain.rpcUrl,
        flashblocksUrl: chain.flashblocksUrl,
        // The demo traffic deploys a registry there (src/devnet/registry-contract.ts); a load profile does not.
        builderCodeRegistry: devConfig.profile === 'none' ? DEVNET_REGISTRY_ADDRESS : 'off',
      },
    )
    gateway = await startGateway({ config, logger })
    admin = await startAdmin(gateway, config.databaseUrl, logger)
    // A dedicated endpoint to try what the public one refuses (eth_getBlockReceipts); the database is wiped
    // at every start, and the key with it.
    const { key } = await gateway.resolvers.createApiKey({ name: 'dev', policy: 'dedicated', rateLimit: 0 })
    // A load profile is the traffic; the demo's would only contend with it for the dev accounts' nonces.
    if (devConfig.profile === 'none') {
      const traffic = createTrafficGenerator({ rpcUrl: chain.rpcUrl, gatewayUrl: gateway.url, logger: logger.child({ module: 'traffic' }) })
      stopTraffic = traffic.stop
      await traffic.start()
    }
    console.log(
      [
        `flashgate ${VERSION} (dev)`,
        `  JSON-RPC     ${gateway.url}/   (WebSocket: ${gateway.url.replace('http', 'ws')}/)`,
        `  dedicated    ${gateway.url}/rpc/${key}   (a dev API key: every method, no rate limit)`,
        `  GraphQL      ${gateway.url}/graphql (GraphiQL in a browser)`,
        `  health       ${gateway.url}/healthz  ${gateway.url}/readyz  ${gateway.url}/metrics`,
        `  dashboard    ${gateway.url}/dashboard (builder-code analytics; ${devConfig.profile === 'none' ? 'the demo agents send with their codes' : "a tenth of the profile's transactions carry builder codes"})`,
        `  devnet       ${chain.rpcUrl} (send transactions here; ${devConfig.blockTime}s blocks, ${devConfig.profile === 'none' ? 'demo traffic' : `load profile ${devConfig.profile}`})`,
        `  flashblocks  ${chain.flashblocksUrl} (${feedFormatLabel(devConfig.feedFormat)})`,
        `  database     ${maskedDatabaseUrl(config.databaseUrl)}${databaseUrl === undefined ? ' (flashgate keys finds it while this runs)' : ''}`,
        '',
        `  try: curl -s ${gateway.url} -H 'content-type: application/json' \\`,
        `         -d '{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"pending","toBlock":"pending"}]}'`,
      ].join('\n'),
    )
  } catch (error) {
    await stop().catch(() => {})
    throw explainListenFailure(error, [
      { port: devConfig.devnetPort, option: optionName('devnetPort') },
      { port: devConfig.flashblocksPort, option: optionName('flashblocksPort') },
      { port: Number(nonEmpty(flags.port) ?? nonEmpty(process.env.PORT) ?? serveConfigSchema.shape.port.parse(undefined)), option: optionName('port') },
    ])
  }
}
