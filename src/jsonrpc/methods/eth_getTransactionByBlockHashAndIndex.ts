import { z } from 'zod'
import { hash, quantity } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

/** A transaction's index in its block: a hex quantity of at most 64 bits, as geth and reth take it. */
export const transactionIndex = quantity.refine((value) => value < 2n ** 64n, { error: 'hex number > 64 bits' })

export const eth_getTransactionByBlockHashAndIndex = defineMethod({
  params: z.tuple([hash, transactionIndex]),
  handler: (resolvers, [blockHash, index]) =>
    resolvers.getTransactionByBlockAndIndex({ block: { kind: 'hash', hash: blockHash, requireCanonical: false }, index }),
})
