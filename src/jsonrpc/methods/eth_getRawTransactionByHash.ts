import { z } from 'zod'
import { hash } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

/** A pre-confirmed transaction's signed bytes from its flashblock; any other transaction's, the node's (resolvers/calls.ts). */
export const eth_getRawTransactionByHash = defineMethod({
  params: z.tuple([hash]),
  handler: (resolvers, [transactionHash]) => resolvers.calls.rawTransaction(transactionHash),
})
