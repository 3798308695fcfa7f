import type { Hash } from 'viem'
import { describe, expect, test } from 'vitest'
import { useSeededChain } from '../../test/fixtures/seeded-db.js'
import { createAnswerCache } from './cache.js'
import { createChainState } from './chain.js'
import { createFilterStore } from './filter-store.js'
import { createFilterResolvers } from './filters.js'
import { DEFAULT_LOG_LIMITS } from './index.js'
import { createPendingView } from './pending.js'

const seeded = useSeededChain()
/** Small bounds, so that the fixed chain's 20 blocks take several polls. */
const BLOCKS_PER_POLL = 3
const TRANSACTIONS_PER_POLL = 4

/** Filter resolvers over the seeded index, with a store the test can also write to (to place a cursor far behind). */
function filtersOverTheIndex() {
  const { db, resolvers } = seeded()
  const chain = createChainState({ db, onReorg: () => {} })
  const store = createFilterStore({})
  const filters = createFilterResolvers({
    db,
    chain,
    cache: createAnswerCache(),
    pendingView: createPendingView({ chain, pending: null }),
    getLogs: resolvers.getLogs,
    store,
    maxBlocksPerPoll: BLOCKS_PER_POLL,
    maxTransactionsPerPoll: TRANSACTIONS_PER_POLL,
  })
  return { filters, store }
}

/** Polls until a poll brings nothing: every poll's changes. */
async function drain(poll: () => Promise<unknown[]>): Promise<unknown[][]> {
  const polls: unknown[][] = []
  for (let round = 0; round < 100; round++) {
    const changes = await poll()
    if (changes.length === 0) return polls
    polls.push(changes)
  }
  throw new Error('the filter never ran out of changes')
}

describe('a filter far behind the head catches up over several polls, each change once and in chain order', () => {
  test('block filters: at most the blocks a poll may read', async () => {
    const { filters, store } = filtersOverTheIndex()
    const { chain } = seeded()
    const indexed = chain.blocks.slice(0, chain.indexedHead + 1)
    await store.install('0xbehind', { kind: 'blocks', criteria: null, cursor: { number: 0, index: 0, hashes: [indexed[0]!.hash] } }, null)
    const polls = await drain(() => filters.getFilterChanges({ id: '0xbehind', limits: DEFAULT_LOG_LIMITS }))
    for (const poll of polls) expect(poll.length).toBeLessThanOrEqual(BLOCKS_PER_POLL)
    expect(polls.length).toBe(Math.ceil((indexed.length - 1) / BLOCKS_PER_POLL))
    expect(polls.flat()).toEqual(indexed.slice(1).map((block) => block.hash))
  })

  test('pending-transaction filters: at most the hashes a poll may answer, going on after the last one', async () => {
    const { filters, store } = filtersOverTheIndex()
    const { chain } = seeded()
    const sealed = chain.blocks
      .slice(1, chain.indexedHead + 1)
      .flatMap((block) => block.transactions.map((transaction) => (transaction as { hash: Hash }).hash))
    expect(sealed.length).toBeGreaterThan(2 * TRANSACTIONS_PER_POLL)
    await store.install('0xbehind', { kind: 'pendingTransactions', criteria: null, cursor: { number: 1, index: 0, hashes: [] } }, null)
    const polls = await drain(() => filters.getFilterChanges({ id: '0xbehind', limits: DEFAULT_LOG_LIMITS }))
    for (const poll of polls) expect(poll.length).toBeLessThanOrEqual(TRANSACTIONS_PER_POLL)
    expect(polls.flat()).toEqual(sealed)
  })
})
