import { parseArgs } from 'node:util'
import {
  attributionConfigSchema,
  ConfigError,
  checkDeployment,
  type DevConfig,
  devConfigSchema,
  gatewayUrl,
  nonEmpty,
  OPTIONS,
  parseConfig,
  type ServeConfig,
  serveConfigSchema,
} from '../config.js'

/** Where `flashgate attribution` asks for the transaction: --url (FLASHGATE_URL), else this host on --port (PORT, 8545). */
export const DEFAULT_GATEWAY_HOST = '127.0.0.1'
export const DEFAULT_GATEWAY_PORT = '8545'

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
export class CommandLineError extends Error {
  override readonly name = 'CommandLineError'
}

export function readFlags(argv: string[]) {
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

/** `--port (PORT)`: how a user names an option, from the OPTIONS table. */
export function optionName(key: (typeof OPTIONS)[number]['key']): string {
  const option = OPTIONS.find((candidate) => candidate.key === key)!
  return `--${option.flag} (${option.env})`
}

/**
 * The gateway `flashgate attribution` asks: `--url`, else this host on `--port`, else `FLASHGATE_URL`, else
 * this host on `PORT` (a flag wins over a variable, as everywhere). Both flags at once name two gateways and
 * are refused; so are a URL that is not http(s) and a bad port, as bad configuration, before anything is sent.
 */
export function readGatewayUrl(flags: Record<string, string | undefined>, env: Record<string, string | undefined>): string {
  const [urlFlag, portFlag] = [nonEmpty(flags.url), nonEmpty(flags.port)]
  if (urlFlag !== undefined && portFlag !== undefined) throw new CommandLineError('--url and --port both name the gateway: give one')
  const url = urlFlag ?? (portFlag === undefined ? nonEmpty(env.FLASHGATE_URL) : undefined)
  if (url === undefined) return `http://${DEFAULT_GATEWAY_HOST}:${parseConfig(attributionConfigSchema, flags, env).port}`
  const checked = gatewayUrl.safeParse(url)
  if (!checked.success) throw new ConfigError(`invalid configuration: --url (FLASHGATE_URL) ${checked.error.issues[0]!.message} (got ${JSON.stringify(url)})`)
  return url
}

/** `flashgate dev` is quiet on the console unless asked: the URLs above all, then warnings and errors. */
const DEV_LOG_LEVEL = 'warn'

export type DevCommandLine = { devConfig: DevConfig; databaseUrl: string | undefined; logLevel: string }

/** The devnet as `flashgate dev`'s gateway follows it, and the Builder Codes registry it uses unless told. */
export type DevUpstream = { rpcUrl: string; flashblocksUrl: string; builderCodeRegistry: string }

/**
 * `flashgate dev`'s gateway configuration: the flags and variables given, over what `dev` sets itself (its
 * database, the devnet as upstream and feed, from block 0), checked as `serve` checks its own.
 */
export function devGatewayConfig(
  flags: Record<string, string | undefined>,
  { databaseUrl, logLevel }: { databaseUrl: string | undefined; logLevel: string },
  devnet: DevUpstream,
): ServeConfig {
  const config = parseConfig(
    serveConfigSchema,
    {
      ...flags,
      'database-url': databaseUrl,
      'upstream-rpc': devnet.rpcUrl,
      'flashblocks-ws': devnet.flashblocksUrl,
      'start-block': '0',
      'log-level': logLevel,
      'builder-code-registry': nonEmpty(flags['builder-code-registry']) ?? nonEmpty(process.env.BUILDER_CODE_REGISTRY) ?? devnet.builderCodeRegistry,
    },
    process.env,
  )
  checkDeployment(config)
  return config
}

/**
 * `flashgate dev`'s own options. The gateway's are checked here too, before the dev database is wiped or
 * anything starts, with the devnet's URLs as its ports name them; dev.ts reads them again once the devnet
 * runs (a port 0 is chosen then), with its registry. An absent database is checked as the default PGlite
 * directory, the kind the dev one is.
 */
export function readDevCommandLine(flags: Record<string, string | undefined>): DevCommandLine {
  const databaseUrl = nonEmpty(flags['database-url']) ?? nonEmpty(process.env.DATABASE_URL)
  const logLevel = nonEmpty(flags['log-level']) ?? nonEmpty(process.env.LOG_LEVEL) ?? DEV_LOG_LEVEL
  const devConfig = parseConfig(devConfigSchema, { ...flags, 'log-level': logLevel }, process.env)
  devGatewayConfig(
    flags,
    { databaseUrl, logLevel },
    {
      rpcUrl: `http://${DEFAULT_GATEWAY_HOST}:${devConfig.devnetPort}`,
      flashblocksUrl: `ws://${DEFAULT_GATEWAY_HOST}:${devConfig.flashblocksPort}`,
      builderCodeRegistry: 'off',
    },
  )
  return { devConfig, databaseUrl, logLevel }
}
