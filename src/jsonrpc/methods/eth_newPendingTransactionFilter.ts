import { z } from 'zod'
import { defineMethod } from '../define-method.js'

export const eth_newPendingTransactionFilter = defineMethod({
  // geth's optional `fullTx`: flashgate's filters answer hashes, as geth's do without it.
  params: z.tuple([z.literal(false, { error: 'fullTx is not supported: pending transaction filters answer hashes' }).nullish()]),
  handler: (resolvers, _params, { client }) => resolvers.newPendingTransactionFilter(client),
})
