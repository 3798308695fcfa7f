import { z } from 'zod'
import { logFilter } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

export const eth_newFilter = defineMethod({
  params: z.tuple([logFilter]),
  handler: (resolvers, [filter], { client }) => resolvers.newFilter(filter, client),
})
