import { z } from 'zod'
import { address, optionalBlockArgument } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'
import { pinAt } from '../memo.js'

export const eth_getTransactionCount = defineMethod({
  params: z.tuple([address, optionalBlockArgument]),
  pins: pinAt(1),
  handler: (resolvers, [account, block]) => resolvers.getTransactionCount({ address: account, block }),
})
