import { z } from 'zod'
import { logFilter } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'
import { pinnedNumber } from '../memo.js'

export const eth_getLogs = defineMethod({
  params: z.tuple([logFilter]),
  // A range given by two numbers; a block hash (which may name a pending block) or a tag is not fixed.
  pins: ([filter]) => {
    if (typeof filter !== 'object' || filter === null || 'blockHash' in filter) return null
    const { fromBlock, toBlock } = filter as { fromBlock?: unknown; toBlock?: unknown }
    const from = pinnedNumber(fromBlock)
    const to = pinnedNumber(toBlock)
    return from === null || to === null ? null : [from, to]
  },
  handler: (resolvers, [filter]) => resolvers.getLogs({ filter }),
})
