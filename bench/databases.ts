import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'

export type BenchDatabase = {
  /** What `createDb` / `--database-url` takes. */
  databaseUrl: string
  /** For the report: `postgres` or `pglite`, with the database's name. */
  label: string
  drop(): Promise<void>
}

/** A fresh, empty database: `flashgate_bench_<random>` on Postgres, or a PGlite directory in a temp folder. */
export async function createBenchDatabase({ pglite, adminDatabaseUrl }: { pglite: boolean; adminDatabaseUrl: string }): Promise<BenchDatabase> {
  if (pglite) {
    const directory = mkdtempSync(join(tmpdir(), 'flashgate-bench-'))
    return {
      databaseUrl: join(directory, 'pglite'),
      label: `pglite ${directory}`,
      async drop() {
        // rmSync with force is idempotent.
        rmSync(directory, { recursive: true, force: true })
      },
    }
  }
  const name = `flashgate_bench_${randomBytes(6).toString('hex')}`
  const admin = postgres(adminDatabaseUrl, { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe(`create database ${name}`)
  } catch (error) {
    await admin.end({ timeout: 5 })
    throw error
  }
  const url = new URL(adminDatabaseUrl)
  url.pathname = `/${name}`
  let dropped: Promise<void> | null = null
  return {
    databaseUrl: url.toString(),
    label: `postgres ${name}`,
    // Idempotent: the bench drops a database as soon as it is done with it, and cleanup tries again.
    drop() {
      dropped ??= admin.unsafe(`drop database if exists ${name} with (force)`).then(
        () => admin.end({ timeout: 5 }),
        async (error: unknown) => {
          await admin.end({ timeout: 5 })
          throw error
        },
      )
      return dropped
    },
  }
}

/** Server version and the settings that matter for the figures, for the report. */
export async function describePostgres(databaseUrl: string): Promise<Record<string, string>> {
  const client = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    const rows = await client<{ name: string; setting: string }[]>`
      select name, setting from pg_settings
      where name in ('server_version', 'shared_buffers', 'synchronous_commit', 'fsync', 'work_mem', 'max_wal_size')`
    return Object.fromEntries(rows.map((row) => [row.name, row.setting]))
  } finally {
    await client.end({ timeout: 5 })
  }
}

/**
 * Flushes what the phases before left dirty in Postgres' buffers (the backfill and the write path each write
 * a gigabyte or more at 1M logs), so that a checkpoint does not start in the middle of the next phase's
 * figures and take a core (and the disk) from whatever is measured then. `CHECKPOINT` needs a superuser (or, from Postgres 15,
 * pg_checkpoint): without one the bench goes on and says so.
 */
export async function checkpoint(databaseUrl: string): Promise<boolean> {
  const client = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    await client`checkpoint`
    return true
  } catch {
    return false
  } finally {
    await client.end({ timeout: 5 })
  }
}
