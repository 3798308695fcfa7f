import { z } from 'zod'
import { defineMethod } from '../define-method.js'

/** The node's sync progress, or the index's while it trails the node's head (resolvers/calls.ts). */
export const eth_syncing = defineMethod({
  params: z.tuple([]),
  handler: (resolvers) => resolvers.calls.syncing(),
})
