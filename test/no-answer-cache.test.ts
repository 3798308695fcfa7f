import { expect, test } from 'vitest'
import { compareWithReference } from './fixtures/compare.js'
import { useFollowedChain } from './fixtures/followed-chain.js'
import { generateQueries, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'

/**
 * `--answer-cache-mb 0`: every answer is computed from the database on each request, through the paths
 * the cache otherwise hides (account reads by one index probe instead of a cached history, block receipts
 * inflated per request). They must answer exactly as anvil does, and twice in a row the same.
 */
const SEED = 80_210
const BLOCKS = 30
const GENERATED_QUERIES = 400

const followed = useFollowedChain({ seed: SEED, blocks: BLOCKS, gateway: { answerCacheMb: 0 } })

test('without an answer cache, every block, transaction, receipt and generated query answers as anvil, twice', async () => {
  const { anvil, gateway, facts } = followed()
  const queries = [...wholeChainQueries(facts), ...generateQueries(createRandom(SEED), facts, GENERATED_QUERIES)]
  for (const pass of [1, 2]) {
    const outcome = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
    for (const method of ['eth_getLogs', 'eth_getBlockReceipts', 'eth_getTransactionCount', 'eth_getBalance'])
      expect(outcome.nonEmpty[method] ?? 0, `pass ${pass}: ${method}`).toBeGreaterThan(20)
  }
})
