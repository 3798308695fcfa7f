import type { z } from 'zod'
import type { LogLimits, Resolvers } from '../resolvers/index.js'
import type { Pins } from './memo.js'

/**
 * What a method call carries besides its params: the limits of the endpoint it came through, and who asks (an
 * API key's or an address's name, as the rate limiter counts them; `null` when the transport names none).
 */
export type CallContext = { limits: LogLimits; client: string | null }

/** One JSON-RPC method: a zod schema for its positional params and a handler that calls a resolver. */
export type MethodDefinition<schema extends z.ZodType = z.ZodType> = {
  params: schema
  handler(resolvers: Resolvers, params: z.output<schema>, call: CallContext): Promise<unknown>
  /** The blocks that fix its answer, for the call memo (jsonrpc/memo.ts); absent for a method never memoised. */
  pins?: Pins
}

export function defineMethod<schema extends z.ZodType>(definition: MethodDefinition<schema>): MethodDefinition<schema> {
  return definition
}
