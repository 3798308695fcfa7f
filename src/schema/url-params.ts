import { createGraphQLError, type Plugin } from 'graphql-yoga'

/**
 * graphql-yoga reads the `variables` and `extensions` parameters of a GET query string (or of a
 * form-encoded POST) with a bare `JSON.parse`: malformed JSON there escapes as a `SyntaxError` and is answered
 * as a masked 500. This answers it as the 400 that yoga gives a malformed JSON body. It wraps the parser
 * yoga's own plugins chose, so it must be a user plugin (those run after yoga's).
 * https://graphql.github.io/graphql-over-http/draft/#sec-GET
 */
export function urlParamsJsonPlugin(): Plugin {
  return {
    onRequestParse({ requestParser, setRequestParser }) {
      // No parser: yoga answers 415 for the content type, nothing to wrap.
      if (requestParser === undefined) return
      setRequestParser(async (request) => {
        try {
          return await requestParser(request)
        } catch (error) {
          if (!(error instanceof SyntaxError)) throw error
          throw createGraphQLError('the variables or extensions parameter is not valid JSON', {
            extensions: { http: { status: 400 }, code: 'BAD_REQUEST' },
          })
        }
      })
    },
  }
}
