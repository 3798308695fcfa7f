import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestProject } from 'vitest/node'
import { createDb, isPostgresUrl } from '../src/db/index.js'

declare module 'vitest' {
  export interface ProvidedContext {
    /** A PGlite directory created and migrated once per run, copied for each test file's database (fixtures/db.ts). */
    pgliteTemplate: string | null
  }
}

/**
 * On PGlite (no Postgres `DATABASE_URL`), one database is created and migrated for the whole run: a fresh
 * PGlite directory costs its initdb and every migration (3-5 s of CPU on these 2 cores), and each test file
 * would otherwise pay it again. Each file gets a copy of this one instead, as Postgres' own template
 * databases do; opening the copy runs the migrations again, which finds them applied.
 */
export default async function setup(project: TestProject) {
  const base = process.env.DATABASE_URL
  if (base !== undefined && isPostgresUrl(base)) {
    project.provide('pgliteTemplate', null)
    return
  }
  const directory = mkdtempSync(join(tmpdir(), 'flashgate-test-template-'))
  const template = join(directory, 'pglite')
  const db = await createDb({ databaseUrl: template })
  await db.close()
  project.provide('pgliteTemplate', template)
  return () => rmSync(directory, { recursive: true, force: true })
}
