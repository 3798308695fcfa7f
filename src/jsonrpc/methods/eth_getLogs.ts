import { z } from 'zod'
import { logFilter } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'
import { pinOf } from '../memo.js'

export const eth_getLogs = defineMethod({
  params: z.tuple([logFilter]),
  // A range given by numbers or `latest` (also when left out); a block hash (which may name a pending block) or another tag is not fixed.
  pins: ([filter]) => {
    if (typeof filter !== 'object' || filter === null || 'blockHash' in filter) return null
    const { fromBlock, toBlock } = filter as { fromBlock?: unknown; toBlock?: unknown }
    const from = pinOf(fromBlock ?? 'latest')
    const to = pinOf(toBlock ?? 'latest')
    return from === null || to === null ? null : [from, to]
  },
  handler: (resolvers, [filter], { limits }) => resolvers.getLogs({ filter, limits }),
})
