import { z } from 'zod'
import { hash } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'
import { transactionIndex } from './eth_getTransactionByBlockHashAndIndex.js'

export const eth_getUncleByBlockHashAndIndex = defineMethod({
  params: z.tuple([hash, transactionIndex]),
  handler: (resolvers, [blockHash, index]) => resolvers.getUncleByBlockAndIndex({ block: { kind: 'hash', hash: blockHash, requireCanonical: false }, index }),
})
