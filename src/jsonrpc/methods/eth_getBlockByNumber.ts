import { z } from 'zod'
import { blockNumberOrTagSelector } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

export const eth_getBlockByNumber = defineMethod({
  params: z.tuple([blockNumberOrTagSelector, z.boolean().optional()]),
  handler: (resolvers, [block, includeTransactions]) =>
    resolvers.getBlock({ block, includeTransactions: includeTransactions ?? false }),
})
