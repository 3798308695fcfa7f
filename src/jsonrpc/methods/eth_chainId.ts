import { z } from 'zod'
import { defineMethod } from '../define-method.js'

export const eth_chainId = defineMethod({
  params: z.tuple([]),
  // Fixed once the index has its first block (an empty index answers an error, which is not kept).
  pins: () => [],
  handler: (resolvers) => resolvers.chainId(),
})
