import { z } from 'zod'
import { blockNumberOrTagSelector, requiredBoolean } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'
import { pinAt } from '../memo.js'

export const eth_getBlockByNumber = defineMethod({
  params: z.tuple([blockNumberOrTagSelector, requiredBoolean]),
  pins: pinAt(0),
  handler: (resolvers, [block, includeTransactions]) => resolvers.getBlock({ block, includeTransactions }),
})
