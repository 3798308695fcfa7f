import { readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import type { Logger } from 'pino'
import { type Gateway, startGateway } from '../app.js'
import { isClusterWorker, startClusterPrimary, startClusterWorker, workerCount } from '../cluster/index.js'
import { attributionSuffix, decodeAttribution } from '../attribution/index.js'
import { ConfigError, type DevnetConfig, devConfigSchema, devnetConfigSchema, OPTIONS, parseConfig, serveConfigSchema } from '../config.js'
import { createDb, DatabaseInUseError, DIRECTORY_LOCK_FILE, lockDirectory, pgliteDirectory } from '../db/index.js'
import { DEVNET_REGISTRY_ADDRESS } from '../devnet/registry-contract.js'
import { BASE_TRANSACTIONS_PER_BLOCK, createTrafficGenerator, type Devnet, type FeedFormat, type LoadProfileName, startDevnet } from '../devnet/index.js'
import { createLogger } from '../logger.js'
import { startAdminServer } from '../server/admin.js'
import { VERSION } from '../version.js'
import { DEV_DATABASE_DIR, describeDatabaseUrl } from './databases.js'
import { keysCommand } from './keys.js'
import { UsageError } from './usage-error.js'

const DEV_LOG_LEVEL = 'warn'
/** Where `flashgate attribution` asks for the transaction: --url, FLASHGATE_URL, else this host on PORT (8545). */
const DEFAULT_GATEWAY_HOST = '127.0.0.1'
const DEFAULT_GATEWAY_PORT = '8545'
const ATTRIBUTION_TIMEOUT_MS = 30_000
const DEBUG_LOG_LEVELS = new Set(['debug', 'trace'])

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
  attribution <txHash>    fetch a transaction through the gateway (--url, else FLASHGATE_URL, else
                          http://${DEFAULT_GATEWAY_HOST}:$PORT, default port ${DEFAULT_GATEWAY_PORT}) and print the builder codes
                          in its calldata, one a line

options (flag, or environment variable):
${OPTIONS.map((option) => `  --${option.flag.padEnd(16)} ${option.env.padEnd(17)} ${option.help}`).join('\n')}
`

const FLAG_OPTIONS = {
  ...Object.fromEntries(OPTIONS.map((option) => [option.flag, { type: 'string' as const }])),
  plain: { type: 'boolean' },
  url: { type: 'string' },
  name: { type: 'string' },
  policy: { type: 'string' },
  rate: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const

/** A bad command line, reported in one line with exit code 2 like a bad configuration value. */
class CommandLineError extends Error {
  override readonly name = 'CommandLineError'
}

function readFlags(argv: string[]) {
  // `--rate -1` is a value for --rate (refused by its own check), not an unknown option `-1`.
  const args: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const next = argv[i + 1]
    const option = FLAG_OPTIONS[arg.slice(2) as keyof typeof FLAG_OPTIONS] as { type: string } | undefined
    if (arg.startsWith('--') && option?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      args.push(`${arg}=${next}`)
      i++
    } else args.push(arg)
  }
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; allowPositionals: true; strict: true; options: typeof FLAG_OPTIONS }>>
  try {
    parsed = parseArgs({ args, allowPositionals: true, strict: true, options: FLAG_OPTIONS })
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION')
      throw new CommandLineError(`unknown option ${/'([^']+)'/.exec(message)?.[1] ?? ''} (flashgate --help lists them)`)
    if (code?.startsWith('ERR_PARSE_ARGS_')) throw new CommandLineError(message.split('\n')[0]!)
    throw error
  }
  const { values, positionals } = parsed
  const flags = { ...values, plain: values.plain === undefined ? undefined : String(values.plain) }
  return { flags: flags as unknown as Record<string, string | undefined> & { help?: boolean; version?: boolean }, positionals }
}

/** A signal during start-up waits this long for it to finish (a database that never answers), then exits 1. */
const STOP_WHILE_STARTING_MS = 10_000

/**
 * Stopping takes at most this long (connections drain for 10 s, the workers of a cluster for 15 s), then the
 * process exits 1: a half-open database connection would hold the ingester's last step forever.
 */
const STOP_TIMEOUT_MS = 30_000

/**
 * Drains and exits 0 on SIGINT, SIGTERM or SIGHUP (a closed terminal). Heard from the start: a signal while
 * the process is starting stops it as soon as `stopWith` names how, so that start-up (a migration, a
 * database's first write) is not cut short. Signals after the first are ignored: a cluster worker hears its
 * terminal's SIGINT and then its primary's SIGTERM, and drains once.
 */
function listenForShutdown() {
  let stop: (() => Promise<void>) | null = null
  let asked = false
  let giveUp: NodeJS.Timeout | undefined
  const stopAndExit = () => {
    setTimeout(() => {
      console.error(`flashgate: did not stop within ${STOP_TIMEOUT_MS / 1000} s (a database or upstream that no longer answers); exiting`)
      process.exit(1)
    }, STOP_TIMEOUT_MS).unref()
    return stop!().then(
      () => process.exit(0),
      (error: unknown) => fail(error),
    )
  }
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      if (asked) return
      asked = true
      if (stop !== null) void stopAndExit()
      else
        giveUp = setTimeout(() => {
          console.error(`flashgate: ${signal} while starting, and start-up did not finish within ${STOP_WHILE_STARTING_MS / 1000} s; exiting`)
          process.exit(1)
        }, STOP_WHILE_STARTING_MS)
    })
  }
  return {
    stopWith(stopping: () => Promise<void>) {
      clearTimeout(giveUp)
      stop = stopping
      if (asked) void stopAndExit()
    },
  }
}

const nonEmpty = (value: string | undefined) => (value === '' ? undefined : value)

/** `--port (PORT)`: how a user names an option, from the OPTIONS table. */
function optionName(key: (typeof OPTIONS)[number]['key']): string {
  const option = OPTIONS.find((candidate) => candidate.key === key)!
  return `--${option.flag} (${option.env})`
}

/** A port that is taken, said in one line naming the option that chooses it; other errors pass through. */
function explainListenFailure(error: unknown, ports: { port: number; option: string }[]): unknown {
  const { code, port } = error as { code?: string; port?: number }
  if (code !== 'EADDRINUSE') return error
  const chosen = ports.find((candidate) => candidate.port === port)
  return new UsageError(`port ${port} is already in use (EADDRINUSE)${chosen === undefined ? '' : `; choose another with ${chosen.option}`}`)
}

/** On PGlite the gateway holds the directory alone, so `flashgate keys` reaches it through a loopback admin endpoint. */
async function startAdmin(gateway: Gateway, databaseUrl: string, logger: Logger) {
  const directory = pgliteDirectory(databaseUrl)
  if (directory === null) return null
  return startAdminServer({ resolvers: gateway.resolvers, directory, logger: logger.child({ module: 'admin' }) })
}

async function serve(flags: Record<string, string | undefined>) {
  const config = parseConfig(serveConfigSchema, flags, process.env)
  const logger = createLogger(config.logLevel)
  const shutdown = listenForShutdown()
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
    printServing(primary.url, config.databaseUrl, `${workers} workers`)
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
  printServing(gateway.url, config.databaseUrl, 'one process')
  shutdown.stopWith(async () => {
    await admin?.close()
    await gateway.stop()
  })
}

function printServing(url: string, databaseUrl: string, processes: string) {
  console.log(
    [
      `flashgate ${VERSION} (${processes})`,
      `  JSON-RPC   ${url}/   (dedicated: ${url}/rpc/<apiKey>, keys from flashgate keys create)`,
      `  GraphQL    ${url}/graphql`,
      `  health     ${url}/healthz  ${url}/readyz  ${url}/metrics`,
      `  database   ${describeDatabaseUrl(databaseUrl)}`,
    ].join('\n'),
  )
}

async function devnet(flags: Record<string, string | undefined>) {
  const config = parseConfig(devnetConfigSchema, flags, process.env)
  const logger = createLogger(config.logLevel)
  const shutdown = listenForShutdown()
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

/**
 * Empties the dev database for a new chain. Its lock is taken first, so a second `flashgate dev` in the same
 * checkout is refused before it deletes anything; the lock then passes to the gateway that opens the directory.
 */
function wipeDevDatabase() {
  let lock: ReturnType<typeof lockDirectory>
  try {
    lock = lockDirectory(DEV_DATABASE_DIR, 'dev')
  } catch (error) {
    if (!(error instanceof DatabaseInUseError)) throw error
    throw new UsageError(
      `flashgate ${error.holder.command} (pid ${error.holder.pid}) is running on ${DEV_DATABASE_DIR}; stop it first (its data is left as it is) or give this one --database-url`,
    )
  }
  for (const entry of readdirSync(lock.directory)) {
    if (entry !== DIRECTORY_LOCK_FILE) rmSync(join(lock.directory, entry), { recursive: true, force: true })
  }
  lock.handOver()
}

async function dev(flags: Record<string, string | undefined>) {
  const databaseUrl = nonEmpty(flags['database-url']) ?? nonEmpty(process.env.DATABASE_URL)
  // The console is for the URLs above all; warnings and errors only unless asked for more.
  const logLevel = nonEmpty(flags['log-level']) ?? nonEmpty(process.env.LOG_LEVEL) ?? DEV_LOG_LEVEL
  const devConfig = parseConfig(devConfigSchema, { ...flags, 'log-level': logLevel }, process.env)
  const logger = createLogger(devConfig.logLevel)
  if (databaseUrl === undefined) wipeDevDatabase()
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
  listenForShutdown().stopWith(stop)
  try {
    chain = await startDevnet(devnetOptions(devConfig, devConfig.devnetPort, logger))
    const config = parseConfig(
      serveConfigSchema,
      {
        ...flags,
        'database-url': databaseUrl ?? DEV_DATABASE_DIR,
        'upstream-rpc': chain.rpcUrl,
        'flashblocks-ws': chain.flashblocksUrl,
        'start-block': '0',
        'log-level': logLevel,
        // The demo traffic deploys a registry there (src/devnet/registry-contract.ts); a load profile does not.
        'builder-code-registry':
          nonEmpty(flags['builder-code-registry']) ??
          nonEmpty(process.env.BUILDER_CODE_REGISTRY) ??
          (devConfig.profile === 'none' ? DEVNET_REGISTRY_ADDRESS : 'off'),
      },
      process.env,
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
        `  database     ${describeDatabaseUrl(config.databaseUrl)}${databaseUrl === undefined ? ' (flashgate keys finds it while this runs)' : ''}`,
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
  const url =
    nonEmpty(flags.url) ?? nonEmpty(process.env.FLASHGATE_URL) ?? `http://${DEFAULT_GATEWAY_HOST}:${nonEmpty(process.env.PORT) ?? DEFAULT_GATEWAY_PORT}`
  let response: Response
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionByHash', params: [hash] }),
      signal: AbortSignal.timeout(ATTRIBUTION_TIMEOUT_MS),
    })
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause
    const reason = cause?.code ?? cause?.message ?? (error as Error).message
    throw new UsageError(`cannot reach the gateway at ${url} (${reason}); point at it with --url or FLASHGATE_URL`)
  }
  const answer = (await response.json().catch(() => null)) as { result?: { input?: string } | null; error?: { message: string } } | null
  if (answer === null) throw new UsageError(`${url} did not answer JSON-RPC (HTTP ${response.status}); is it a flashgate gateway?`)
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
      throw new CommandLineError(`unknown command ${JSON.stringify(command)} (flashgate --help lists them)`)
  }
}

/**
 * Every failure is one line on stderr and a non-zero exit: 2 for a bad command line or configuration, 1 for
 * the rest. An unexpected error shows its stack only when asked for (LOG_LEVEL=debug).
 */
function fail(error: unknown): never {
  if (error instanceof ConfigError || error instanceof CommandLineError) {
    console.error(`flashgate: ${error.message}`)
    process.exit(2)
  }
  const explained = explainListenFailure(error, [])
  if (explained instanceof UsageError || explained instanceof DatabaseInUseError) {
    console.error(`flashgate: ${explained.message}`)
    process.exit(1)
  }
  if (DEBUG_LOG_LEVELS.has(process.env.LOG_LEVEL ?? '')) console.error(error)
  else {
    const message = error instanceof Error ? error.message : String(error)
    console.error(`flashgate: ${message.split('\n')[0]} (LOG_LEVEL=debug shows the details)`)
  }
  process.exit(1)
}

main().catch(fail)
