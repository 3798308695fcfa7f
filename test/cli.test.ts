import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { TestDatabase } from './fixtures/db.js'
import { rpc } from './fixtures/gateway.js'
import { freePort } from './fixtures/ports.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'

const BIN = new URL('../bin/flashgate.js', import.meta.url).pathname
const TX_HASH = `0x${'ab'.repeat(32)}`
/** How long `flashgate dev` may take to print its URLs (anvil, the gateway, the demo traffic's first sends). */
const DEV_START_TIMEOUT_MS = 60_000

type Run = { code: number; stdout: string; stderr: string }

/** Registers test/fixtures/record-packages.mjs in the process it is given to (`node --import`). */
const RECORD_PACKAGES_HOOK = `data:text/javascript,import{register}from'node:module';register(${JSON.stringify(new URL('./fixtures/record-packages.mjs', import.meta.url).href)})`

/**
 * Runs the flashgate binary in `cwd` with an environment that names no database, gateway or port; with
 * `recordPackages`, every package it resolves is appended to that file.
 */
function flashgate(
  args: string[],
  { cwd, env = {}, recordPackages, timeoutMs = 0 }: { cwd: string; env?: Record<string, string>; recordPackages?: string; timeoutMs?: number },
): Promise<Run> {
  const base = { ...process.env }
  for (const name of ['DATABASE_URL', 'FLASHGATE_URL', 'PORT', 'DEVNET_PORT', 'FLASHBLOCKS_PORT', 'LOG_LEVEL']) delete base[name]
  const hook = recordPackages === undefined ? [] : ['--import', RECORD_PACKAGES_HOOK]
  const recorded = recordPackages === undefined ? {} : { RECORD_PACKAGES: recordPackages }
  return new Promise((resolve) => {
    // A run past `timeoutMs` is killed outright: one spinning in synchronous code never hears SIGTERM.
    const options = { cwd, env: { ...base, ...env, ...recorded }, timeout: timeoutMs, killSignal: 'SIGKILL' as const }
    execFile(process.execPath, [...hook, BIN, ...args], options, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr })
    })
  })
}

/** A failure as the CLI must report it: exit code `code`, one line on stderr matching `message`. */
function expectOneLineFailure(run: Run, code: number, message: RegExp) {
  expect(run.stderr.trimEnd().split('\n'), run.stderr).toHaveLength(1)
  expect(run.stderr).toMatch(/^flashgate: /)
  expect(run.stderr).toMatch(message)
  expect(run.code).toBe(code)
}

/**
 * The CLI never reads the test database: every run here drops DATABASE_URL, and `flashgate dev` keeps its own
 * PGlite directory. So the file runs in the PGlite pass only; in CI's Postgres pass it would repeat exactly
 * the same runs (the longest file of that pass).
 */
const SAME_IN_EVERY_PASS = process.env.DATABASE_URL !== undefined

let cwd: string

beforeAll(() => {
  cwd = mkdtempSync(join(tmpdir(), 'flashgate-cli-'))
})

afterAll(() => {
  rmSync(cwd, { recursive: true, force: true })
})

describe.skipIf(SAME_IN_EVERY_PASS)('every CLI failure is one line on stderr with a non-zero exit code', () => {
  test('attribution with no gateway at the URL it was given, by --url or --port, else FLASHGATE_URL or PORT, in that order', async () => {
    const [byPort, byEnv, byFlag, byPortFlag] = [await freePort(), await freePort(), await freePort(), await freePort()]
    const env = { PORT: String(byPort), FLASHGATE_URL: `http://127.0.0.1:${byEnv}` }
    const runs = await Promise.all([
      flashgate(['attribution', TX_HASH], { cwd, env: { PORT: String(byPort) } }),
      flashgate(['attribution', TX_HASH], { cwd, env }),
      flashgate(['attribution', TX_HASH, '--url', `http://127.0.0.1:${byFlag}`], { cwd, env }),
      // A flag wins over a variable: --port over FLASHGATE_URL and PORT.
      flashgate(['attribution', TX_HASH, '--port', String(byPortFlag)], { cwd, env }),
    ])
    expectOneLineFailure(runs[0]!, 1, new RegExp(`cannot reach the gateway at http://127.0.0.1:${byPort} \\(ECONNREFUSED\\)`))
    expectOneLineFailure(runs[1]!, 1, new RegExp(`at http://127.0.0.1:${byEnv} `))
    expectOneLineFailure(runs[2]!, 1, new RegExp(`at http://127.0.0.1:${byFlag} `))
    expectOneLineFailure(runs[3]!, 1, new RegExp(`at http://127.0.0.1:${byPortFlag} `))
  })

  test('attribution with a gateway named wrongly: a bad --url, FLASHGATE_URL or --port, or both flags, is bad configuration (exit 2)', async () => {
    const runs = await Promise.all([
      flashgate(['attribution', TX_HASH, '--url', 'not a url'], { cwd }),
      flashgate(['attribution', TX_HASH], { cwd, env: { FLASHGATE_URL: 'notaurl' } }),
      flashgate(['attribution', TX_HASH, '--url', 'ftp://127.0.0.1/'], { cwd }),
      flashgate(['attribution', TX_HASH, '--port', 'abc'], { cwd }),
      flashgate(['attribution', TX_HASH], { cwd, env: { PORT: '70000' } }),
      flashgate(['attribution', TX_HASH, '--url', 'http://127.0.0.1:1', '--port', '47011'], { cwd }),
    ])
    expectOneLineFailure(runs[0]!, 2, /invalid configuration: --url \(FLASHGATE_URL\) must be a http or https URL \(got "not a url"\)/)
    expectOneLineFailure(runs[1]!, 2, /invalid configuration: --url \(FLASHGATE_URL\) must be a http or https URL \(got "notaurl"\)/)
    expectOneLineFailure(runs[2]!, 2, /--url \(FLASHGATE_URL\) must be a http or https URL/)
    expectOneLineFailure(runs[3]!, 2, /invalid configuration: --port \(PORT\) must be a port number \(got "abc"\)/)
    expectOneLineFailure(runs[4]!, 2, /--port \(PORT\) must be between 0 and 65535 \(got "70000"\)/)
    expectOneLineFailure(runs[5]!, 2, /--url and --port both name the gateway: give one/)
  })

  test('bad flags and values: a negative rate, an unknown option, a missing value, an unknown command, a bad port', async () => {
    const runs = await Promise.all([
      flashgate(['keys', 'create', '--name', 'x', '--rate', '-1'], { cwd }),
      flashgate(['keys', 'create', '--name', 'x', '--rate=-1'], { cwd }),
      flashgate(['serve', '--bogus'], { cwd }),
      flashgate(['keys', 'create', '--name'], { cwd }),
      flashgate(['frobnicate'], { cwd }),
      flashgate(['dev', '--devnet-port', '70000'], { cwd }),
      flashgate(['serve', '--role', 'serve', '--upstream-rpc', 'http://127.0.0.1:1'], { cwd }),
      flashgate(['serve', '--role', 'reader', '--upstream-rpc', 'http://127.0.0.1:1'], { cwd }),
      flashgate(['serve', '--database-read-url', 'postgres://127.0.0.1:1/replica', '--upstream-rpc', 'http://127.0.0.1:1'], { cwd }),
      flashgate(['migrate', '--database-url', 'mysql://x'], { cwd }),
      flashgate(['serve', '--database-url', 'postgress://127.0.0.1/x', '--upstream-rpc', 'http://127.0.0.1:1'], { cwd }),
      flashgate(['keys', 'list', '--database-url', 'mysql://x'], { cwd }),
      flashgate(['keys', 'frobnicate'], { cwd }),
      flashgate(['suffix'], { cwd }),
      flashgate(['attribution'], { cwd }),
      flashgate(['devnet', '--block-time', '0.1'], { cwd }),
      flashgate(['devnet', '--flashblock-interval', '3000'], { cwd }),
      flashgate(['dev', '--block-time', '0.1'], { cwd }),
    ])
    expectOneLineFailure(runs[0]!, 2, /--rate must be a whole number/)
    expectOneLineFailure(runs[1]!, 2, /--rate must be a whole number/)
    expectOneLineFailure(runs[2]!, 2, /unknown option --bogus/)
    expectOneLineFailure(runs[3]!, 2, /--name <value>' argument missing/)
    expectOneLineFailure(runs[4]!, 2, /unknown command "frobnicate"/)
    expectOneLineFailure(runs[5]!, 2, /--devnet-port \(DEVNET_PORT\) must be between 0 and 65535/)
    expectOneLineFailure(runs[6]!, 2, /--role serve needs a Postgres database shared by several processes/)
    expectOneLineFailure(runs[7]!, 2, /--role \(ROLE\) must be one of all, ingest, serve/)
    expectOneLineFailure(runs[8]!, 2, /--database-read-url needs Postgres/)
    // A database URL of another scheme is refused, never taken for a PGlite directory of that name.
    expectOneLineFailure(runs[9]!, 2, /--database-url mysql:\/\/ is not a database flashgate opens/)
    expectOneLineFailure(runs[10]!, 2, /postgress:\/\/ is not a database flashgate opens/)
    expectOneLineFailure(runs[11]!, 2, /--database-url mysql:\/\/ is not a database flashgate opens/)
    expectOneLineFailure(runs[12]!, 2, /usage: flashgate keys create\|list\|revoke/)
    expectOneLineFailure(runs[13]!, 2, /usage: flashgate suffix/)
    expectOneLineFailure(runs[14]!, 2, /usage: flashgate attribution/)
    // A block that is not a whole number of flashblocks is a bad value, refused before the devnet starts.
    expectOneLineFailure(runs[15]!, 2, /--flashblock-interval \(FLASHBLOCK_INTERVAL\) must divide --block-time \(BLOCK_TIME\) .*100 ms is not/)
    expectOneLineFailure(runs[16]!, 2, /must divide --block-time \(BLOCK_TIME\) into whole flashblocks: 2000 ms .* \(got "3000"\)/)
    expectOneLineFailure(runs[17]!, 2, /--flashblock-interval \(FLASHBLOCK_INTERVAL\) must divide --block-time/)
    expect(existsSync(join(cwd, 'mysql:'))).toBe(false)
    // Nothing was created: the refusals come before any database is opened.
    expect(existsSync(join(cwd, '.flashgate'))).toBe(false)
  })

  test('an argument no command reads is refused, not ignored: exit 2 naming it', async () => {
    // A serve that took the argument for nothing would run on: killed after 60 s (and the test fails).
    const timeoutMs = 60_000
    const runs = await Promise.all([
      flashgate(['serve', 'foo', '--upstream-rpc', 'http://127.0.0.1:1', '--port', '0'], { cwd, timeoutMs }),
      flashgate(['migrate', 'now'], { cwd, timeoutMs }),
      flashgate(['keys', 'list', 'extra'], { cwd, timeoutMs }),
      flashgate(['keys', 'revoke', 'one', 'two'], { cwd, timeoutMs }),
      flashgate(['attribution', TX_HASH, 'more'], { cwd, timeoutMs }),
    ])
    expectOneLineFailure(runs[0]!, 2, /unexpected argument "foo" after flashgate serve /)
    expectOneLineFailure(runs[1]!, 2, /unexpected argument "now" after flashgate migrate /)
    expectOneLineFailure(runs[2]!, 2, /unexpected argument "extra" after flashgate keys list /)
    expectOneLineFailure(runs[3]!, 2, /unexpected argument "two" after flashgate keys revoke one /)
    expectOneLineFailure(runs[4]!, 2, /unexpected argument "more" after flashgate attribution 0x/)
    expect(existsSync(join(cwd, '.flashgate'))).toBe(false)
  }, 120_000)

  test('a PGlite directory that cannot be created (under /proc, below a file) is refused at once: exit 2 naming it', async () => {
    // Node 20's recursive mkdirSync spins forever under /proc: a run still going after 60 s is killed (and fails).
    const timeoutMs = 60_000
    const runs = await Promise.all([
      flashgate(['migrate', '--database-url', '/proc/flashgate-cannot/pglite'], { cwd, timeoutMs }),
      flashgate(['keys', 'list', '--database-url', '/proc/flashgate-cannot'], { cwd, timeoutMs }),
      flashgate(['serve', '--database-url', '/proc/flashgate-cannot', '--upstream-rpc', 'http://127.0.0.1:1', '--port', '0'], { cwd, timeoutMs }),
      flashgate(['migrate', '--database-url', `${BIN}/pglite`], { cwd, timeoutMs }),
    ])
    expectOneLineFailure(runs[0]!, 2, /cannot create the PGlite directory \/proc\/flashgate-cannot\/pglite \(ENOENT/)
    expectOneLineFailure(runs[1]!, 2, /cannot create the PGlite directory \/proc\/flashgate-cannot /)
    expectOneLineFailure(runs[2]!, 2, /cannot create the PGlite directory \/proc\/flashgate-cannot /)
    expectOneLineFailure(runs[3]!, 2, /cannot create the PGlite directory .*\(ENOTDIR/)
  }, 120_000)

  test('a builder code with a space is printable ASCII, as ERC-8021 allows: suffix writes it', async () => {
    const run = await flashgate(['suffix', 'my app', 'fine'], { cwd })
    expect(run).toEqual({ code: 0, stdout: '0x6d79206170702c66696e650b0080218021802180218021802180218021\n', stderr: '' })
    expectOneLineFailure(await flashgate(['suffix', 'a,b'], { cwd }), 2, /not an attribution code: "a,b"/)
  })

  test('an unexpected failure shows its stack at --log-level debug, as at LOG_LEVEL=debug, the flag winning', async () => {
    const args = ['migrate', '--database-url', 'postgres://postgres@127.0.0.1:1/none']
    const [plain, byFlag, byVariable, flagWins] = await Promise.all([
      flashgate(args, { cwd }),
      flashgate([...args, '--log-level', 'debug'], { cwd }),
      flashgate(args, { cwd, env: { LOG_LEVEL: 'debug' } }),
      flashgate([...args, '--log-level', 'info'], { cwd, env: { LOG_LEVEL: 'debug' } }),
    ])
    expectOneLineFailure(plain, 1, /ECONNREFUSED.*\(--log-level debug shows the details\)/)
    expectOneLineFailure(flagWins, 1, /ECONNREFUSED/)
    for (const run of [byFlag, byVariable]) {
      expect(run.code).toBe(1)
      expect(run.stderr).toMatch(/ECONNREFUSED/)
      expect(run.stderr).toMatch(/\n\s+at /)
    }
  })

  test('help, a bad value, a role the database cannot serve or an unknown command loads none of the gateway: no viem, driver, GraphQL or logger', async () => {
    const GATEWAY_PACKAGES = ['viem', 'graphql', 'graphql-yoga', 'postgres', '@electric-sql/pglite', 'drizzle-orm', 'ioredis', 'pino', 'ws']
    const loaded = async (name: string, args: string[]) => {
      const file = join(cwd, `packages-${name}.txt`)
      const run = await flashgate(args, { cwd, recordPackages: file })
      return { run, packages: new Set(existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []) }
    }
    const [help, badPort, badRole, badDevnet, badDev, unknown, migrate] = await Promise.all([
      loaded('help', ['--help']),
      loaded('bad-port', ['serve', '--port', 'abc']),
      loaded('bad-role', ['serve', '--role', 'serve', '--upstream-rpc', 'http://127.0.0.1:1']),
      loaded('bad-devnet', ['devnet', '--block-time', 'x']),
      loaded('bad-dev', ['dev', '--max-batch', '0']),
      loaded('unknown', ['frobnicate']),
      loaded('migrate', ['migrate', '--database-url', 'postgres://postgres@127.0.0.1:1/none']),
    ])
    expect(help.run.stdout).toMatch(/^usage: flashgate <command>/m)
    expectOneLineFailure(badPort.run, 2, /--port \(PORT\) must be a port number/)
    expectOneLineFailure(badRole.run, 2, /--role serve needs a Postgres database shared by several processes/)
    expectOneLineFailure(badDevnet.run, 2, /--block-time \(BLOCK_TIME\) must be a number of seconds/)
    expectOneLineFailure(badDev.run, 2, /--max-batch \(MAX_BATCH\) must be positive \(got "0"\)/)
    expectOneLineFailure(unknown.run, 2, /unknown command "frobnicate"/)
    for (const { packages } of [help, badPort, badRole, badDevnet, badDev, unknown]) {
      expect(packages.has('zod'), [...packages].join(' ')).toBe(true)
      expect(GATEWAY_PACKAGES.filter((name) => packages.has(name))).toEqual([])
    }
    // The recording sees what a command does load: `migrate` opens the database with its driver.
    expectOneLineFailure(migrate.run, 1, /ECONNREFUSED/)
    expect(['postgres', 'drizzle-orm'].filter((name) => migrate.packages.has(name))).toEqual(['postgres', 'drizzle-orm'])
  })

  test('dev with a bad gateway value (--max-batch 0, --role ingest on PGlite) deletes nothing and starts nothing: exit 2', async () => {
    const checkout = mkdtempSync(join(tmpdir(), 'flashgate-cli-dev-'))
    try {
      const devDirectory = join(checkout, '.flashgate/dev-pglite')
      mkdirSync(devDirectory, { recursive: true })
      writeFileSync(join(devDirectory, 'kept'), 'the last dev run')
      // Without the check, the devnet would start (and run on) before the refusal: killed after 60 s, and fails.
      const timeoutMs = 60_000
      const [devnetPort, flashblocksPort] = [await freePort(), await freePort()]
      const ports = ['--devnet-port', String(devnetPort), '--flashblocks-port', String(flashblocksPort)]
      const runs = await Promise.all([
        flashgate(['dev', '--max-batch', '0', ...ports], { cwd: checkout, timeoutMs }),
        flashgate(['dev', '--role', 'ingest', ...ports], { cwd: checkout, timeoutMs }),
      ])
      expectOneLineFailure(runs[0]!, 2, /invalid configuration: --max-batch \(MAX_BATCH\) must be positive \(got "0"\)/)
      expectOneLineFailure(runs[1]!, 2, /--role ingest needs a Postgres database/)
      expect(readdirSync(devDirectory)).toEqual(['kept'])
    } finally {
      rmSync(checkout, { recursive: true, force: true })
    }
  }, 120_000)

  test('serve on a port in use: one line naming the port and the option that chooses it', async () => {
    const taken: Server = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    const { port } = taken.address() as { port: number }
    try {
      const run = await flashgate(['serve', '--upstream-rpc', 'http://127.0.0.1:1', '--database-url', 'memory://', '--log-level', 'silent'], {
        cwd,
        env: { PORT: String(port) },
      })
      expectOneLineFailure(run, 1, new RegExp(`port ${port} is already in use \\(EADDRINUSE\\); choose another with --port \\(PORT\\)`))
    } finally {
      await new Promise((resolve) => taken.close(resolve))
    }
  })
})

/** `flashgate serve` as a child process whose output the test reads as it comes, in an environment naming nothing. */
function startServe(args: string[]) {
  const base = { ...process.env }
  for (const name of ['DATABASE_URL', 'FLASHGATE_URL', 'PORT', 'LOG_LEVEL']) delete base[name]
  const child = spawn(process.execPath, [BIN, 'serve', ...args], { cwd, env: base, stdio: ['ignore', 'pipe', 'pipe'] })
  const output = { stdout: '', stderr: '' }
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output.stdout += chunk))
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output.stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  return { child, output, exited }
}

/**
 * `serve` where a process runs several workers and `--role` splits the work: on a Postgres database of its
 * own (DATABASE_URL's server, or a throwaway cluster). Like the rest of the file, the PGlite pass only.
 */
describe.skipIf(SAME_IN_EVERY_PASS || !SHARED_POSTGRES_AVAILABLE)('serve on Postgres', () => {
  const UPSTREAM = 'http://127.0.0.1:1'
  let database: TestDatabase

  beforeAll(async () => {
    database = await createSharedPostgresDatabase()
  }, 120_000)

  afterAll(async () => {
    await database?.drop()
  })

  test('several workers on a port in use: the one line a single process prints, once, and its exit code', async () => {
    const taken: Server = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    const { port } = taken.address() as { port: number }
    try {
      // At the default log level: nothing but the failure reaches stderr.
      const serve = (workers: string) =>
        flashgate(['serve', '--workers', workers, '--upstream-rpc', UPSTREAM, '--database-url', database.databaseUrl], {
          cwd,
          env: { PORT: String(port) },
          timeoutMs: 60_000,
        })
      const single = await serve('1')
      expectOneLineFailure(single, 1, new RegExp(`^flashgate: port ${port} is already in use \\(EADDRINUSE\\); choose another with --port \\(PORT\\)\n$`))
      expect(await serve('2')).toEqual(single)
    } finally {
      await new Promise((resolve) => taken.close(resolve))
    }
  }, 120_000)

  test('a port taken after the primary has started is reported once, by the primary, for all its workers', async () => {
    const port = await freePort()
    const taken: Server = createServer()
    const serve = startServe(['--workers', '2', '--port', String(port), '--upstream-rpc', UPSTREAM, '--database-url', database.databaseUrl])
    // The primary holds the ingest lock once its own gateway has started, and forks its workers then: they
    // bind the port only once they have loaded and connected (seconds later), after the test has taken it.
    let taking = false
    serve.child.stderr!.on('data', () => {
      if (taking || !serve.output.stderr.includes('holding the ingest lock')) return
      taking = true
      taken.once('error', () => {}).listen(port, '127.0.0.1')
    })
    const timer = setTimeout(() => serve.child.kill('SIGKILL'), 60_000)
    try {
      const code = await serve.exited
      expect(taking, serve.output.stderr).toBe(true)
      // The primary's own log lines (JSON) aside, one line: the one a single process prints.
      const lines = serve.output.stderr.trimEnd().split('\n')
      expect(
        lines.filter((line) => !line.startsWith('{')),
        serve.output.stderr,
      ).toEqual([`flashgate: port ${port} is already in use (EADDRINUSE); choose another with --port (PORT)`])
      expect(lines.filter((line) => /"level":(5|6)0/.test(line))).toEqual([])
      expect(code).toBe(1)
    } finally {
      clearTimeout(timer)
      serve.child.kill('SIGKILL')
      await new Promise((resolve) => taken.close(resolve))
    }
  }, 120_000)

  test('--role ingest names in its banner only what it answers: health, readiness and metrics', async () => {
    const serve = startServe(['--role', 'ingest', '--port', '0', '--upstream-rpc', UPSTREAM, '--database-url', database.databaseUrl, '--log-level', 'silent'])
    try {
      await expect.poll(() => serve.output.stdout, { timeout: 60_000 }).toMatch(/^ {2}database /m)
      const banner = serve.output.stdout
      expect(banner).not.toMatch(/JSON-RPC|GraphQL|\/rpc\//)
      const url = /^ {2}health +(\S+)\/healthz +\S+\/readyz +\S+\/metrics$/m.exec(banner)?.[1]
      expect(url, banner).toBeDefined()
      expect((await fetch(`${url}/healthz`)).status).toBe(200)
      // What the banner leaves out, the process does not answer.
      expect((await fetch(`${url}/graphql`)).status).toBe(404)
    } finally {
      serve.child.kill('SIGTERM')
      await serve.exited
    }
    expect(serve.child.exitCode, serve.output.stderr).toBe(0)
  }, 120_000)
})

/** `flashgate dev` started in `cwd`; resolves with its printed URLs once it has printed them. */
function startDev(
  env: Record<string, string>,
  { ownGroup = false }: { ownGroup?: boolean } = {},
): Promise<{ child: ChildProcess; output: () => string; urls: Record<string, string> }> {
  const base = { ...process.env }
  for (const name of ['DATABASE_URL', 'FLASHGATE_URL', 'PORT', 'LOG_LEVEL']) delete base[name]
  // `ownGroup`: the leader of a process group, as a shell starts a foreground command.
  const child = spawn(process.execPath, [BIN, 'dev'], { cwd, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: ownGroup })
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`flashgate dev did not start:\n${output}`)), DEV_START_TIMEOUT_MS)
    child.once('exit', (code) => reject(new Error(`flashgate dev exited (${code}):\n${output}`)))
    child.stdout!.on('data', () => {
      if (!output.includes('  try: ')) return
      clearTimeout(timer)
      const url = (label: string) => new RegExp(`^  ${label} +(\\S+)`, 'm').exec(output)![1]!
      resolve({
        child,
        output: () => output,
        urls: { jsonRpc: url('JSON-RPC'), dedicated: url('dedicated'), devnet: url('devnet'), flashblocks: url('flashblocks') },
      })
    })
  })
}

test.skipIf(SAME_IN_EVERY_PASS)(
  'flashgate dev: devnet ports from the environment; keys reach the running dev database; a second dev is refused and deletes nothing',
  async () => {
    const [devnetPort, flashblocksPort] = [await freePort(), await freePort()]
    const dev = await startDev({ PORT: '0', DEVNET_PORT: String(devnetPort), FLASHBLOCKS_PORT: String(flashblocksPort) })
    try {
      expect(dev.urls.devnet).toBe(`http://127.0.0.1:${devnetPort}`)
      expect(new URL(dev.urls.flashblocks!).port).toBe(String(flashblocksPort))
      const devDirectory = join(cwd, '.flashgate/dev-pglite')
      // The token that lets `keys` in is readable by its owner only.
      expect(statSync(join(devDirectory, 'flashgate-admin.json')).mode & 0o777).toBe(0o600)

      // A second dev in the same checkout: refused in one line naming the running one, before deleting anything.
      const second = await flashgate(['dev', '--port', '0', '--devnet-port', '0', '--flashblocks-port', '0'], { cwd })
      expectOneLineFailure(second, 1, new RegExp(`flashgate dev \\(pid ${dev.child.pid}\\) is running on ./.flashgate/dev-pglite`))
      expect(await rpc(dev.urls.dedicated!, 'eth_chainId')).toMatchObject({ result: expect.any(String) })

      // No --database-url: the default directory is free, so keys finds the running dev's, says so, and goes
      // through the running process (the directory is never opened twice).
      const packagesFile = join(cwd, 'packages-keys-through-dev.txt')
      const created = await flashgate(['keys', 'create', '--name', 'ci', '--rate', '0'], { cwd, recordPackages: packagesFile })
      expect(created.code, created.stderr).toBe(0)
      // Through the running process, keys loads no database driver, resolvers or GraphQL of its own.
      const packages = new Set(readFileSync(packagesFile, 'utf8').split('\n'))
      expect(['@electric-sql/pglite', 'postgres', 'drizzle-orm', 'graphql', 'viem'].filter((name) => packages.has(name))).toEqual([])
      expect(created.stderr).toMatch(
        new RegExp(`^database: ./.flashgate/dev-pglite, through the running flashgate dev \\(pid ${dev.child.pid}\\) .*--database-url ./.flashgate/pglite`),
      )
      const key = created.stdout.split('\n')[0]!
      expect(await rpc(`${dev.urls.jsonRpc}rpc/${key}`, 'eth_getBlockReceipts', ['latest'])).toMatchObject({ result: expect.any(Array) })
      const listed = await flashgate(['keys', 'list', '--database-url', '.flashgate/dev-pglite'], { cwd })
      expect(listed.stdout).toMatch(/ dev +fg_\S+… +dedicated .* active\n.* ci +fg_\S+… +dedicated +no limit .* active/)
      const revoked = await flashgate(['keys', 'revoke', 'ci'], { cwd })
      expect(revoked.stdout).toMatch(/ ci .* revoked /)
      const refused = await fetch(`${dev.urls.jsonRpc}rpc/${key}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}',
      })
      expect(refused.status).toBe(401)

      // Anything else that would open the directory is refused, naming the process that holds it.
      const migratePackages = join(cwd, 'packages-migrate-held.txt')
      expectOneLineFailure(
        await flashgate(['migrate', '--database-url', '.flashgate/dev-pglite'], { cwd, recordPackages: migratePackages }),
        1,
        new RegExp(`in use by flashgate dev \\(pid ${dev.child.pid}\\)`),
      )
      // Refused before the driver that would open it is loaded.
      expect(readFileSync(migratePackages, 'utf8').split('\n')).not.toContain('@electric-sql/pglite')
    } finally {
      dev.child.kill('SIGTERM')
      await new Promise((resolve) => dev.child.once('exit', resolve))
    }
    expect(dev.child.exitCode).toBe(0)
    // Stopped: the lock and the token are gone, and keys opens the default database itself, saying which.
    expect(readdirSync(join(cwd, '.flashgate/dev-pglite')).filter((name) => name.startsWith('flashgate'))).toEqual([])
    const listed = await flashgate(['keys', 'list'], { cwd })
    expect(listed).toMatchObject({ code: 0, stderr: 'database: ./.flashgate/pglite\n' })
  },
  120_000,
)

test.skipIf(SAME_IN_EVERY_PASS)(
  'Ctrl-C on flashgate dev (SIGINT to its whole process group, as a terminal sends it): it stops in order, logs no warning or error, exits 0 and leaves no anvil',
  async () => {
    const devnetPort = await freePort()
    const dev = await startDev({ PORT: '0', DEVNET_PORT: String(devnetPort), FLASHBLOCKS_PORT: '0' }, { ownGroup: true })
    // Pre-confirmed blocks on show, so that the devnet has one to take down, and the gateway state to drop.
    await expect
      .poll(
        async () =>
          ((await rpc(dev.urls.jsonRpc!, 'eth_getBlockByNumber', ['pending', false])).result as { transactions?: unknown[] } | null)?.transactions?.length,
        {
          timeout: 30_000,
        },
      )
      .toBeGreaterThan(0)
    const exited = new Promise((resolve) => dev.child.once('exit', resolve))
    process.kill(-dev.child.pid!, 'SIGINT')
    await exited
    expect(dev.child.exitCode, dev.output()).toBe(0)
    // pino's levels: 40 warn, 50 error, 60 fatal.
    expect(
      dev
        .output()
        .split('\n')
        .filter((line) => /"level":(4|5|6)0/.test(line)),
    ).toEqual([])
    await expect(fetch(dev.urls.devnet!, { method: 'POST', body: '{}' })).rejects.toThrow()
  },
  90_000,
)

describe('the README', () => {
  test('its suffix example is what `flashgate suffix` prints', async () => {
    const { readFile } = await import('node:fs/promises')
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8')
    const example = /npx flashgate suffix (\S+)\s+# (0x[0-9a-f]+)/.exec(readme)
    expect(example).not.toBeNull()
    const { Attribution } = await import('ox/erc8021')
    expect(Attribution.toDataSuffix({ codes: [example![1]!] })).toBe(example![2])
  })
})
