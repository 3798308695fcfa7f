import { DrizzleQueryError } from 'drizzle-orm/errors'
import { describe, expect, test } from 'vitest'
import {
  HttpMethodNotAllowedError,
  InternalError,
  InvalidParamsError,
  loggableError,
  JsonRpcNeedsPostError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  toGraphQLError,
  toHttpError,
  toJsonRpcError,
  UpstreamError,
} from './errors.js'

// One error family: each error carries its JSON-RPC code and status, its REST status and code, and its
// GraphQL extensions.code; the three mappers read them, and mask anything unexpected.
describe('the error family', () => {
  test('one error answers alike on every API', () => {
    const tooLarge = new PayloadTooLargeError(1024)
    expect([tooLarge.httpStatus, toJsonRpcError(tooLarge)]).toEqual([413, { code: -32600, message: 'request body exceeds 1024 bytes' }])
    expect(toHttpError(tooLarge)).toEqual({
      status: 413,
      headers: { connection: 'close' },
      body: { error: { code: 'payload_too_large', message: 'request body exceeds 1024 bytes' } },
    })

    const limited = new RateLimitedError(3)
    expect([limited.httpStatus, limited.headers, toJsonRpcError(limited)]).toEqual([
      429,
      { 'retry-after': '3' },
      { code: -32005, message: 'rate limit exceeded; retry in 3 s', data: { retryAfter: 3 } },
    ])
    expect(toGraphQLError(limited)?.extensions).toEqual({ code: 'RATE_LIMITED', jsonRpcCode: -32005 })

    const post = new JsonRpcNeedsPostError()
    expect([post.httpStatus, post.headers, toJsonRpcError(post)]).toEqual([405, { allow: 'POST' }, { code: -32600, message: 'use POST for JSON-RPC' }])
    expect(toHttpError(new HttpMethodNotAllowedError('PUT', ['GET']))).toMatchObject({
      status: 405,
      headers: { allow: 'GET' },
      body: { error: { code: 'method_not_allowed' } },
    })

    const params = new InvalidParamsError('bad topic')
    expect(toHttpError(params)).toEqual({ status: 400, headers: {}, body: { error: { code: 'invalid_request', message: 'bad topic' } } })
    expect(toGraphQLError(params)?.extensions).toEqual({ code: 'BAD_USER_INPUT', jsonRpcCode: -32602 })
    expect(toGraphQLError(new UpstreamError())?.extensions).toEqual({ code: 'UPSTREAM_UNAVAILABLE', jsonRpcCode: -32603 })
  })

  test('REST-only errors are masked in GraphQL; internal errors and foreign throws are masked everywhere', () => {
    expect(toHttpError(new NotFoundError('no route'))).toEqual({ status: 404, headers: {}, body: { error: { code: 'not_found', message: 'no route' } } })
    expect(toGraphQLError(new NotFoundError('no route'))).toBeNull()
    for (const unexpected of [new InternalError('boom'), new Error('select * from secrets'), 'string']) {
      expect(toHttpError(unexpected)).toEqual({ status: 500, headers: {}, body: { error: { code: 'internal_error', message: 'internal error' } } })
      expect(toGraphQLError(unexpected)).toBeNull()
    }
    expect(toJsonRpcError(new Error('select * from secrets'))).toEqual({ code: -32603, message: 'internal error' })
  })
})

test("a failed query is logged with its statement and its cause, never its parameters (an API key's digest, a caller's filter)", () => {
  const digest = Buffer.from('9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 'hex')
  const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
  const failed = new DrizzleQueryError('select "id" from "api_keys" where "key_hash" = $1', [digest], cause)
  const logged = loggableError(failed)
  expect(logged).toEqual({
    name: 'Error',
    message: 'Failed query: select "id" from "api_keys" where "key_hash" = $1: connect ECONNREFUSED 127.0.0.1:5432',
    code: 'ECONNREFUSED',
  })
  expect(JSON.stringify(logged)).not.toContain('params')
  expect(JSON.stringify(logged)).not.toContain(digest.toString('latin1'))
})
