import { z } from 'zod'
import { defineMethod } from '../define-method.js'

export const eth_newBlockFilter = defineMethod({
  params: z.tuple([]),
  handler: (resolvers, _params, { client }) => resolvers.newBlockFilter(client),
})
