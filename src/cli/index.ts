import { rmSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { startGateway } from '../app.js'
import { attributionSuffix, decodeAttribution } from '../attribution/index.js'
import { ConfigError, devnetConfigSchema, OPTIONS, parseConfig, serveConfigSchema } from '../config.js'
import { createDb } from '../db/index.js'
import { createTrafficGenerator, type Devnet, startDevnet } from '../devnet/index.js'
import { createLogger } from '../logger.js'
import { VERSION } from '../version.js'
import { keysCommand } from './keys.js'
import { UsageError } from './usage-error.js'

/** The devnet's PGlite is as ephemeral as its chain: wiped at every `flashgate dev`. */
const DEV_DATABASE_DIR = './.flashgate/dev-pglite'
const DEV_LOG_LEVEL = 'warn'
/** Where `flashgate attribution` asks for the transaction, unless --url or FLASHGATE_URL says otherwise. */
const DEFAULT_GATEWAY_URL = 'http://127.0.0.1:8545'

const USAGE = `flashgate ${VERSION}: a Flashblocks-aware query gateway for EVM chains

usage: flashgate <command> [options]

commands:
  dev       devnet + PGlite + ingest + serve + demo traffic; what \`npm start\` runs
  serve     ingest (when it holds the lock) and serve, against --upstream-rpc and --database-url
  devnet    the local chain alone: JSON-RPC (--port, default 8546) and Flashblocks (--flashblocks-port, 8547)
  migrate   apply database migrations and exit
  keys create --name NAME [--policy dedicated|public] [--rate N]
                          create an API key for POST /rpc/<key> (printed once; stored hashed)
  keys list               list the keys (name, prefix, policy, rate, status)
  keys revoke <name|id>   revoke a key; its endpoint answers 401 within seconds
  suffix <code…>          print the ERC-8021 data suffix (hex) that attributes a transaction to the codes
  attribution <txHash>    fetch a transaction through the gateway (--url, default ${DEFAULT_GATEWAY_URL})
                          and print the builder codes in its calldata, one a line

options (flag, or environment variable):
${OPTIONS.map((option) => `  --${option.flag.padEnd(16)} ${option.env.padEnd(17)} ${option.help}`).join('\n')}
`

function readFlags(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      ...Object.fromEntries(OPTIONS.map((option) => [option.flag, { type: 'string' as const }])),
      plain: { type: 'boolean' },
      url: { type: 'string' },
      name: { type: 'string' },
      policy: { type: 'string' },
      rate: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
    },
  })
  const flags = { ...values, plain: values.plain === undefined ? undefined : String(values.plain) }
  return { flags: flags as unknown as Record<string, string | undefined> & { help?: boolean; version?: boolean }, positionals }
}

function onShutdown(stop: () => Promise<void>) {
  let stopping = false
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return
      stopping = true
      stop().then(
        () => process.exit(0),
        (error: unknown) => {
          console.error(error)
          process.exit(1)
        },
      )
    })
  }
}

async function serve(flags: Record<string, string | undefined>) {
  const config = parseConfig(serveConfigSchema, flags, process.env)
  const logger = createLogger(config.logLevel)
  const gateway = await startGateway({ config, logger })
  logger.info({ url: gateway.url }, 'flashgate serving')
  console.log(
    [
      `flashgate ${VERSION}`,
      `  JSON-RPC   ${gateway.url}/   (dedicated: ${gateway.url}/rpc/<apiKey>, keys from flashgate keys create)`,
      `  GraphQL    ${gateway.url}/graphql`,
      `  health     ${gateway.url}/healthz  ${gateway.url}/readyz  ${gateway.url}/metrics`,
    ].join('\n'),
  )
  onShutdown(gateway.stop)
}

async function devnet(flags: Record<string, string | undefined>) {
  const config = parseConfig(devnetConfigSchema, flags, process.env)
  const logger = createLogger(config.logLevel)
  const chain = await startDevnet({
    port: config.port,
    flashblocksPort: config.flashblocksPort,
    blockTimeMs: Math.round(config.blockTime * 1000),
    flashblockIntervalMs: config.flashblockInterval,
    plain: config.plain,
    logger: logger.child({ module: 'devnet' }),
  })
  console.log(
    [
      `flashgate devnet (${config.blockTime}s blocks, a flashblock every ${config.flashblockInterval} ms)`,
      `  JSON-RPC     ${chain.rpcUrl}`,
      `  Flashblocks  ${chain.flashblocksUrl}${config.plain ? ' (text frames)' : ' (Brotli frames)'}`,
    ].join('\n'),
  )
  onShutdown(chain.stop)
}

async function dev(flags: Record<string, string | undefined>) {
  const databaseUrl = flags['database-url'] ?? process.env.DATABASE_URL
  if (databaseUrl === undefined) rmSync(DEV_DATABASE_DIR, { recursive: true, force: true })
  // The console is for the URLs above all; warnings and errors only unless asked for more.
  const logLevel = flags['log-level'] ?? process.env.LOG_LEVEL ?? DEV_LOG_LEVEL
  const devnetConfig = parseConfig(devnetConfigSchema, { ...flags, port: undefined, 'log-level': logLevel }, {})
  const logger = createLogger(devnetConfig.logLevel)
  let chain: Devnet | null = null
  let stopGateway = async () => {}
  let stopTraffic = async () => {}
  onShutdown(async () => {
    await stopTraffic()
    await stopGateway()
    await chain?.stop()
  })
  chain = await startDevnet({
    flashblocksPort: devnetConfig.flashblocksPort,
    blockTimeMs: Math.round(devnetConfig.blockTime * 1000),
    flashblockIntervalMs: devnetConfig.flashblockInterval,
    plain: devnetConfig.plain,
    logger: logger.child({ module: 'devnet' }),
  })
  const config = parseConfig(
    serveConfigSchema,
    {
      ...flags,
      'database-url': databaseUrl ?? DEV_DATABASE_DIR,
      'upstream-rpc': chain.rpcUrl,
      'flashblocks-ws': chain.flashblocksUrl,
      'start-block': '0',
      'log-level': logLevel,
    },
    process.env,
  )
  const gateway = await startGateway({ config, logger })
  stopGateway = gateway.stop
  // A dedicated endpoint to try what the public one refuses (eth_getBlockReceipts); the database is wiped
  // at every start, and the key with it.
  const { key } = await gateway.resolvers.createApiKey({ name: 'dev', policy: 'dedicated', rateLimit: 0 })
  const traffic = createTrafficGenerator({ rpcUrl: chain.rpcUrl, gatewayUrl: gateway.url, logger: logger.child({ module: 'traffic' }) })
  stopTraffic = traffic.stop
  await traffic.start()
  console.log(
    [
      `flashgate ${VERSION} (dev)`,
      `  JSON-RPC     ${gateway.url}/   (WebSocket: ${gateway.url.replace('http', 'ws')}/)`,
      `  dedicated    ${gateway.url}/rpc/${key}   (a dev API key: every method, no rate limit)`,
      `  GraphQL      ${gateway.url}/graphql (GraphiQL in a browser)`,
      `  health       ${gateway.url}/healthz  ${gateway.url}/readyz  ${gateway.url}/metrics`,
      `  dashboard    ${gateway.url}/dashboard (builder-code analytics; the demo agents send with their codes)`,
      `  devnet       ${chain.rpcUrl} (send transactions here; ${devnetConfig.blockTime}s blocks, demo traffic)`,
      `  flashblocks  ${chain.flashblocksUrl}`,
      `  database     ${config.databaseUrl}`,
      '',
      `  try: curl -s ${gateway.url} -H 'content-type: application/json' \\`,
      `         -d '{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"pending","toBlock":"pending"}]}'`,
    ].join('\n'),
  )
}

async function migrate(flags: Record<string, string | undefined>) {
  const databaseUrl = flags['database-url'] ?? process.env.DATABASE_URL ?? serveConfigSchema.shape.databaseUrl.parse(undefined)
  const db = await createDb({ databaseUrl })
  await db.close()
  console.log(`migrations applied to ${databaseUrl}`)
}

/** `flashgate suffix <code…>`: the hex to pass as viem's `dataSuffix` (schema 0, canonical registry). */
function suffix(codes: string[]) {
  if (codes.length === 0) throw new UsageError('usage: flashgate suffix <code…>')
  try {
    console.log(attributionSuffix(codes))
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
}

/** `flashgate attribution <txHash>`: the client-side check of the spec's §4.3, through the gateway. */
async function attribution(hash: string | undefined, flags: Record<string, string | undefined>) {
  if (hash === undefined || !/^0x[0-9a-fA-F]{64}$/.test(hash)) throw new UsageError('usage: flashgate attribution <txHash> [--url URL]')
  const url = flags.url ?? process.env.FLASHGATE_URL ?? DEFAULT_GATEWAY_URL
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionByHash', params: [hash] }),
  })
  const answer = (await response.json()) as { result?: { input?: string } | null; error?: { message: string } }
  if (answer.error) throw new UsageError(`the gateway answered: ${answer.error.message}`)
  if (answer.result === null || answer.result === undefined) throw new UsageError(`transaction ${hash} is not known to ${url}`)
  const decoded = decodeAttribution(answer.result.input)
  if (decoded === null || decoded.codes.length === 0) throw new UsageError(`transaction ${hash} carries no ERC-8021 attribution`)
  for (const code of decoded.codes) console.log(code)
}


async function main() {
  const { flags, positionals } = readFlags(process.argv.slice(2))
  if (flags.version) return console.log(VERSION)
  const command = positionals[0]
  if (flags.help || command === undefined || command === 'help') return console.log(USAGE)
  switch (command) {
    case 'dev':
      return dev(flags)
    case 'serve':
      return serve(flags)
    case 'devnet':
      return devnet(flags)
    case 'migrate':
      return migrate(flags)
    case 'keys':
      return keysCommand({ action: positionals[1], argument: positionals[2], flags, env: process.env })
    case 'suffix':
      return suffix(positionals.slice(1))
    case 'attribution':
      return attribution(positionals[1], flags)
    default:
      console.error(`unknown command: ${command}\n\n${USAGE}`)
      process.exitCode = 2
  }
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || (error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    console.error(`flashgate: ${(error as Error).message}`)
    process.exit(2)
  }
  if (error instanceof UsageError) {
    console.error(`flashgate: ${error.message}`)
    process.exit(1)
  }
  console.error(error)
  process.exit(1)
})
