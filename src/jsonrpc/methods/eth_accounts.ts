import { z } from 'zod'
import { defineMethod } from '../define-method.js'

/** flashgate holds no keys, and a node's own accounts cannot sign through it: `[]`, as a node without keys answers. */
export const eth_accounts = defineMethod({
  params: z.tuple([]),
  handler: async () => [],
})
