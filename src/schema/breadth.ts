import { type DocumentNode, GraphQLError, Kind, type SelectionSetNode } from 'graphql'
import type { Plugin } from 'graphql-yoga'
import { MAX_QUERY_BREADTH } from './builder.js'

/**
 * The fields an operation selects, each occurrence counted and fragments expanded where they are spread: the
 * complexity plugin's "breadth" (@pothos/plugin-complexity), worked out from the document alone. A fragment
 * spread inside itself (a cycle, refused by validation) counts nothing more.
 */
export function documentBreadth(document: DocumentNode): number {
  const fragments = new Map<string, SelectionSetNode>()
  for (const definition of document.definitions) if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition.selectionSet)
  // Each selection set is counted once, however many times it is spread: a fan-out of fragments costs its size.
  const counted = new Map<SelectionSetNode, number>()
  const active = new Set<SelectionSetNode>()
  function count(set: SelectionSetNode): number {
    const known = counted.get(set)
    if (known !== undefined) return known
    if (active.has(set)) return 0
    active.add(set)
    let fields = 0
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) fields += 1 + (selection.selectionSet === undefined ? 0 : count(selection.selectionSet))
      else if (selection.kind === Kind.INLINE_FRAGMENT) fields += count(selection.selectionSet)
      else {
        const fragment = fragments.get(selection.name.value)
        if (fragment !== undefined) fields += count(fragment)
      }
    }
    active.delete(set)
    counted.set(set, fields)
    return fields
  }
  let widest = 0
  for (const definition of document.definitions) if (definition.kind === Kind.OPERATION_DEFINITION) widest = Math.max(widest, count(definition.selectionSet))
  return widest
}

/**
 * Refuses a document selecting more fields than `limit` before graphql-js validates it, with the error the
 * complexity plugin gives (`QUERY_TOO_COMPLEX`, naming the breadth): from about 1,000 fields of one name in a
 * selection set, graphql-js's check that they can be merged runs out of its budget and answers a bare
 * "Validation aborted." instead. Should a document still exhaust that budget (fields merged through
 * fragments), the same code says why.
 */
export function maxBreadthPlugin({ limit = MAX_QUERY_BREADTH }: { limit?: number } = {}): Plugin {
  return {
    onValidate({ params, setResult }) {
      const breadth = documentBreadth(params.documentAST)
      if (breadth > limit) {
        setResult([new GraphQLError(`query breadth ${breadth} exceeds the limit of ${limit}`, { extensions: { code: 'QUERY_TOO_COMPLEX', breadth, limit } })])
        return
      }
      return ({ result, setResult: replace }) => {
        if (!result.some((error) => error.message === 'Validation aborted.')) return
        replace(
          result.map((error) =>
            error.message === 'Validation aborted.'
              ? new GraphQLError(`the document selects too many fields of the same name to validate: at most ${limit} fields in all`, {
                  extensions: { code: 'QUERY_TOO_COMPLEX', limit },
                })
              : error,
          ),
        )
      }
    },
  }
}
