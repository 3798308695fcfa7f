import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, test } from 'vitest'
import { ConfigError, DEFAULT_DATABASE_URL, devConfigSchema, devnetConfigSchema, OPTIONS, parseConfig, serveConfigSchema } from './config.js'

const run = promisify(execFile)
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url))
const BIN = fileURLToPath(new URL('../bin/flashgate.js', import.meta.url))
const UPSTREAM_RPC = 'http://127.0.0.1:1'

/** `flashgate serve` config with the one required flag given, plus `flags` and `env`. */
function serveConfig(flags: Record<string, string | undefined> = {}, env: Record<string, string | undefined> = {}) {
  return parseConfig(serveConfigSchema, { 'upstream-rpc': UPSTREAM_RPC, ...flags }, env)
}

/** The ConfigError `parse` throws; fails the test when it throws nothing or something else. */
function configErrorOf(parse: () => unknown): ConfigError {
  try {
    parse()
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    return error as ConfigError
  }
  throw new Error('expected a ConfigError, but the configuration was accepted')
}

describe('parseConfig(serveConfigSchema)', () => {
  test('every option has its default when neither flag nor environment variable is given', () => {
    expect(serveConfig()).toEqual({
      port: 8545,
      host: '127.0.0.1',
      databaseUrl: './.flashgate/pglite',
      upstreamRpc: UPSTREAM_RPC,
      pendingSource: 'auto',
      history: 'upstream',
      role: 'all',
      corsOrigins: '*',
      redisPrefix: 'flashgate:',
      startBlock: { latestMinus: 10_000 },
      publicRateLimit: 50,
      publicMaxBatch: 100,
      publicMaxBatchResponse: 10_485_760,
      publicMaxBody: 1_048_576,
      publicMaxBlockRange: 2_000,
      publicMaxLogs: 10_000,
      publicMaxLogsBytes: 26_214_400,
      maxBatch: 1_000,
      maxBatchResponse: 26_214_400,
      maxBody: 5_242_880,
      maxBlockRange: 10_000,
      maxLogs: 10_000,
      maxLogsBytes: 104_857_600,
      trustProxy: false,
      maxQueryCost: 250_000,
      answerCacheMb: 64,
      builderCodeRegistry: 'default',
      entryPoints: 'canonical',
      ingestBatchSize: 100,
      readyUpstreamSilence: 30,
      requestTimeout: 30,
      stopTimeout: 30,
      registrationRateLimit: 20,
      logLevel: 'info',
    })
    expect(DEFAULT_DATABASE_URL).toBe('./.flashgate/pglite')
  })

  test('an environment variable sets its option when no flag is given', () => {
    const config = serveConfig({}, { PORT: '9001', ANSWER_CACHE_MB: '8', TRUST_PROXY: 'true', DATABASE_URL: 'memory://', START_BLOCK: '17' })
    expect(config.port).toBe(9001)
    expect(config.answerCacheMb).toBe(8)
    expect(config.trustProxy).toBe(true)
    expect(config.databaseUrl).toBe('memory://')
    expect(config.startBlock).toBe(17)
  })

  test('--ready-upstream-silence (READY_UPSTREAM_SILENCE) is whole seconds, at least 1', () => {
    expect(serveConfig({ 'ready-upstream-silence': '3' }).readyUpstreamSilence).toBe(3)
    expect(serveConfig({}, { READY_UPSTREAM_SILENCE: '45' }).readyUpstreamSilence).toBe(45)
    expect(() => serveConfig({ 'ready-upstream-silence': '0' })).toThrow(/--ready-upstream-silence \(READY_UPSTREAM_SILENCE\) must be positive/)
    expect(() => serveConfig({ 'ready-upstream-silence': '1.5' })).toThrow(/must be a whole number/)
  })

  test('--request-timeout (REQUEST_TIMEOUT) is whole seconds, from 1 to 3600', () => {
    expect(serveConfig({ 'request-timeout': '5' }).requestTimeout).toBe(5)
    expect(serveConfig({}, { REQUEST_TIMEOUT: '3600' }).requestTimeout).toBe(3600)
    expect(() => serveConfig({ 'request-timeout': '0' })).toThrow(/--request-timeout \(REQUEST_TIMEOUT\) must be positive/)
    expect(() => serveConfig({ 'request-timeout': '3601' })).toThrow(/must be at most 3600/)
  })

  test('--stop-timeout (STOP_TIMEOUT) is whole seconds, at least 1', () => {
    expect(serveConfig({ 'stop-timeout': '5' }).stopTimeout).toBe(5)
    expect(serveConfig({}, { STOP_TIMEOUT: '90' }).stopTimeout).toBe(90)
    expect(() => serveConfig({ 'stop-timeout': '0' })).toThrow(/--stop-timeout \(STOP_TIMEOUT\) must be positive/)
  })

  test('the upstream RPC URL can come from UPSTREAM_RPC_URL alone', () => {
    expect(parseConfig(serveConfigSchema, {}, { UPSTREAM_RPC_URL: 'wss://node.example/ws' }).upstreamRpc).toBe('wss://node.example/ws')
  })

  test('a flag wins over its environment variable', () => {
    const config = serveConfig(
      { port: '9000', 'max-query-cost': '7', 'log-level': 'debug', 'database-url': 'postgres://flag/db' },
      { PORT: '9001', MAX_QUERY_COST: '8', LOG_LEVEL: 'warn', DATABASE_URL: 'postgres://env/db' },
    )
    expect(config.port).toBe(9000)
    expect(config.maxQueryCost).toBe(7)
    expect(config.logLevel).toBe('debug')
    expect(config.databaseUrl).toBe('postgres://flag/db')
  })

  test('a flag wins over a bad environment variable, which is then not reported', () => {
    expect(serveConfig({ port: '9000' }, { PORT: 'abc' }).port).toBe(9000)
  })

  test('an empty string counts as absent: the default applies', () => {
    expect(serveConfig({ port: '', 'database-url': '', 'log-level': '' }).port).toBe(8545)
    expect(serveConfig({ 'database-url': '' }).databaseUrl).toBe('./.flashgate/pglite')
    expect(serveConfig({}, { PORT: '', DATABASE_URL: '', LOG_LEVEL: '', ANSWER_CACHE_MB: '' })).toMatchObject({
      port: 8545,
      databaseUrl: './.flashgate/pglite',
      logLevel: 'info',
      answerCacheMb: 64,
    })
  })

  test('without --upstream-rpc, a one-line ConfigError says it is required', () => {
    const error = configErrorOf(() => parseConfig(serveConfigSchema, {}, {}))
    expect(error.name).toBe('ConfigError')
    expect(error.message).toBe('invalid configuration: --upstream-rpc (UPSTREAM_RPC_URL) is required')
  })

  test.each([
    ['port', 'abc', '--port (PORT) must be a port number (got "abc")'],
    ['port', '70000', '--port (PORT) must be between 0 and 65535 (got "70000")'],
    ['port', '-1', '--port (PORT) must be between 0 and 65535 (got "-1")'],
    ['port', '80.5', '--port (PORT) must be a whole number (got "80.5")'],
    ['answer-cache-mb', '-1', '--answer-cache-mb (ANSWER_CACHE_MB) must not be negative (got "-1")'],
    ['answer-cache-mb', 'lots', '--answer-cache-mb (ANSWER_CACHE_MB) must be a number (got "lots")'],
    ['max-query-cost', 'Infinity', '--max-query-cost (MAX_QUERY_COST) must be a number (got "Infinity")'],
    ['max-batch', '0', '--max-batch (MAX_BATCH) must be positive (got "0")'],
    ['ingest-batch-size', '2.5', '--ingest-batch-size (INGEST_BATCH_SIZE) must be a whole number (got "2.5")'],
    ['trust-proxy', 'maybe', '--trust-proxy (TRUST_PROXY) must be true or false (or 1/0, yes/no, on/off) (got "maybe")'],
    ['start-block', 'soon', '--start-block (START_BLOCK) must be a block number or latest-N (got "soon")'],
    ['start-block', 'latest-', '--start-block (START_BLOCK) must be a block number or latest-N (got "latest-")'],
    ['start-block', '-5', '--start-block (START_BLOCK) must be a block number or latest-N (got "-5")'],
    ['upstream-rpc', 'ftp://node.example', '--upstream-rpc (UPSTREAM_RPC_URL) must be a http or https or ws or wss URL (got "ftp://node.example")'],
    ['upstream-ws', 'http://node.example', '--upstream-ws (UPSTREAM_WS_URL) must be a ws or wss URL (got "http://node.example")'],
    ['flashblocks-ws', 'not a url', '--flashblocks-ws (FLASHBLOCKS_WS_URL) must be a ws or wss URL (got "not a url")'],
    ['redis-url', '127.0.0.1:6379', '--redis-url (REDIS_URL) must be a redis or rediss URL (got "127.0.0.1:6379")'],
  ])('--%s %j is refused in one line naming the flag, its variable and the value', (flag, value, expected) => {
    const error = configErrorOf(() => serveConfig({ [flag]: value }))
    expect(error.message).toBe(`invalid configuration: ${expected}`)
    expect(error.message).not.toContain('\n')
  })

  test('a bad environment variable is reported by its flag and variable, echoing its value', () => {
    const error = configErrorOf(() => serveConfig({}, { ANSWER_CACHE_MB: '-3' }))
    expect(error.message).toBe('invalid configuration: --answer-cache-mb (ANSWER_CACHE_MB) must not be negative (got "-3")')
  })

  test('--log-level loud is refused in one line naming the flag, its variable and the value', () => {
    // The detail is zod's enum message; pinned at both ends only.
    const { message } = configErrorOf(() => serveConfig({ 'log-level': 'loud' }))
    expect(message.startsWith('invalid configuration: --log-level (LOG_LEVEL) ')).toBe(true)
    expect(message.endsWith(' (got "loud")')).toBe(true)
    expect(message).toContain('"silent"')
    expect(message).not.toContain('\n')
  })

  test('a value with a line break is echoed escaped, so the message stays one line', () => {
    const { message } = configErrorOf(() => serveConfig({ 'start-block': '1\n2' }))
    expect(message).toBe('invalid configuration: --start-block (START_BLOCK) must be a block number or latest-N (got "1\\n2")')
  })

  test('--answer-cache-mb 0 is accepted (no answer cache) and gives 0', () => {
    expect(serveConfig({ 'answer-cache-mb': '0' }).answerCacheMb).toBe(0)
    expect(serveConfig({}, { ANSWER_CACHE_MB: '0' }).answerCacheMb).toBe(0)
  })

  test('--answer-cache-mb is whole MiB: a fraction is refused in one line', () => {
    expect(configErrorOf(() => serveConfig({ 'answer-cache-mb': '0.3' })).message).toBe(
      'invalid configuration: --answer-cache-mb (ANSWER_CACHE_MB) must be a whole number (got "0.3")',
    )
  })

  test('an empty flag leaves its environment variable in force', () => {
    expect(serveConfig({ port: '' }, { PORT: '9000' }).port).toBe(9000)
  })

  test('an empty required value is reported as missing, not as a bad value', () => {
    expect(configErrorOf(() => parseConfig(serveConfigSchema, { 'upstream-rpc': '' }, {})).message).toBe(
      'invalid configuration: --upstream-rpc (UPSTREAM_RPC_URL) is required',
    )
    expect(configErrorOf(() => parseConfig(serveConfigSchema, {}, { UPSTREAM_RPC_URL: '' })).message).toBe(
      'invalid configuration: --upstream-rpc (UPSTREAM_RPC_URL) is required',
    )
  })

  test.each([' ', '0x10', '1e3', '12abc'])('a number option takes plain decimals only: --port %j is refused', (value) => {
    expect(configErrorOf(() => serveConfig({ port: value })).message).toBe(
      `invalid configuration: --port (PORT) must be a port number (got ${JSON.stringify(value)})`,
    )
  })

  test('--start-block: a number, latest, or latest-N', () => {
    expect(serveConfig({ 'start-block': '0' }).startBlock).toBe(0)
    expect(serveConfig({ 'start-block': '123456' }).startBlock).toBe(123_456)
    expect(serveConfig({ 'start-block': 'latest' }).startBlock).toEqual({ latestMinus: 0 })
    expect(serveConfig({ 'start-block': 'latest-42' }).startBlock).toEqual({ latestMinus: 42 })
  })

  test('--trust-proxy takes true or false', () => {
    expect(serveConfig({ 'trust-proxy': 'true' }).trustProxy).toBe(true)
    expect(serveConfig({ 'trust-proxy': 'false' }).trustProxy).toBe(false)
  })

  test('devnet-only variables in the environment are ignored by serve', () => {
    expect(serveConfig({}, { BLOCK_TIME: 'never', FLASHBLOCKS_PLAIN: 'perhaps' })).not.toHaveProperty('blockTime')
  })
})

describe('parseConfig(devnetConfigSchema)', () => {
  test('every option has its default when nothing is given', () => {
    expect(parseConfig(devnetConfigSchema, {}, {})).toEqual({
      port: 8546,
      flashblocksPort: 8547,
      blockTime: 2,
      flashblockInterval: 200,
      plain: false,
      feedFormat: 'current',
      profile: 'none',
      logLevel: 'info',
    })
  })

  test('--profile takes base (or LOAD_PROFILE), for the devnet and dev; anything else is refused in one line', () => {
    expect(parseConfig(devnetConfigSchema, { profile: 'base' }, {}).profile).toBe('base')
    expect(parseConfig(devConfigSchema, {}, { LOAD_PROFILE: 'base' }).profile).toBe('base')
    expect(configErrorOf(() => parseConfig(devnetConfigSchema, { profile: 'mainnet' }, {})).message).toBe(
      'invalid configuration: --profile (LOAD_PROFILE) must be one of none, base (got "mainnet")',
    )
  })

  test('serve-only variables in the environment are ignored, even when they would be invalid', () => {
    expect(parseConfig(devnetConfigSchema, {}, { MAX_BATCH: 'abc', UPSTREAM_RPC_URL: 'ftp://x' }).port).toBe(8546)
  })

  test('a fractional block time is accepted; zero is refused in one line', () => {
    expect(parseConfig(devnetConfigSchema, { 'block-time': '0.4' }, {}).blockTime).toBe(0.4)
    expect(parseConfig(devnetConfigSchema, { 'block-time': '0.5', 'flashblock-interval': '250' }, {}).blockTime).toBe(0.5)
    expect(configErrorOf(() => parseConfig(devnetConfigSchema, { 'block-time': '0' }, {})).message).toBe(
      'invalid configuration: --block-time (BLOCK_TIME) must be positive (got "0")',
    )
  })

  test('a block that is not a whole number of flashblocks is a bad value, for the devnet and dev alike', () => {
    for (const schema of [devnetConfigSchema, devConfigSchema]) {
      expect(configErrorOf(() => parseConfig(schema, { 'block-time': '0.1' }, {})).message).toBe(
        'invalid configuration: --flashblock-interval (FLASHBLOCK_INTERVAL) must divide --block-time (BLOCK_TIME) into whole flashblocks: 100 ms is not a positive multiple of 200 ms',
      )
      expect(configErrorOf(() => parseConfig(schema, { 'flashblock-interval': '3000' }, {})).message).toBe(
        'invalid configuration: --flashblock-interval (FLASHBLOCK_INTERVAL) must divide --block-time (BLOCK_TIME) into whole flashblocks: 2000 ms is not a positive multiple of 3000 ms (got "3000")',
      )
      expect(() => parseConfig(schema, {}, { BLOCK_TIME: '0.5' })).toThrow(/500 ms is not a positive multiple of 200 ms/)
    }
  })

  test('--plain is true or false in FLASHBLOCKS_PLAIN, and anything else is refused naming both', () => {
    expect(parseConfig(devnetConfigSchema, {}, { FLASHBLOCKS_PLAIN: 'true' }).plain).toBe(true)
    expect(parseConfig(devnetConfigSchema, { plain: 'true' }, { FLASHBLOCKS_PLAIN: 'false' }).plain).toBe(true)
    expect(configErrorOf(() => parseConfig(devnetConfigSchema, {}, { FLASHBLOCKS_PLAIN: 'perhaps' })).message).toBe(
      'invalid configuration: --plain (FLASHBLOCKS_PLAIN) must be true or false (or 1/0, yes/no, on/off) (got "perhaps")',
    )
  })

  test('--flashblocks-port is validated as a port', () => {
    expect(configErrorOf(() => parseConfig(devnetConfigSchema, {}, { FLASHBLOCKS_PORT: 'x' })).message).toBe(
      'invalid configuration: --flashblocks-port (FLASHBLOCKS_PORT) must be a port number (got "x")',
    )
  })
})

describe('OPTIONS', () => {
  test('every flag, environment variable and key is unique', () => {
    const flags = OPTIONS.map((option) => option.flag)
    const envs = OPTIONS.map((option) => option.env)
    const keys = OPTIONS.map((option) => option.key)
    expect(new Set(flags).size).toBe(OPTIONS.length)
    expect(new Set(envs).size).toBe(OPTIONS.length)
    expect(new Set(keys).size).toBe(OPTIONS.length)
  })

  test('every key of the serve and devnet schemas has an entry, so it can be set', () => {
    const keys = new Set<string>(OPTIONS.map((option) => option.key))
    expect(Object.keys(serveConfigSchema.shape).filter((key) => !keys.has(key))).toEqual([])
    expect(Object.keys(devnetConfigSchema.shape).filter((key) => !keys.has(key))).toEqual([])
  })

  test('every entry sets a key of the serve, devnet or dev schema', () => {
    const schemaKeys = new Set([...Object.keys(serveConfigSchema.shape), ...Object.keys(devnetConfigSchema.shape), ...Object.keys(devConfigSchema.shape)])
    expect(OPTIONS.filter((option) => !schemaKeys.has(option.key))).toEqual([])
  })

  test('the README has a row for every option, with its flag, variable and the default --help gives', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
    const rows = new Map(
      readme
        .split('\n')
        .map((line) => /^\| `--([a-z-]+)` \| `([A-Z_]+)` \| ([^|]+) \|/.exec(line))
        .filter((row) => row !== null)
        .map(([, flag, env, fallback]) => [flag!, { env, fallback: fallback!.trim() }]),
    )
    for (const option of OPTIONS) {
      const row = rows.get(option.flag)
      expect(row, `README row for --${option.flag}`).toBeDefined()
      expect(row!.env, `README variable of --${option.flag}`).toBe(option.env)
      // `(default 8545)`, `(…, default false)`, `(default 8546; …)`: a plain default must be the README's too.
      const fallback = /\bdefault ([^\s;,)]+)[;)]/.exec(option.help)?.[1]
      if (fallback !== undefined) expect(row!.fallback, `README default of --${option.flag}`).toBe(`\`${fallback}\``)
    }
  })

  test('the README lists every command that --help lists', async () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
    const { stdout } = await run(process.execPath, [BIN, '--help'], { cwd: REPO_ROOT, env: { PATH: process.env.PATH }, timeout: 30_000 })
    const commands = stdout
      .split('commands:\n')[1]!
      .split('\n\n')[0]!
      .split('\n')
      .map((line) => /^ {2}([a-z]+)/.exec(line)?.[1])
      .filter((command) => command !== undefined)
    expect(new Set(commands)).toEqual(new Set(['dev', 'serve', 'devnet', 'migrate', 'keys', 'suffix', 'attribution']))
    for (const command of new Set(commands)) expect(readme, `README command flashgate ${command}`).toMatch(new RegExp(`^\\| \`flashgate ${command}\\b`, 'm'))
  })

  test('flags are kebab-case and variables SCREAMING_SNAKE_CASE', () => {
    for (const option of OPTIONS) {
      expect(option.flag).toMatch(/^[a-z]+(-[a-z]+)*$/)
      expect(option.env).toMatch(/^[A-Z]+(_[A-Z]+)*$/)
    }
  })
})

test('flashgate serve --port abc exits 2 with one line on stderr, before opening anything', async () => {
  // A clean environment: the developer's PORT, DATABASE_URL or LOG_LEVEL must not change the outcome.
  const outcome = await run(process.execPath, [BIN, 'serve', '--upstream-rpc', UPSTREAM_RPC, '--port', 'abc'], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH },
    timeout: 30_000,
  }).then(
    () => ({ code: 0, stdout: '', stderr: '' }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  )
  expect(outcome.code).toBe(2)
  expect(outcome.stdout).toBe('')
  expect(outcome.stderr).toBe('flashgate: invalid configuration: --port (PORT) must be a port number (got "abc")\n')
})

describe('pending source and feed format', () => {
  test('--pending-source and --feed-format take their named values and refuse others, naming the flag', () => {
    expect(parseConfig(serveConfigSchema, { 'upstream-rpc': 'http://127.0.0.1:1', 'pending-source': 'frames' }, {}).pendingSource).toBe('frames')
    expect(parseConfig(serveConfigSchema, { 'upstream-rpc': 'http://127.0.0.1:1' }, { PENDING_SOURCE: 'hydrate' }).pendingSource).toBe('hydrate')
    expect(parseConfig(serveConfigSchema, { 'upstream-rpc': 'http://127.0.0.1:1', 'pending-source': 'execute' }, {}).pendingSource).toBe('execute')
    expect(() => parseConfig(serveConfigSchema, { 'upstream-rpc': 'http://127.0.0.1:1', 'pending-source': 'magic' }, {})).toThrow(
      /--pending-source \(PENDING_SOURCE\) must be one of auto, hydrate, frames, execute \(got "magic"\)/,
    )
    expect(parseConfig(devnetConfigSchema, { 'feed-format': 'legacy' }, {}).feedFormat).toBe('legacy')
    expect(() => parseConfig(devnetConfigSchema, {}, { FEED_FORMAT: 'v2' })).toThrow(/--feed-format \(FEED_FORMAT\) must be one of current, legacy/)
  })
})

describe('builder-code registry', () => {
  test('--builder-code-registry takes an address (lower-cased), default or off, and refuses anything else, naming the flag', () => {
    expect(serveConfig().builderCodeRegistry).toBe('default')
    expect(serveConfig({ 'builder-code-registry': 'off' }).builderCodeRegistry).toBeNull()
    expect(serveConfig({}, { BUILDER_CODE_REGISTRY: '0x000000BC7E6457E610FE52DCC0CA5B3CE59C8E80' }).builderCodeRegistry).toBe(
      '0x000000bc7e6457e610fe52dcc0ca5b3ce59c8e80',
    )
    expect(serveConfig({ 'entry-points': '0.7=0x0000000000000000000000000000000000e0e0e0' }).entryPoints).toEqual([
      { version: '0.7', address: '0x0000000000000000000000000000000000e0e0e0' },
    ])
    expect(() => serveConfig({ 'entry-points': '0.5=0x0000000000000000000000000000000000e0e0e0' })).toThrow(
      /--entry-points \(ENTRY_POINTS\) must be canonical or version=address/,
    )
    for (const given of ['0x1234', 'none', '0x000000bc7e6457e610fe52dcc0ca5b3ce59c8e80aa'])
      expect(() => serveConfig({ 'builder-code-registry': given })).toThrow(
        /--builder-code-registry \(BUILDER_CODE_REGISTRY\) must be an address, default or off/,
      )
  })
})
