import { checkDeployment, DEFAULT_DATABASE_URL, devnetConfigSchema, OPTIONS, parseConfig, serveConfigSchema } from '../config.js'
import { VERSION } from '../version.js'
import { openable, refuseHeldDirectory, wipeDevDatabase } from './databases.js'
import { fail, failAtLogLevel } from './fail.js'
import { CommandLineError, DEFAULT_GATEWAY_HOST, DEFAULT_GATEWAY_PORT, readDevCommandLine, readFlags, readGatewayUrl } from './flags.js'
import { listenForShutdown } from './shutdown.js'

// Each command loads its own modules when it runs: `--help`, a bad flag or `suffix` do not load the gateway.

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
  attribution <txHash>    fetch a transaction through the gateway (--url, or http://${DEFAULT_GATEWAY_HOST} on --port;
                          else FLASHGATE_URL, else that host on PORT, default ${DEFAULT_GATEWAY_PORT}) and print the builder
                          codes it attributes, one a line: its calldata's, then those of the user operations
                          it bundles when it calls an EntryPoint (v0.6-v0.8)

options (flag, or environment variable):
${OPTIONS.map((option) => `  --${option.flag.padEnd(16)} ${option.env.padEnd(17)} ${option.help}`).join('\n')}
`

/**
 * How many positional arguments each command takes, its own name included (`suffix` takes any number of
 * codes); `undefined` for an unknown command, which the switch below refuses by name.
 */
function positionalsOf(command: string, action: string | undefined): number | undefined {
  if (command === 'suffix') return Number.POSITIVE_INFINITY
  if (command === 'keys') return action === 'revoke' ? 3 : 2
  if (command === 'attribution') return 2
  if (command === 'dev' || command === 'serve' || command === 'devnet' || command === 'migrate') return 1
  return undefined
}

/** An argument no command reads is refused, not ignored (`flashgate serve foo` would otherwise serve). */
function refuseExtraArguments(positionals: string[]) {
  const taken = positionalsOf(positionals[0]!, positionals[1])
  const extra = taken === undefined ? undefined : positionals[taken]
  if (extra !== undefined)
    throw new CommandLineError(
      `unexpected argument ${JSON.stringify(extra)} after flashgate ${positionals.slice(0, taken!).join(' ')} (flashgate --help lists the usage)`,
    )
}

async function main() {
  // A reader of the output that went away (`flashgate serve | head`, a log collector that died) fails a write
  // with EPIPE: that is no reason for a gateway to stop serving (unhandled, it was a fatal exception).
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {})
  const { flags, positionals } = readFlags(process.argv.slice(2))
  failAtLogLevel(flags['log-level'])
  if (flags.version) return console.log(VERSION)
  const command = positionals[0]
  if (flags.help || command === undefined || command === 'help') return console.log(USAGE)
  refuseExtraArguments(positionals)
  switch (command) {
    // A bad value is refused before anything loads; signals are heard from then on (shutdown.ts).
    case 'dev': {
      const commandLine = readDevCommandLine(flags)
      if (commandLine.databaseUrl === undefined) wipeDevDatabase()
      const shutdown = listenForShutdown()
      return (await import('./dev.js')).dev(flags, commandLine, shutdown)
    }
    case 'serve': {
      const config = parseConfig(serveConfigSchema, flags, process.env)
      checkDeployment(config)
      const shutdown = listenForShutdown({ stopTimeoutMs: config.stopTimeout * 1_000 })
      return (await import('./serve.js')).serve(config, shutdown)
    }
    case 'devnet': {
      const config = parseConfig(devnetConfigSchema, flags, process.env)
      const shutdown = listenForShutdown()
      return (await import('./dev.js')).devnet(config, shutdown)
    }
    case 'migrate': {
      const databaseUrl = openable(flags['database-url'] ?? process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL)
      refuseHeldDirectory(databaseUrl)
      return (await import('./serve.js')).migrate(databaseUrl)
    }
    case 'keys':
      return (await import('./keys.js')).keysCommand({ action: positionals[1], argument: positionals[2], flags, env: process.env })
    case 'suffix':
      return (await import('./attribution.js')).suffix(positionals.slice(1))
    case 'attribution':
      return (await import('./attribution.js')).attribution(positionals[1], readGatewayUrl(flags, process.env))
    default:
      throw new CommandLineError(`unknown command ${JSON.stringify(command)} (flashgate --help lists them)`)
  }
}

main().catch(fail)
