import { z } from 'zod'
import { blockArgument } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'
import { pinAt } from '../memo.js'

export const eth_getBlockReceipts = defineMethod({
  params: z.tuple([blockArgument]),
  pins: pinAt(0),
  handler: (resolvers, [block]) => resolvers.getBlockReceipts({ block }),
})
