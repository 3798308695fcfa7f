import { z } from 'zod'
import { hash, requiredBoolean } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

export const eth_getBlockByHash = defineMethod({
  params: z.tuple([hash, requiredBoolean]),
  handler: (resolvers, [blockHash, includeTransactions]) =>
    resolvers.getBlock({
      block: { kind: 'hash', hash: blockHash, requireCanonical: false },
      includeTransactions,
    }),
})
