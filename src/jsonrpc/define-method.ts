import type { z } from 'zod'
import type { Resolvers } from '../resolvers/index.js'

/** One JSON-RPC method: a zod schema for its positional params and a handler that calls a resolver. */
export type MethodDefinition<schema extends z.ZodType = z.ZodType> = {
  params: schema
  handler(resolvers: Resolvers, params: z.output<schema>): Promise<unknown>
}

export function defineMethod<schema extends z.ZodType>(definition: MethodDefinition<schema>): MethodDefinition<schema> {
  return definition
}
