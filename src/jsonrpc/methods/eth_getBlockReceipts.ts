import { z } from 'zod'
import { blockArgument } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

export const eth_getBlockReceipts = defineMethod({
  params: z.tuple([blockArgument]),
  handler: (resolvers, [block]) => resolvers.getBlockReceiptsJson({ block }),
})
