import { lexicographicSortSchema, printSchema } from 'graphql'
import { builder } from './builder.js'
// Each type registers itself with the builder.
import './scalars.js'
import './account.js'
import './block.js'
import './builder-code.js'
import './log.js'
import './query.js'
import './receipt.js'
import './subscription.js'
import './transaction.js'

export const schema = builder.toSchema()

/** The SDL committed as `schema.graphql` at the repository root (a test keeps the two equal). */
export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`
}
