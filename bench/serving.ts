import { createRandom } from '../test/fixtures/random.js'
import type { BenchChain } from './chain.js'
import { type LoadReport, runInterleaved, runLoad, writeBodies } from './load.js'
import { GET_LOGS_RANGE_BLOCKS, type BenchOptions } from './options.js'
import { addressTopicQuery, BENCH_METHODS, type BenchMethod, buildPools, COLD_POOL_SIZE, HOT_POOL_SIZE, toBodies } from './queries.js'
import { createRpcClient, type RpcCall } from './rpc.js'
import type { FloorServer } from './floor.js'
import { join } from 'node:path'
import { type VerifyResult, verifySample } from './verify.js'

/** Answers per method compared between flashgate and anvil before anything is timed. */
const VERIFY_SAMPLE = 50
/** Cap on the time one target may spend on the sequential headline queries. */
const HEADLINE_MAX_S = 120
/** Must match the worker's untimed warm-up (SEQUENTIAL_WARMUP in load-worker.ts). */
const HEADLINE_WARMUP = 20

export type MethodFigures = {
  flashgate: LoadReport
  anvil: LoadReport
  /** flashgate on a small pool of repeated bodies (its answer cache serves them), in a process of its own on Postgres. */
  flashgateCached: LoadReport
  /** A second flashgate on the same database started with `--answer-cache-mb 0`; `null` on PGlite. */
  flashgateUncached: LoadReport | null
  /** The floor (bench/floor-server.ts): a bare Node server writing the same answers to the same bodies from a table. */
  floor: LoadReport
  /**
   * Methods with large answers (receipts, logs): the same distinct requests sent as Node's fetch (viem) sends
   * them, accepting `gzip, deflate`, to anvil and to the uncached flashgate; `null` for small answers or PGlite.
   */
  asFetchSends: { anvil: LoadReport; flashgateUncached: LoadReport } | null
  /**
   * Receipts, stored compressed: the same, sent as ethers v6 sends them in Node, accepting `gzip` alone (as Go's
   * net/http does); absent in older results.
   */
  asEthersSends?: { anvil: LoadReport; flashgateUncached: LoadReport } | null
}

/** What Node's fetch (undici), and so viem's http transport, sends as `Accept-Encoding`. */
const FETCH_ACCEPT_ENCODING = 'gzip, deflate'
/** What ethers v6 sends in Node (its `FetchRequest` over `http`), and Go's `net/http` too. */
const ETHERS_ACCEPT_ENCODING = 'gzip'
/** Rounds of each pair measured in alternation (flashgate cached against the floor, uncached against anvil). */
const PAIRED_ROUNDS = 3
/** A paired round lasts half the load duration (at least 2 s): three rounds of two take 3× one plain run. */
function pairedRoundSeconds(loadDurationS: number): number {
  return Math.max(2, Math.round(loadDurationS / 2))
}
/** Methods whose answers are large enough to be compressed. */
const LARGE_ANSWER_METHODS: ReadonlySet<BenchMethod> = new Set(['eth_getBlockReceipts', 'eth_getLogs'])
/** Methods whose answers are stored compressed (sent as they are to a gzip-only client); others are compressed per request either way. */
const STORED_ANSWER_METHODS: ReadonlySet<BenchMethod> = new Set(['eth_getBlockReceipts'])

export type HeadlineFigures = { rangeBlocks: number; queries: number; averageLogs: number; flashgate: LoadReport; anvil: LoadReport }

export type ServingFigures = {
  verification: Record<string, VerifyResult>
  throughput: Partial<Record<BenchMethod, MethodFigures>>
  headline: HeadlineFigures
  /** One headline query, for the query plan in the report. */
  headlineSample: RpcCall
  /** The files of the bodies measured, for the workers' scaling (bench/workers.ts). */
  bodyFiles: { cold(method: BenchMethod): string; hot(method: BenchMethod): string }
}

/**
 * The read side, flashgate against anvil on the same chain: first a sample of answers must agree, then
 * autocannon per method (same pool, connections and duration for both), then the sequential headline.
 */
export async function measureServing({
  gatewayUrl,
  cachedUrl,
  uncachedUrl,
  anvilUrl,
  floor,
  chain,
  options,
  workDir,
  log,
}: {
  gatewayUrl: string
  /** Where the cached figures are taken: `flashgate serve` in a process of its own on Postgres. */
  cachedUrl: string
  uncachedUrl: string | null
  anvilUrl: string
  floor: FloorServer
  chain: BenchChain
  options: BenchOptions
  workDir: string
  log: (line: string) => void
}): Promise<ServingFigures> {
  const random = createRandom(options.seed + 1)
  const rangeBlocks = Math.min(GET_LOGS_RANGE_BLOCKS, chain.head - chain.firstTrafficBlock + 1)
  const hotPools = buildPools(random, chain, rangeBlocks, HOT_POOL_SIZE)
  // The distinct requests go to files at once and are not kept: 400,000 of them would stay in the heap that
  // the gateway under test shares with the bench (its collections would then be timed as flashgate's).
  const verifyCalls = {} as Record<BenchMethod, RpcCall[]>
  const coldFiles = {} as Record<BenchMethod, string>
  const hotFiles = {} as Record<BenchMethod, string>
  {
    const pools = buildPools(random, chain, rangeBlocks, COLD_POOL_SIZE)
    for (const method of BENCH_METHODS) {
      verifyCalls[method] = pools[method].slice(0, VERIFY_SAMPLE)
      // The verified bodies come first in the pool: skip them, or flashgate would start with cached answers.
      coldFiles[method] = writeBodies(workDir, method, toBodies(pools[method].slice(VERIFY_SAMPLE)))
      hotFiles[method] = writeBodies(workDir, `${method}-hot`, toBodies(hotPools[method]))
    }
  }
  const headlineQuery = () => addressTopicQuery(random, chain, rangeBlocks)
  const headlineCalls = Array.from({ length: options.headlineQueries + HEADLINE_WARMUP }, headlineQuery)
  // Verified on queries of the same shape but not the timed ones, which must reach the database.
  const headlineVerifyCalls = Array.from({ length: VERIFY_SAMPLE }, headlineQuery)

  log(`  verifying ${VERIFY_SAMPLE} answers per method against anvil`)
  const verification: Record<string, VerifyResult> = {}
  for (const method of BENCH_METHODS) verification[method] = await verifySample(gatewayUrl, anvilUrl, verifyCalls[method])
  verification.headline = await verifySample(gatewayUrl, anvilUrl, headlineVerifyCalls)
  for (const [name, outcome] of Object.entries(verification)) {
    log(`  ${name}: ${outcome.compared} compared, ${outcome.nonEmpty} non-empty, ${outcome.differenceCount} different`)
    for (const difference of outcome.differences) log(`    differs: ${JSON.stringify(difference).slice(0, 600)}`)
  }

  const throughput: ServingFigures['throughput'] = {}
  for (const method of BENCH_METHODS) {
    const cold = coldFiles[method]
    const hot = hotFiles[method]
    const job = { mode: 'throughput', durationS: options.loadDurationS, connections: options.connections } as const
    const flashgate = await runLoad({ ...job, url: gatewayUrl, bodiesFile: cold })
    // The figures set against each other are measured in alternation (runInterleaved), each round half as long.
    const paired = { ...job, durationS: pairedRoundSeconds(options.loadDurationS) }
    const { anvil, flashgateUncached } =
      uncachedUrl === null
        ? { anvil: await runLoad({ ...job, url: anvilUrl, bodiesFile: cold }), flashgateUncached: null }
        : await runInterleaved(
            { anvil: { ...paired, url: anvilUrl, bodiesFile: cold }, flashgateUncached: { ...paired, url: uncachedUrl, bodiesFile: cold } },
            PAIRED_ROUNDS,
          )
    // The floor writes the same answers (anvil's, equal to flashgate's: verified above) for the same bodies.
    const hotCalls = hotPools[method]
    const results = await createRpcClient(anvilUrl).batch(hotCalls)
    await floor.answer(
      hotCalls.map((call, index) => ({ ...call, result: results[index] })),
      join(workDir, `${method}-floor-answers.jsonl`),
    )
    const { flashgateCached, floor: floorFigures } = await runInterleaved(
      { flashgateCached: { ...paired, url: cachedUrl, bodiesFile: hot }, floor: { ...paired, url: floor.url, bodiesFile: hot } },
      PAIRED_ROUNDS,
    )
    const asClientSends = async (acceptEncoding: string, methods: ReadonlySet<BenchMethod>) => {
      if (uncachedUrl === null || !methods.has(method)) return null
      const compressed = { ...paired, bodiesFile: cold, acceptEncoding }
      return runInterleaved({ anvil: { ...compressed, url: anvilUrl }, flashgateUncached: { ...compressed, url: uncachedUrl } }, PAIRED_ROUNDS)
    }
    const asFetchSends = await asClientSends(FETCH_ACCEPT_ENCODING, LARGE_ANSWER_METHODS)
    const asEthersSends = await asClientSends(ETHERS_ACCEPT_ENCODING, STORED_ANSWER_METHODS)
    throughput[method] = { flashgate, anvil, flashgateCached, flashgateUncached, floor: floorFigures, asFetchSends, asEthersSends }
    const asClient = (name: string, acceptEncoding: string, figures: { anvil: LoadReport; flashgateUncached: LoadReport } | null) =>
      figures === null
        ? ''
        : `; as ${name} sends (${acceptEncoding}): no cache ${Math.round(figures.flashgateUncached.requestsPerSecond)} vs anvil ${Math.round(figures.anvil.requestsPerSecond)}`
    const uncachedFigure =
      (flashgateUncached === null ? '' : `, no cache ${Math.round(flashgateUncached.requestsPerSecond)}`) +
      asClient('fetch', FETCH_ACCEPT_ENCODING, asFetchSends) +
      asClient('ethers', ETHERS_ACCEPT_ENCODING, asEthersSends)
    log(
      `  ${method}: flashgate ${Math.round(flashgate.requestsPerSecond)} req/s (cached ${Math.round(flashgateCached.requestsPerSecond)}${uncachedFigure}), anvil ${Math.round(anvil.requestsPerSecond)} req/s, floor ${Math.round(floorFigures.requestsPerSecond)} req/s`,
    )
  }

  const headlineFile = writeBodies(workDir, 'headline', toBodies(headlineCalls))
  const sequential = { mode: 'sequential', bodiesFile: headlineFile, durationS: HEADLINE_MAX_S, connections: 1 } as const
  const flashgate = await runLoad({ ...sequential, url: gatewayUrl })
  const anvil = await runLoad({ ...sequential, url: anvilUrl })
  log(`  headline: flashgate p50 ${flashgate.p50Ms.toFixed(2)} ms, anvil p50 ${anvil.p50Ms.toFixed(2)} ms`)
  return {
    verification,
    throughput,
    bodyFiles: { cold: (method: BenchMethod) => coldFiles[method], hot: (method: BenchMethod) => hotFiles[method] },
    headline: { rangeBlocks, queries: flashgate.requests, averageLogs: verification.headline!.items / verification.headline!.compared, flashgate, anvil },
    headlineSample: headlineCalls[0]!,
  }
}
