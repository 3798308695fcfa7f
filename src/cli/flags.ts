import { parseArgs } from 'node:util'
import { type DevConfig, devConfigSchema, nonEmpty, OPTIONS, parseConfig } from '../config.js'

/** Where `flashgate attribution` asks for the transaction: --url, FLASHGATE_URL, else this host on PORT (8545). */
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

/** `flashgate dev` is quiet on the console unless asked: the URLs above all, then warnings and errors. */
const DEV_LOG_LEVEL = 'warn'

export type DevCommandLine = { devConfig: DevConfig; databaseUrl: string | undefined; logLevel: string }

/** `flashgate dev`'s own options; the gateway's are read once its devnet runs (they name the devnet's URLs). */
export function readDevCommandLine(flags: Record<string, string | undefined>): DevCommandLine {
  const databaseUrl = nonEmpty(flags['database-url']) ?? nonEmpty(process.env.DATABASE_URL)
  const logLevel = nonEmpty(flags['log-level']) ?? nonEmpty(process.env.LOG_LEVEL) ?? DEV_LOG_LEVEL
  return { devConfig: parseConfig(devConfigSchema, { ...flags, 'log-level': logLevel }, process.env), databaseUrl, logLevel }
}
