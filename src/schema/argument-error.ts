import type { z } from 'zod'
import { unionIssue } from '../codecs/index.js'
import { InvalidParamsError } from '../errors.js'

/** GraphQL's names of the fields the `eth_getLogs` filter codec names otherwise. */
const GRAPHQL_NAMES: Readonly<Record<string, string>> = { address: 'addresses' }

/**
 * `BAD_USER_INPUT` naming the argument at fault and what is wrong with it, in the words JSON-RPC uses (a
 * union's problem is its closest alternative's, not zod's "Invalid input"); `at` is where the value sits.
 */
export function invalidArgument(error: z.ZodError, at: readonly PropertyKey[] = []): InvalidParamsError {
  const first = error.issues[0]
  if (first === undefined) return new InvalidParamsError(`invalid argument ${at.join('.')}: invalid value`)
  const issue = unionIssue(first)
  const path = [...at, ...issue.path].map((part) => (typeof part === 'string' ? (GRAPHQL_NAMES[part] ?? part) : String(part)))
  // A check across several arguments (at most one of them, say) names none.
  return new InvalidParamsError(path.length > 0 ? `invalid argument ${path.join('.')}: ${issue.message}` : `invalid arguments: ${issue.message}`)
}
