import { z } from 'zod'
import { hash } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

export const eth_getUncleCountByBlockHash = defineMethod({
  params: z.tuple([hash]),
  handler: (resolvers, [blockHash]) => resolvers.getUncleCount({ block: { kind: 'hash', hash: blockHash, requireCanonical: false } }),
})
