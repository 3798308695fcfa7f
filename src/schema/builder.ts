import SchemaBuilder from '@pothos/core'
import { GraphQLError } from 'graphql'
import ComplexityPlugin from '@pothos/plugin-complexity'
import ZodPlugin from '@pothos/plugin-zod'
import type { Address, Hash, Hex } from 'viem'
import { invalidArgument } from './argument-error.js'
import type { ChainEvents } from '../jsonrpc/subscriptions.js'
import type { LogLimits, Resolvers } from '../resolvers/index.js'
import type { Loaders } from './loaders.js'

/**
 * Limits that keep one request from pinning the database. Complexity counts 1 per field, times the page
 * size or block count of list fields (10 for other lists): 100 logs with their blocks and transactions
 * cost about 1,500; 10,000 logs with a few fields each fit; every block's transactions' logs do not.
 */
export const MAX_QUERY_DEPTH = 10
export const MAX_QUERY_BREADTH = 300
export const MAX_QUERY_COMPLEXITY = 100_000

/** Everything a resolver sees, made fresh for each request (the loaders cache only within it). */
export type GraphqlContext = {
  resolvers: Resolvers
  /** The `eth_getLogs` limits GraphQL is served under (the public endpoint's): they bound log and history pages. */
  limits: LogLimits
  loaders: Loaders
  /** The event stream the subscriptions read (resolvers/events.ts); `null` where none is wired (unit tests). */
  chainEvents: ChainEvents | null
}

export const builder = new SchemaBuilder<{
  Context: GraphqlContext
  DefaultFieldNullability: false
  Scalars: {
    Address: { Input: Address; Output: string }
    Hash: { Input: Hash; Output: string }
    HexData: { Input: Hex; Output: string }
    BigInt: { Input: bigint; Output: bigint | number | string }
  }
}>({
  plugins: [ComplexityPlugin, ZodPlugin],
  defaultFieldNullability: false,
  zod: {
    // The same wording as JSON-RPC's `invalid argument` errors, raised as a typed error (BAD_USER_INPUT).
    validationError: (error) => invalidArgument(error),
  },
  complexity: {
    defaultComplexity: 1,
    defaultListMultiplier: 10,
    limit: { depth: MAX_QUERY_DEPTH, breadth: MAX_QUERY_BREADTH, complexity: MAX_QUERY_COMPLEXITY },
    complexityError: (kind, result) => {
      const measure = kind.toLowerCase() as 'complexity' | 'depth' | 'breadth'
      const limit = result[`max${kind}`]
      return new GraphQLError(`query ${measure} ${result[measure]} exceeds the limit of ${limit}`, {
        extensions: { code: 'QUERY_TOO_COMPLEX', [measure]: result[measure], limit },
      })
    },
  },
})
