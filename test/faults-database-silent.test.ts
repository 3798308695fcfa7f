// A database connection that goes silent without closing: the host gone without a word, or a failover that
// moved the database behind the same name while the old connections lead nowhere. The kernel would take ~15
// minutes to give up on them (forever behind a proxy that keeps its side open); flashgate takes them for dead
// once a statement goes unanswered past the statement timeout, and carries on over new connections.
import { sql } from 'drizzle-orm'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Gateway, startGateway } from '../src/app.js'
import { serveConfigSchema } from '../src/config.js'
import { openPostgres } from '../src/db/postgres.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import type { TestDatabase } from './fixtures/db.js'
import { rpc } from './fixtures/gateway.js'
import { isPostgresUrl } from '../src/db/index.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'
import { mineEmptyBlocks } from './fixtures/chain.js'
import { waitForSameHead } from './fixtures/sync.js'
import { startTcpRelay } from './fixtures/tcp-relay.js'

/**
 * The same runs in CI's PGlite and Postgres passes (a Postgres database behind a relay either way): the
 * Postgres pass only, the shorter of the two (and the one with a Postgres to hand, where the PGlite pass
 * started a throwaway cluster for it).
 */
const SAME_IN_EVERY_PASS = !isPostgresUrl(process.env.DATABASE_URL ?? '')
/** Shortened from the default (the statement timeout and 10 s) to keep the test short. */
const UNANSWERED_AFTER_MS = 3_000

let database: TestDatabase
let anvil: Anvil
let gateway: Gateway | undefined
let relay: Awaited<ReturnType<typeof startTcpRelay>> | undefined

beforeAll(async () => {
  if (SHARED_POSTGRES_AVAILABLE && !SAME_IN_EVERY_PASS) [database, anvil] = await Promise.all([createSharedPostgresDatabase(), startAnvil()])
}, 120_000)

afterAll(async () => {
  relay?.close()
  await gateway?.stop()
  await database?.drop()
  await anvil?.stop()
})

describe.skipIf(!SHARED_POSTGRES_AVAILABLE || SAME_IN_EVERY_PASS)('a database connection that goes silent', () => {
  test('ingest and reads carry on over new connections within seconds', { timeout: 90_000 }, async () => {
    relay = await startTcpRelay(new URL(database.databaseUrl))
    relay.open()
    const config = serveConfigSchema.parse({ port: 0, databaseUrl: relay.url, upstreamRpc: anvil.rpcUrl, startBlock: '0', logLevel: 'silent' })
    const warnings: string[] = []
    const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(line) })
    gateway = await startGateway({ config, logger, unansweredAfterMs: UNANSWERED_AFTER_MS })
    await mineEmptyBlocks(anvil.rpcUrl, 3)
    await waitForSameHead(gateway, anvil.rpcUrl)

    // Every connection flashgate holds (the pool and the ingest lock's session) goes silent; new ones reach the database.
    relay.freeze({ newConnections: 'pass' })
    const frozenAt = Date.now()
    await mineEmptyBlocks(anvil.rpcUrl, 3)
    const head = await waitForSameHead(gateway, anvil.rpcUrl, 30_000)
    const recoveredMs = Date.now() - frozenAt
    // The first statements wait out the limit, then their connections are replaced: seconds, not minutes.
    expect(recoveredMs).toBeLessThan(UNANSWERED_AFTER_MS + 12_000)
    const block = await rpc(gateway.url, 'eth_getBlockByNumber', [`0x${head.toString(16)}`, false])
    expect(block.result).toMatchObject({ number: `0x${head.toString(16)}` })
    expect(warnings.join('')).toMatch(/left a statement unanswered/)
  })

  test('with the database away, /readyz says so and does not blame the upstream', { timeout: 90_000 }, async () => {
    // Connections go silent and new ones get no answer: the database is away, the upstream is fine.
    relay!.freeze({ newConnections: 'hold' })
    const since = Date.now()
    const seen: Record<string, unknown>[] = []
    // Past the 30 s after which an ingester that has not heard from the upstream calls it unresponsive.
    while (Date.now() - since < 36_000) {
      const response = await fetch(`${gateway!.url}/readyz`)
      seen.push({ status: response.status, ...((await response.json()) as Record<string, unknown>) })
      await new Promise((resolve) => setTimeout(resolve, 2_000))
    }
    const last = seen.at(-1)!
    expect(last, JSON.stringify(seen)).toMatchObject({ status: 503, ready: false, database: 'unreachable' })
    expect(seen.map((each) => each.upstream)).not.toContain('unresponsive')
  })
})

describe.skipIf(!SHARED_POSTGRES_AVAILABLE || SAME_IN_EVERY_PASS)('statements that wait behind busy connections', () => {
  test('are not taken for silence: only a connection that answers nothing for the limit is', { timeout: 60_000 }, async () => {
    const given: unknown[] = []
    const db = await openPostgres({ databaseUrl: database.databaseUrl, poolSize: 2, unansweredAfterMs: 1_500, onUnanswered: (event) => given.push(event) })
    try {
      // Twelve statements of 0.6 s on two connections: the last waits ~3 s for its turn, twice the limit, while
      // each connection answers every 0.6 s. Counted from when they were asked for, they would be given up.
      const startedAt = Date.now()
      const answers = await Promise.all(Array.from({ length: 12 }, (_, index) => db.query<{ n: number }>(sql`select pg_sleep(0.6), ${index}::int as n`)))
      expect(Date.now() - startedAt).toBeGreaterThan(3_000)
      expect(answers.map((rows) => rows[0]!.n)).toEqual(Array.from({ length: 12 }, (_, index) => index))
      expect(given).toEqual([])
    } finally {
      await db.close()
    }
  })
})
