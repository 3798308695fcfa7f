import { hexToBigInt } from 'viem'
import { z } from 'zod'
import { defineMethod } from '../define-method.js'

/** The network id as a decimal string; on every chain flashgate serves it equals the chain id. */
export const net_version = defineMethod({
  params: z.tuple([]),
  handler: async (resolvers) => hexToBigInt(await resolvers.chainId()).toString(),
})
