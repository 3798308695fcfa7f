import { execFile, execFileSync } from 'node:child_process'
import { chownSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import postgres from 'postgres'
import { createPostgresCluster, POSTGRES_BIN_DIR } from '../test/fixtures/postgres-cluster.js'

/** The machine is shared: the server runs at this niceness, so that other work keeps the CPUs when it wants them. */
const NICENESS = 10
/** initdb refuses to run as root: as root, the cluster belongs to this OS user (as in the test fixture). */
const POSTGRES_OS_USER = 'postgres'
const LOOPBACK_HOST = '127.0.0.1'
const PG_CTL_TIMEOUT_S = 120
/**
 * Sized for tens of GB of data on a 24 GiB machine that others share. Durability is of no interest in a
 * throwaway cluster (as in the test fixture); memory is, since the test fixture's 32 MB of shared buffers
 * would measure a server nobody deploys. Autovacuum is off: the bench runs `VACUUM ANALYZE` itself after
 * each load, so that no vacuum runs during a measurement. JIT is off: it compiles any statement the
 * planner prices high (a topic-only `eth_getLogs`), adding tens of milliseconds to a query that takes a few.
 */
const SERVER_SETTINGS = [
  'fsync=off',
  'synchronous_commit=off',
  'full_page_writes=off',
  'wal_level=minimal',
  'max_wal_senders=0',
  'max_connections=50',
  'shared_buffers=4GB',
  'effective_cache_size=16GB',
  'maintenance_work_mem=1GB',
  'work_mem=32MB',
  'max_wal_size=2GB',
  'checkpoint_timeout=30min',
  'autovacuum=off',
  'jit=off',
]

const run = promisify(execFile)
const asRoot = process.getuid?.() === 0

export type ScaleCluster = {
  port: number
  url(database?: string): string
  /** Where the data lives (kept with `--keep`). */
  directory: string
  /** Creates a database and returns its URL. */
  createDatabase(name: string): Promise<string>
  dropDatabase(name: string): Promise<void>
  /** The server's settings that shape the figures. */
  settings(): Promise<Record<string, string>>
  /** Stops the server; with `keep: false` also deletes its directory. Idempotent. */
  close(options: { keep: boolean }): Promise<void>
}

/** A server binary run as the cluster's owner at `NICENESS`. */
function niced(command: string, args: string[]): [string, string[]] {
  if (POSTGRES_BIN_DIR === null) throw new Error('no PostgreSQL server binaries (set POSTGRES_BIN_DIR)')
  const binary = join(POSTGRES_BIN_DIR, command)
  const nicedArgs = ['-n', String(NICENESS), binary, ...args]
  return asRoot ? ['runuser', ['-u', POSTGRES_OS_USER, '--', 'nice', ...nicedArgs]] : ['nice', nicedArgs]
}

/**
 * A throwaway cluster made by the test fixture (`createPostgresCluster`: Debian's binaries, its own port and
 * socket, never the shared server on 5432), then moved into a directory of its own and started again under
 * `nice` with memory for the data. The fixture deletes its clusters when the process exits, which `--keep`
 * must survive: the moved data directory is no longer the fixture's.
 */
export async function startScaleCluster(): Promise<ScaleCluster> {
  const fixture = await createPostgresCluster()
  const probe = postgres(fixture.url(), { max: 1, onnotice: () => {} })
  const [row] = await probe`show data_directory`
  await probe.end()
  await fixture.stop()
  const directory = mkdtempSync(join(tmpdir(), 'flashgate-scale-'))
  if (asRoot) {
    const owner = Number(execFileSync('id', ['-u', POSTGRES_OS_USER]).toString().trim())
    const group = Number(execFileSync('id', ['-g', POSTGRES_OS_USER]).toString().trim())
    chownSync(directory, owner, group)
  }
  const dataDir = join(directory, 'data')
  renameSync(row!.data_directory as string, dataDir)
  await fixture.destroy()

  const port = fixture.port
  const logFile = join(directory, 'server.log')
  const pgCtl = (args: string[]) => {
    const [command, commandArgs] = niced('pg_ctl', ['-D', dataDir, '-t', String(PG_CTL_TIMEOUT_S), ...args])
    return run(command, commandArgs)
  }
  const options = [`-p ${port}`, `-k ${directory}`, `-c listen_addresses=${LOOPBACK_HOST}`, ...SERVER_SETTINGS.map((setting) => `-c ${setting}`)]
  try {
    await pgCtl(['-l', logFile, '-o', options.join(' '), '-w', 'start'])
  } catch (error) {
    let log = ''
    try {
      log = readFileSync(logFile, 'utf8').slice(-4_000)
    } catch {}
    rmSync(directory, { recursive: true, force: true })
    throw new Error(`postgres did not start: ${(error as Error).message}\n${log}`)
  }

  let running = true
  let deleted = false
  // A crash never reaches close(): stop the server on the way out and delete its half-loaded data.
  const onExit = () => {
    if (!running) return
    try {
      const [command, args] = niced('pg_ctl', ['-D', dataDir, '-m', 'immediate', 'stop'])
      execFileSync(command, args, { stdio: 'ignore' })
    } catch {}
    rmSync(directory, { recursive: true, force: true })
  }
  process.on('exit', onExit)

  const url = (database = 'postgres') => `postgres://postgres@${LOOPBACK_HOST}:${port}/${database}`
  return {
    port,
    url,
    directory,
    async createDatabase(name) {
      const admin = postgres(url(), { max: 1, onnotice: () => {} })
      try {
        await admin.unsafe(`create database ${name}`)
      } finally {
        await admin.end()
      }
      return url(name)
    },
    async dropDatabase(name) {
      const admin = postgres(url(), { max: 1, onnotice: () => {} })
      try {
        await admin.unsafe(`drop database ${name}`)
      } finally {
        await admin.end()
      }
    },
    async settings() {
      const admin = postgres(url(), { max: 1, onnotice: () => {} })
      try {
        const rows = await admin`select name, setting, unit from pg_settings
          where name in ('server_version', 'shared_buffers', 'effective_cache_size', 'work_mem', 'random_page_cost', 'jit', 'autovacuum', 'default_toast_compression')`
        return Object.fromEntries(rows.map((setting) => [setting.name, setting.unit ? `${setting.setting} × ${setting.unit}` : setting.setting]))
      } finally {
        await admin.end()
      }
    },
    async close({ keep }) {
      if (running) {
        await pgCtl(['-m', 'fast', '-w', 'stop']).catch(() => pgCtl(['-m', 'immediate', '-w', 'stop']))
        running = false
      }
      process.off('exit', onExit)
      if (!keep && !deleted) {
        rmSync(directory, { recursive: true, force: true })
        deleted = true
      }
    },
  }
}

/** How to start a kept cluster again, for the report. */
export function keptClusterHint(directory: string, port: number): string {
  const [command, args] = niced('pg_ctl', [
    '-D',
    join(directory, 'data'),
    '-o',
    `"-p ${port} -k ${directory} ${SERVER_SETTINGS.map((setting) => `-c ${setting}`).join(' ')}"`,
    'start',
  ])
  return `${command} ${args.join(' ')}`
}
