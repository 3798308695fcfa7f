import { createYoga } from 'graphql-yoga'
import { expect, test } from 'vitest'
import { schema } from './schema.js'
import { urlParamsJsonPlugin } from './url-params.js'

// Found by the fuzz suite (test/fuzz.test.ts): `GET /graphql?query=…&variables=%7B` was a masked 500.
const yoga = createYoga({ schema, plugins: [urlParamsJsonPlugin()], logging: false })
const BAD_JSON_ANSWER = { errors: [{ message: 'the variables or extensions parameter is not valid JSON', extensions: { code: 'BAD_REQUEST' } }] }

test.each([
  ['GET variables', 'GET', '?query=%7BchainId%7D&variables=%7B'],
  ['GET extensions', 'GET', '?query=%7BchainId%7D&extensions=nope'],
  ['form-encoded POST variables', 'POST', ''],
])('malformed JSON in %s is a 400 request error', async (_, method, search) => {
  const response = await yoga.fetch(`http://flashgate.test/graphql${search}`, {
    method,
    headers: { accept: 'application/graphql-response+json', ...(method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    body: method === 'POST' ? 'query=%7BchainId%7D&variables=%5B%5B' : undefined,
  })
  expect(response.status).toBe(400)
  expect(await response.json()).toEqual(BAD_JSON_ANSWER)
})

test('a content type without a parser is still 415', async () => {
  const response = await yoga.fetch('http://flashgate.test/graphql', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{ chainId }' })
  expect(response.status).toBe(415)
})
