import { z } from 'zod'
import { CLIENT_VERSION } from '../../version.js'
import { defineMethod } from '../define-method.js'

export const web3_clientVersion = defineMethod({
  params: z.tuple([]),
  handler: async () => CLIENT_VERSION,
})
