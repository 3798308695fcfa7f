import { z } from 'zod'
import { filterId } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

export const eth_getFilterChanges = defineMethod({
  params: z.tuple([filterId]),
  handler: (resolvers, [id], { limits }) => resolvers.getFilterChanges({ id, limits }),
})
