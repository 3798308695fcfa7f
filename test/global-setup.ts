import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import type { TestProject } from 'vitest/node'
import { createDb, isPostgresUrl } from '../src/db/index.js'

declare module 'vitest' {
  export interface ProvidedContext {
    /** A PGlite directory created and migrated once per run, copied for each test file's database (fixtures/db.ts). */
    pgliteTemplate: string | null
    /** On Postgres, a database migrated once per run, the template of each test file's database (fixtures/db.ts). */
    postgresTemplate: string | null
  }
}

/**
 * One database is created and migrated for the whole run, and each test file's database is a copy of it:
 * - on PGlite (no Postgres `DATABASE_URL`), a fresh directory costs its initdb and every migration (3-5 s of
 *   CPU on these 2 cores); the copy is a directory copied, as Postgres' own template databases are;
 * - on Postgres, `create database` and the migrations took 0.6-1.0 s a file, `create database … template`
 *   and opening the copy 0.25-0.35 s (measured on this machine under load).
 * Opening a copy runs the migrations again, which finds them applied.
 */
export default async function setup(project: TestProject) {
  const base = process.env.DATABASE_URL
  if (base !== undefined && isPostgresUrl(base)) {
    project.provide('pgliteTemplate', null)
    const name = `flashgate_template_${randomBytes(6).toString('hex')}`
    const admin = postgres(base, { max: 1, onnotice: () => {} })
    await admin.unsafe(`create database ${name}`)
    const url = new URL(base)
    url.pathname = `/${name}`
    // Closed before any copy is made: Postgres copies a template only while no session is connected to it.
    const db = await createDb({ databaseUrl: url.toString() })
    await db.close()
    project.provide('postgresTemplate', name)
    return async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`)
      await admin.end({ timeout: 5 })
    }
  }
  project.provide('postgresTemplate', null)
  const directory = mkdtempSync(join(tmpdir(), 'flashgate-test-template-'))
  const template = join(directory, 'pglite')
  const db = await createDb({ databaseUrl: template })
  await db.close()
  project.provide('pgliteTemplate', template)
  return () => rmSync(directory, { recursive: true, force: true })
}
