// Ponder end to end (issue 13, item 8): a real Ponder 1.0 app indexes the devnet token's Transfer logs once
// through flashgate's dedicated endpoint and once against the devnet directly, with and without
// `includeTransactionReceipts` (test/fixtures/ponder.ts runs it). Through flashgate it must count exactly
// the node's Transfer logs, with a receipt where asked, have no request refused, and report no reorg and no
// warning during a few seconds of live indexing. How fast it syncs through flashgate against directly is a
// benchmark (`npm run bench -- --ponder`), not a test: the figures are printed here for reading only.
import type { Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { isPostgresUrl } from '../src/db/index.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import {
  errorCalls,
  LOGS_PER_WAVE,
  type PonderChain,
  type PonderRun,
  preparePonderChain,
  reorgLines,
  runPonderPair,
  summary,
  WAVES,
  warnings,
} from './fixtures/ponder.js'
import { anvilCall } from './fixtures/sync.js'

let devnet: Devnet
let database: TestDatabase
let gateway: TestGateway
let chain: PonderChain

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 100 })
  chain = await preparePonderChain(devnet.rpcUrl)
  // The head is read before flashgate starts: its start stalls this process's event loop for a few seconds,
  // after which a kept-alive connection to the devnet may be reset under the next request.
  const head = Number(await anvilCall<Hex>(devnet.rpcUrl, 'eth_blockNumber'))
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
  await gateway.ingester.waitForBlock(head, 30_000)
}, 120_000)

afterAll(async () => {
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
})

/**
 * Ponder against the devnet directly (the control: what the app indexes with no flashgate in between) runs no
 * flashgate code, so it would be the same run in CI's PGlite and Postgres passes: the Postgres pass only, the
 * shorter one. The runs through flashgate go in both.
 */
const DIRECT_IN_THIS_PASS = isPostgresUrl(process.env.DATABASE_URL ?? '')

describe('Ponder 1.0 through flashgate and directly', () => {
  let through: Map<boolean, PonderRun>
  let direct: Map<boolean, PonderRun>

  beforeAll(async () => {
    // Both settings at once, to keep the file short: first both through flashgate, then both directly.
    through = await runPonderPair(chain, gateway.dedicatedUrl)
    if (DIRECT_IN_THIS_PASS) direct = await runPonderPair(chain, devnet.rpcUrl)
  }, 300_000)

  test.each([true, false])(
    'includeTransactionReceipts: %s — through flashgate: every Transfer log, each request answered, no false reorg',
    (includeReceipts) => {
      const viaFlashgate = through.get(includeReceipts)!
      console.log(summary(`includeTransactionReceipts ${includeReceipts}, through flashgate`, viaFlashgate))

      expect(errorCalls(viaFlashgate), 'requests flashgate refused').toEqual([])
      expect(reorgLines(viaFlashgate), 'reorg messages through flashgate').toEqual([])
      expect(warnings(viaFlashgate), 'warnings through flashgate').toEqual([])
      // Every Transfer log the node has (the waves before and the live one), each once.
      expect(viaFlashgate.rows).toBe(viaFlashgate.nodeLogs)
      expect(viaFlashgate.rows).toBe((WAVES + 1) * LOGS_PER_WAVE)
      expect(viaFlashgate.withReceipt).toBe(includeReceipts ? viaFlashgate.rows : 0)
    },
  )

  test.skipIf(!DIRECT_IN_THIS_PASS).each([true, false])(
    'includeTransactionReceipts: %s — directly: every Transfer log, each request answered, no false reorg',
    (includeReceipts) => {
      const viaNode = direct.get(includeReceipts)!
      console.log(summary(`includeTransactionReceipts ${includeReceipts}, directly`, viaNode))

      expect(errorCalls(viaNode), 'requests the devnet refused').toEqual([])
      expect(reorgLines(viaNode), 'reorg messages directly').toEqual([])
      // Every Transfer log the node has (the waves before, the live one through flashgate's runs and its own), each once.
      expect(viaNode.rows).toBe(viaNode.nodeLogs)
      expect(viaNode.rows).toBe((WAVES + 2) * LOGS_PER_WAVE)
      expect(viaNode.withReceipt).toBe(includeReceipts ? viaNode.rows : 0)
    },
  )
})
