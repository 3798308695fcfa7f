import { getIntrospectionQuery } from 'graphql'
import { createYoga } from 'graphql-yoga'
import { describe, expect, test } from 'vitest'
import { documentNesting, MAX_DOCUMENT_NESTING, maxNestingPlugin } from './nesting.js'
import { schema } from './schema.js'
import { DEFAULT_GRAPHIQL_QUERY } from './server.js'

describe('documentNesting', () => {
  test('counts the deepest open brackets of any kind', () => {
    expect(documentNesting('{ blockNumber }')).toBe(1)
    expect(documentNesting('{ logs(filter: { topics: [[null]] }) { nodes { address } } }')).toBe(5)
    expect(documentNesting('{ a } { b { c } }')).toBe(2)
  })

  test('leaves out brackets in strings, escaped quotes, block strings and comments', () => {
    expect(documentNesting('{ builderCode(code: "{{{[[[(((\\"{{{") { code } }')).toBe(2)
    expect(documentNesting('{ a(b: """ {{{ \\""" [[[ """) }')).toBe(2)
    expect(documentNesting('# {{{{{{\n{ a }')).toBe(1)
  })

  test('the GraphiQL default query and the introspection query are far below the limit', () => {
    expect(documentNesting(DEFAULT_GRAPHIQL_QUERY)).toBeLessThan(MAX_DOCUMENT_NESTING / 4)
    expect(documentNesting(getIntrospectionQuery())).toBeLessThan(MAX_DOCUMENT_NESTING / 4)
  })
})

// Found by the fuzz suite (test/fuzz.test.ts): 2,400 nested selections or 4,900 nested list brackets fit the
// token limit and overflowed graphql-js's recursive parser, answered as a masked 500.
describe('a deeply nested document is a syntax error, not an internal error', () => {
  const yoga = createYoga({ schema, plugins: [maxNestingPlugin()], logging: false })
  const documents = {
    selections: `{${'a{'.repeat(2_400)}b${'}'.repeat(2_401)}`,
    lists: `{ block(number: ${'['.repeat(4_900)}1${']'.repeat(4_900)}) { number } }`,
    objects: `{ logs(filter: ${'{fromBlock: '.repeat(1_600)}1${'}'.repeat(1_600)}) { nodes { address } } }`,
  }
  test.each(Object.entries(documents))('%s', async (_, query) => {
    const response = await yoga.fetch('http://flashgate.test/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify({ query }),
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      errors: [{ message: `Syntax Error: brackets nested deeper than ${MAX_DOCUMENT_NESTING} levels.`, extensions: { code: 'GRAPHQL_PARSE_FAILED' } }],
    })
  })
})
