import { hexToBigInt } from 'viem'
import { z } from 'zod'
import { defineMethod } from '../define-method.js'

/** The network id as a decimal string; on every chain flashgate serves it equals the chain id. */
export const net_version = defineMethod({
  params: z.tuple([]),
  // Fixed once the index has its first block (an empty index answers an error, which is not kept).
  pins: () => [],
  handler: async (resolvers) => hexToBigInt(await resolvers.chainId()).toString(),
})
