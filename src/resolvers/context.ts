import type { Db } from '../db/index.js'
import type { AnswerCache } from './cache.js'
import type { ChainState } from './chain.js'
import type { History } from './history.js'
import type { PendingView } from './pending.js'

/** What the block, receipt and log resolvers read through: the index, its head, the answer cache, the pre-confirmed blocks, and history below the index. */
export type ReadContext = {
  db: Db
  chain: ChainState
  cache: AnswerCache
  pendingView: PendingView
  history: History
}
