import { z } from 'zod'
import { isHashText, logFilter } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'
import { pinOf } from '../memo.js'

export const eth_getLogs = defineMethod({
  params: z.tuple([logFilter]),
  // A range given by numbers or `latest` (also when left out), or a block hash: its logs are read from the index
  // alone (a hash the index does not hold is an error, never kept), and stay the same until a reorg, which
  // empties the memo, or until retention moves the index's first block. Another tag is not fixed.
  pins: ([filter]) => {
    if (typeof filter !== 'object' || filter === null) return null
    if ('blockHash' in filter) return isHashText(filter.blockHash) ? ['indexed'] : null
    const { fromBlock, toBlock } = filter as { fromBlock?: unknown; toBlock?: unknown }
    const from = pinOf(fromBlock ?? 'latest')
    const to = pinOf(toBlock ?? 'latest')
    return from === null || to === null ? null : [from, to]
  },
  handler: (resolvers, [filter], { limits }) => resolvers.getLogs({ filter, limits }),
})
