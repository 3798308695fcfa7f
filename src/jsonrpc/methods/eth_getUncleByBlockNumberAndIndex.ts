import { z } from 'zod'
import { blockNumberOrTagSelector } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'
import { pinAt } from '../memo.js'
import { transactionIndex } from './eth_getTransactionByBlockHashAndIndex.js'

/** Answered from the index (it was forwarded): `latest` is the index's head here as everywhere else. */
export const eth_getUncleByBlockNumberAndIndex = defineMethod({
  params: z.tuple([blockNumberOrTagSelector, transactionIndex]),
  pins: pinAt(0),
  handler: (resolvers, [block, index]) => resolvers.getUncleByBlockAndIndex({ block, index }),
})
