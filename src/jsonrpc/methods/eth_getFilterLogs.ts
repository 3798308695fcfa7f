import { z } from 'zod'
import { filterId } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

export const eth_getFilterLogs = defineMethod({
  params: z.tuple([filterId]),
  handler: (resolvers, [id], { limits }) => resolvers.getFilterLogs({ id, limits }),
})
