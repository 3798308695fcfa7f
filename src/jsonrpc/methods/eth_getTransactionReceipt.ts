import { z } from 'zod'
import { hash } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

export const eth_getTransactionReceipt = defineMethod({
  params: z.tuple([hash]),
  handler: (resolvers, [transactionHash]) => resolvers.getTransactionReceipt({ hash: transactionHash }),
})
