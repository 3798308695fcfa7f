import { z } from 'zod'
import { hash } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

export const eth_getBlockByHash = defineMethod({
  params: z.tuple([hash, z.boolean().optional()]),
  handler: (resolvers, [blockHash, includeTransactions]) =>
    resolvers.getBlock({
      block: { kind: 'hash', hash: blockHash, requireCanonical: false },
      includeTransactions: includeTransactions ?? false,
    }),
})
