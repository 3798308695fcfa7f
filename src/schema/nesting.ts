import { GraphQLError } from 'graphql'
import type { Plugin } from 'graphql-yoga'

/**
 * Brackets (`{`, `[`, `(`) a document may have open at once. graphql-js parses recursively: a couple of
 * thousand nested selection sets or list values, well inside the token limit, overflow the stack (a masked
 * 500). No useful document comes near this; selections are refused past depth 10 anyway.
 */
export const MAX_DOCUMENT_NESTING = 64

const QUOTE = 0x22
const BACKSLASH = 0x5c
const NEWLINE = 0x0a
const CARRIAGE_RETURN = 0x0d
const HASH = 0x23
const OPENING = new Set([0x7b, 0x5b, 0x28]) // { [ (
const CLOSING = new Set([0x7d, 0x5d, 0x29]) // } ] )

/**
 * The deepest bracket nesting of a GraphQL document, brackets inside strings, block strings and comments
 * not counted. A lexical scan, so that it runs before (and instead of) the recursive parser.
 * https://spec.graphql.org/October2021/#sec-Language.Source-Text
 */
export function documentNesting(source: string): number {
  let depth = 0
  let deepest = 0
  for (let index = 0; index < source.length; index++) {
    const code = source.charCodeAt(index)
    if (code === QUOTE) {
      if (source.startsWith('"""', index)) {
        // A block string ends at the next `"""` that is not escaped as `\"""`.
        let end = source.indexOf('"""', index + 3)
        while (end !== -1 && source.charCodeAt(end - 1) === BACKSLASH) end = source.indexOf('"""', end + 3)
        index = end === -1 ? source.length : end + 2
      } else {
        index++
        while (index < source.length) {
          const inner = source.charCodeAt(index)
          if (inner === QUOTE || inner === NEWLINE || inner === CARRIAGE_RETURN) break
          index += inner === BACKSLASH ? 2 : 1
        }
      }
    } else if (code === HASH) {
      while (index < source.length && source.charCodeAt(index) !== NEWLINE && source.charCodeAt(index) !== CARRIAGE_RETURN) index++
    } else if (OPENING.has(code)) {
      depth++
      if (depth > deepest) deepest = depth
    } else if (CLOSING.has(code)) {
      depth--
    }
  }
  return deepest
}

/**
 * Refuses documents nested deeper than `limit` as a syntax error, before graphql-js parses them. It wraps
 * the parser in place, so it goes after plugins that replace the parser (graphql-armor's max-tokens); its
 * error is then a parse error like any other (`GRAPHQL_PARSE_FAILED`, HTTP 400 where the spec says so).
 */
export function maxNestingPlugin({ limit = MAX_DOCUMENT_NESTING }: { limit?: number } = {}): Plugin {
  return {
    onParse({ parseFn, setParseFn }) {
      setParseFn((source, options) => {
        if (documentNesting(typeof source === 'string' ? source : source.body) > limit)
          throw new GraphQLError(`Syntax Error: brackets nested deeper than ${limit} levels.`)
        return parseFn(source, options)
      })
    },
  }
}
