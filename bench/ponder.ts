import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import type { Hex } from 'viem'
import { startDevnet } from '../src/devnet/devnet.js'
import { startTestGateway } from '../test/fixtures/gateway.js'
import { errorCalls, type PonderRun, preparePonderChain, runPonderPair } from '../test/fixtures/ponder.js'
import { anvilCall } from '../test/fixtures/sync.js'
import { createBenchDatabase } from './databases.js'
import { DEFAULT_ADMIN_DATABASE_URL } from './options.js'

/**
 * `npm run bench -- --ponder`: how fast a real Ponder 1.0 app syncs through flashgate against the devnet
 * directly (the app and runs of test/ponder.test.ts, which checks what they index). Each round runs both
 * settings (with and without `includeTransactionReceipts`) through flashgate and directly, the order
 * alternating from round to round so that neither side always runs warm. Reported per setting: the medians
 * of Ponder's historical sync (its log, sync start to /ready), of the live wave's latency (its block to its
 * rows) and of the wall time from spawn to /ready, each as a ratio of flashgate's to the direct run's.
 * Target (issue 13's): within 1.5× of directly plus a 1 s floor, since the live wave's latency is a few
 * hundred milliseconds either way and flashgate must ingest the block before Ponder can see it.
 */
const USAGE = 'npm run bench -- --ponder [--rounds 3] [--pglite] [--admin-database-url URL] [--results PATH]'
const RESULTS_PATH = fileURLToPath(new URL('./results/ponder.json', import.meta.url))
const TARGET_RATIO = 1.5
const TARGET_FLOOR_MS = 1_000

type Measure = 'syncMs' | 'liveMs' | 'readyMs'
const MEASURES: Measure[] = ['syncMs', 'liveMs', 'readyMs']

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

export async function runPonderBench(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: 'string', default: '3' },
      pglite: { type: 'boolean', default: false },
      'admin-database-url': { type: 'string', default: DEFAULT_ADMIN_DATABASE_URL },
      results: { type: 'string', default: RESULTS_PATH },
    },
  })
  const rounds = Number(values.rounds)
  if (!Number.isInteger(rounds) || rounds < 1) {
    console.error(USAGE)
    return 2
  }
  const startedAt = new Date().toISOString()
  const devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 100 })
  const database = await createBenchDatabase({ pglite: values.pglite, adminDatabaseUrl: values['admin-database-url'] })
  try {
    const chain = await preparePonderChain(devnet.rpcUrl)
    const head = Number(await anvilCall<Hex>(devnet.rpcUrl, 'eth_blockNumber'))
    const gateway = await startTestGateway({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
    try {
      await gateway.ingester.waitForBlock(head, 60_000)
      const samples: { round: number; includeReceipts: boolean; through: PonderRun; direct: PonderRun }[] = []
      for (let round = 0; round < rounds; round++) {
        const throughFirst = round % 2 === 0
        const first = await runPonderPair(chain, throughFirst ? gateway.dedicatedUrl : devnet.rpcUrl)
        const second = await runPonderPair(chain, throughFirst ? devnet.rpcUrl : gateway.dedicatedUrl)
        const [through, direct] = throughFirst ? [first, second] : [second, first]
        for (const includeReceipts of [true, false]) {
          const sample = { round, includeReceipts, through: through.get(includeReceipts)!, direct: direct.get(includeReceipts)! }
          const refused = [...errorCalls(sample.through), ...errorCalls(sample.direct)]
          if (refused.length > 0) throw new Error(`round ${round}: requests refused: ${refused.join('; ')}`)
          samples.push(sample)
          console.log(
            `round ${round + 1}/${rounds} (${throughFirst ? 'flashgate' : 'direct'} first), receipts ${includeReceipts}: ` +
              MEASURES.map((measure) => `${measure} ${sample.through[measure]} vs ${sample.direct[measure]}`).join(', '),
          )
        }
      }
      const figures = [true, false].map((includeReceipts) => {
        const mine = samples.filter((sample) => sample.includeReceipts === includeReceipts)
        return {
          includeReceipts,
          ...Object.fromEntries(
            MEASURES.map((measure) => {
              const through = median(mine.map((sample) => sample.through[measure]))
              const direct = median(mine.map((sample) => sample.direct[measure]))
              const ratio = median(mine.map((sample) => sample.through[measure] / Math.max(1, sample.direct[measure])))
              return [measure, { through, direct, ratio: Math.round(ratio * 100) / 100 }]
            }),
          ),
        }
      })
      for (const figure of figures) {
        const line = MEASURES.map((measure) => {
          const { through, direct, ratio } = (figure as unknown as Record<Measure, { through: number; direct: number; ratio: number }>)[measure]
          const within = through <= direct * TARGET_RATIO + TARGET_FLOOR_MS
          return `${measure} ${through} vs ${direct} ms (×${ratio}, ${through - direct >= 0 ? '+' : ''}${through - direct} ms${within ? '' : `, over the ×${TARGET_RATIO} + ${TARGET_FLOOR_MS} ms target`})`
        }).join('; ')
        console.log(`median of ${rounds} rounds, receipts ${figure.includeReceipts}: ${line}`)
      }
      const databaseKind = values.pglite ? 'pglite' : 'postgres'
      writeFileSync(
        values.results,
        `${JSON.stringify(
          {
            startedAt,
            database: databaseKind,
            rounds,
            targetRatio: TARGET_RATIO,
            targetFloorMs: TARGET_FLOOR_MS,
            figures,
            samples: samples.map(({ round, includeReceipts, through, direct }) => ({
              round,
              includeReceipts,
              through: Object.fromEntries(MEASURES.map((measure) => [measure, through[measure]])),
              direct: Object.fromEntries(MEASURES.map((measure) => [measure, direct[measure]])),
            })),
          },
          null,
          1,
        )}\n`,
      )
      console.log(`results written to ${values.results}`)
      return 0
    } finally {
      await gateway.stop()
    }
  } finally {
    await devnet.stop()
    await database.drop()
  }
}
