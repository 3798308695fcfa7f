/**
 * Typed errors, one module and one family (STYLE.md §5). Every error that crosses a boundary is a
 * `FlashgateError` with a literal `name` that carries all its answers: the EIP-1474 code of JSON-RPC (and the
 * HTTP status of a single call), the HTTP status and stable code of REST, and the `extensions.code` of
 * GraphQL. `toJsonRpcError`, `toHttpError` and `toGraphQLError` read them; anything else is masked.
 * https://eips.ethereum.org/EIPS/eip-1474#error-codes
 */
import { GraphQLError } from 'graphql'

export type JsonRpcErrorObject = { code: number; message: string; data?: unknown }

export abstract class FlashgateError extends Error {
  abstract override readonly name: string
  /** The JSON-RPC (EIP-1474) code. */
  abstract readonly code: number
  /** HTTP status for a single (non-batch) JSON-RPC call; 200 unless a policy says otherwise. */
  readonly httpStatus: number = 200
  /** REST (`/v1/…`) status; `null`: 400, or `httpStatus` when that is not 200. */
  readonly restStatus: number | null = null
  /** REST `error.code`: stable snake_case for clients to branch on. */
  readonly restCode: string = 'invalid_request'
  /** GraphQL `extensions.code`; `null`: the GraphQL server masks the error as unexpected. */
  readonly graphqlCode: string | null = null
  /** Extra response headers (`allow`, `retry-after`). */
  readonly headers: Record<string, string> = {}
  readonly data?: unknown

  constructor(message: string, options?: { data?: unknown; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    if (options?.data !== undefined) this.data = options.data
  }
}

export class ParseError extends FlashgateError {
  override readonly name = 'ParseError'
  readonly code = -32700
  constructor(message = 'parse error') {
    super(message)
  }
}

export class InvalidRequestError extends FlashgateError {
  override readonly name = 'InvalidRequestError'
  readonly code = -32600
}

export class MethodNotFoundError extends FlashgateError {
  override readonly name = 'MethodNotFoundError'
  readonly code = -32601
  constructor(method: string) {
    super(`the method ${method} does not exist/is not available`)
  }
}

export class InvalidParamsError extends FlashgateError {
  override readonly name = 'InvalidParamsError'
  override readonly graphqlCode = 'BAD_USER_INPUT'
  readonly code = -32602
}

/** A block range or result set larger than the configured limits; the message names a range that fits. */
export class LimitExceededError extends FlashgateError {
  override readonly name = 'LimitExceededError'
  override readonly graphqlCode = 'LIMIT_EXCEEDED'
  readonly code = -32602
}

export class BlockRangeBeyondHeadError extends FlashgateError {
  override readonly name = 'BlockRangeBeyondHeadError'
  override readonly graphqlCode = 'BLOCK_RANGE_BEYOND_HEAD'
  readonly code = -32602
  constructor() {
    super('block range extends beyond current head block')
  }
}

/**
 * geth's wording for `fromBlock > toBlock`, with the code of the current execution-apis fixture
 * (`tests/eth_getLogs/filter-error-reversed-block-range.io`).
 */
export class InvalidBlockRangeError extends FlashgateError {
  override readonly name = 'InvalidBlockRangeError'
  override readonly graphqlCode = 'BAD_USER_INPUT'
  readonly code = -32602
  constructor() {
    super('invalid block range params')
  }
}

/**
 * A read at a block the node does not have, as reth (Base's node) answers it: `-32001 block not found: <block>`,
 * the block written as reth writes a block id (`0x1a`, `hash 0x…`, `canonical hash 0x…`, `safe`).
 */
export class HeaderNotFoundError extends FlashgateError {
  override readonly name = 'HeaderNotFoundError'
  override readonly graphqlCode = 'HEADER_NOT_FOUND'
  readonly code = -32001
  constructor(block: string) {
    super(`block not found: ${block}`)
  }
}

export class UnknownBlockError extends FlashgateError {
  override readonly name = 'UnknownBlockError'
  override readonly graphqlCode = 'UNKNOWN_BLOCK'
  readonly code = -32000
  constructor() {
    super('unknown block')
  }
}

/**
 * A page's cursor points into a block a reorg has replaced since that page was read: the logs or transactions
 * already paged there are not the chain's any more, and the next page cannot say which of the new block's are
 * missing. The client pages again from before that block.
 */
export class CursorReorgedError extends FlashgateError {
  override readonly name = 'CursorReorgedError'
  override readonly graphqlCode = 'CURSOR_REORGED'
  readonly code = -32602
  constructor(blockNumber: number) {
    super(`block ${blockNumber} of this cursor was replaced by a reorg since its page was read; page again from an earlier block`)
  }
}

/** geth's answer for a filter id it does not hold: never installed, uninstalled, or not polled for 5 minutes. */
export class FilterNotFoundError extends FlashgateError {
  override readonly name = 'FilterNotFoundError'
  override readonly graphqlCode = 'FILTER_NOT_FOUND'
  readonly code = -32000
  constructor() {
    super('filter not found')
  }
}

/** The index does not reach back to the requested block (it starts at `--start-block`). */
export class HistoryUnavailableError extends FlashgateError {
  override readonly name = 'HistoryUnavailableError'
  override readonly graphqlCode = 'HISTORY_UNAVAILABLE'
  readonly code = -32000
}

export class MethodNotAllowedError extends FlashgateError {
  override readonly name = 'MethodNotAllowedError'
  readonly code = -32004
  override readonly httpStatus = 403
  constructor(method: string) {
    super(`method ${method} is not available on this endpoint`)
  }
}

/** `POST /rpc/:apiKey` with a key that does not exist or was revoked: HTTP 401. */
export class UnauthorizedError extends FlashgateError {
  override readonly name = 'UnauthorizedError'
  readonly code = -32000
  override readonly httpStatus = 401
  constructor(message = 'unknown or revoked API key') {
    super(message)
  }
}

/**
 * A client (an API key, or an address on the public endpoint) already holds as many stateful filters as one
 * may: EIP-1474's "limit exceeded", answered with HTTP 200 (waiting does not help until it uninstalls some or
 * they expire, so it is not a rate limit a client should retry).
 */
export class TooManyFiltersError extends FlashgateError {
  override readonly name = 'TooManyFiltersError'
  readonly code = -32005
  constructor(maxFilters: number, maxBytes: number, maxInStore: number) {
    super(
      `too many filters: a client holds at most ${maxFilters} filters and ${maxBytes / 1024 / 1024} MiB of filter criteria, and a server at most ${maxInStore} filters; uninstall some (eth_uninstallFilter), or they expire after 5 minutes unpolled`,
    )
  }
}

/** A client already holds as many WebSockets as one may: the upgrade is answered HTTP 429 with EIP-1474's "limit exceeded". */
export class TooManyWebSocketsError extends FlashgateError {
  override readonly name = 'TooManyWebSocketsError'
  readonly code = -32005
  override readonly httpStatus = 429
  constructor(max: number) {
    super(`too many open WebSockets from this client: at most ${max}; close one first`)
  }
}

/** Over the endpoint's request rate: HTTP 429 with `Retry-After`; viem and ethers retry these. */
export class RateLimitedError extends FlashgateError {
  override readonly name = 'RateLimitedError'
  readonly code = -32005
  override readonly httpStatus = 429
  override readonly graphqlCode = 'RATE_LIMITED'
  constructor(readonly retryAfterSeconds: number) {
    super(`rate limit exceeded; retry in ${retryAfterSeconds} s`, { data: { retryAfter: retryAfterSeconds } })
    this.headers['retry-after'] = String(retryAfterSeconds)
  }
}

/** A JSON-RPC endpoint asked with another method than POST: HTTP 405 with `Allow: POST`. */
export class JsonRpcNeedsPostError extends FlashgateError {
  override readonly name = 'JsonRpcNeedsPostError'
  readonly code = -32600
  override readonly httpStatus = 405
  override readonly restCode = 'method_not_allowed'
  constructor() {
    super('use POST for JSON-RPC')
    this.headers.allow = 'POST'
  }
}

/**
 * A batch whose answers have passed the endpoint's `--max-batch-response` bytes: each call not yet started
 * gets this instead of running, as geth does (`--rpc.batch-response-max-size`, the same code and words).
 */
export class ResponseTooLargeError extends FlashgateError {
  override readonly name = 'ResponseTooLargeError'
  readonly code = -32003
  constructor() {
    super('response too large')
  }
}

export class InternalError extends FlashgateError {
  override readonly name = 'InternalError'
  readonly code = -32603
  constructor(message = 'internal error') {
    super(message)
  }
}

/** Upstream node failed or is unreachable while serving a read-through. */
export class UpstreamError extends FlashgateError {
  override readonly name = 'UpstreamError'
  override readonly graphqlCode = 'UPSTREAM_UNAVAILABLE'
  readonly code = -32603
  constructor(message = 'upstream unavailable', options?: { cause?: unknown }) {
    super(message, options)
  }
}

/**
 * An error the upstream node answered to a forwarded call (`eth_call` reverting, a rejected raw transaction):
 * passed through with the node's own code, message and data, so that wallets decode it as usual.
 */
export class UpstreamRpcError extends FlashgateError {
  override readonly name = 'UpstreamRpcError'
  readonly code: number
  constructor(error: { code: number; message: string; data?: unknown }) {
    super(error.message, error.data === undefined ? undefined : { data: error.data })
    this.code = error.code
  }
}

/**
 * A call or gas estimate that reverted, answered as the node would: code 3, `execution reverted` with the
 * `Error(string)` reason when there is one, and the revert bytes as `data` (wallets decode custom errors from
 * them). https://github.com/ethereum/execution-apis (eth_call, eth_estimateGas)
 */
export class ExecutionRevertedError extends FlashgateError {
  override readonly name = 'ExecutionRevertedError'
  readonly code = 3
  constructor(
    override readonly data: string,
    readonly reason: string | null,
  ) {
    super(reason === null ? 'execution reverted' : `execution reverted: ${reason}`, { data })
  }
}

/** A call that failed without reverting (out of gas, an invalid opcode), or an estimate no allowed gas satisfies: geth's `-32000`. */
export class ExecutionFailedError extends FlashgateError {
  override readonly name = 'ExecutionFailedError'
  readonly code = -32000
}

/**
 * EIP-7966: the transaction was accepted but no receipt came within the timeout; `data` is its hash, so
 * the caller can keep waiting by other means.
 */
export class TransactionTimeoutError extends FlashgateError {
  override readonly name = 'TransactionTimeoutError'
  readonly code = 4
  constructor(hash: string, timeoutMs: number) {
    super(`The transaction was added to the mempool but wasn't processed within ${timeoutMs} ms.`, { data: hash })
  }
}

/**
 * Longest error message written to the log. A database error's message can hold the whole statement and
 * its parameters (a 5 MB filter made 30 MB log lines); the log gets the name, the code and this much text.
 */
const MAX_LOGGED_MESSAGE_CHARS = 300

/** An unexpected error as the log may show it: never its parameters, its cause's payload or its full text. */
export function loggableError(error: unknown): { name: string; message: string; code?: string | number } {
  if (!(error instanceof Error)) return { name: typeof error, message: String(error).slice(0, MAX_LOGGED_MESSAGE_CHARS) }
  const text = withoutParameters(error)
  const message = text.length > MAX_LOGGED_MESSAGE_CHARS ? `${text.slice(0, MAX_LOGGED_MESSAGE_CHARS)}… (${text.length} chars)` : text
  const code = (error as { code?: unknown }).code ?? (error.cause as { code?: unknown } | undefined)?.code
  return typeof code === 'string' || typeof code === 'number' ? { name: error.name, message, code } : { name: error.name, message }
}

/**
 * An error's message without the statement's parameters that drizzle appends to a failed query's ("Failed query:
 * …\nparams: …": an API key's digest, a caller's filter), followed by its cause's message, which says why it failed.
 */
function withoutParameters(error: Error): string {
  const cut = error.message.indexOf('\nparams: ')
  if (cut === -1) return error.message
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : ''
  return `${error.message.slice(0, cut)}${cause}`
}

export function isFlashgateError(error: unknown): error is FlashgateError {
  return error instanceof FlashgateError
}

/** Maps any thrown value to a JSON-RPC error object; unexpected errors are masked (no stack, no SQL). */
export function toJsonRpcError(error: unknown): JsonRpcErrorObject {
  if (isFlashgateError(error)) {
    return error.data === undefined ? { code: error.code, message: error.message } : { code: error.code, message: error.message, data: error.data }
  }
  return { code: -32603, message: 'internal error' }
}

/**
 * Maps a thrown value to a GraphQL error with `extensions.code` (and the JSON-RPC code the same failure
 * has on `/rpc`), or `null` for an unexpected error, which the GraphQL server masks.
 */
export function toGraphQLError(error: unknown): GraphQLError | null {
  if (!isFlashgateError(error) || error.graphqlCode === null) return null
  return new GraphQLError(error.message, { extensions: { code: error.graphqlCode, jsonRpcCode: error.code } })
}

/**
 * Errors of the REST API (`/v1/…`) and the admin endpoint, answered as `{"error":{"code","message"}}` with
 * their HTTP status. `restCode` is a stable snake_case string for clients to branch on; `message` is for
 * people. Their JSON-RPC code is invalid params unless said otherwise.
 */
export abstract class ApiError extends FlashgateError {
  abstract override readonly restStatus: number
  readonly code: number = -32602
}

export class InvalidJsonError extends ApiError {
  override readonly name = 'InvalidJsonError'
  override readonly restStatus = 400
  override readonly restCode = 'invalid_json'
  constructor(message = 'the request body is not valid JSON') {
    super(message)
  }
}

/** A well-formed request whose fields do not validate; the message names the field. */
export class InvalidRequestBodyError extends ApiError {
  override readonly name = 'InvalidRequestBodyError'
  override readonly restStatus = 400
  override readonly restCode = 'invalid_request'
}

export class InvalidAddressError extends ApiError {
  override readonly name = 'InvalidAddressError'
  override readonly restStatus = 400
  override readonly restCode = 'invalid_address'
}

export class InvalidBuilderCodeError extends ApiError {
  override readonly name = 'InvalidBuilderCodeError'
  override readonly restStatus = 400
  override readonly restCode = 'invalid_builder_code'
}

export class InvalidQueryError extends ApiError {
  override readonly name = 'InvalidQueryError'
  override readonly restStatus = 400
  override readonly restCode = 'invalid_query'
}

export class NotFoundError extends ApiError {
  override readonly name = 'NotFoundError'
  override readonly code = -32601
  override readonly restStatus = 404
  override readonly restCode = 'not_found'
}

export class HttpMethodNotAllowedError extends ApiError {
  override readonly name = 'HttpMethodNotAllowedError'
  override readonly code = -32600
  override readonly httpStatus = 405
  override readonly restStatus = 405
  override readonly restCode = 'method_not_allowed'
  constructor(method: string, allowed: string[]) {
    super(`${method} is not allowed here; use ${allowed.join(' or ')}`)
    this.headers.allow = allowed.join(', ')
  }
}

export class PayloadTooLargeError extends ApiError {
  override readonly name = 'PayloadTooLargeError'
  override readonly code = -32600
  override readonly httpStatus = 413
  override readonly restStatus = 413
  override readonly restCode = 'payload_too_large'
  constructor(limitBytes: number) {
    super(`request body exceeds ${limitBytes} bytes`)
    // The rest of an oversized body is not read: the connection cannot carry another request.
    this.headers.connection = 'close'
  }
}

export class UnsupportedMediaTypeError extends ApiError {
  override readonly name = 'UnsupportedMediaTypeError'
  override readonly restStatus = 415
  override readonly restCode = 'unsupported_media_type'
  constructor(contentType: string | undefined) {
    super(`expected content-type application/json, got ${contentType === undefined ? 'none' : JSON.stringify(contentType)}`)
  }
}

/** `Expect` other than `100-continue`, the one expectation HTTP defines (RFC 9110 §10.1.1). */
export class ExpectationFailedError extends ApiError {
  override readonly name = 'ExpectationFailedError'
  override readonly code = -32600
  override readonly httpStatus = 417
  override readonly restStatus = 417
  override readonly restCode = 'expectation_failed'
  constructor(expectation: string) {
    super(`the only expectation served is 100-continue, not ${JSON.stringify(expectation)}; send the request without it`)
    // Whether the client sends its body after a 417 is its choice: the connection cannot carry another request.
    this.headers.connection = 'close'
  }
}

/**
 * A WebSocket opening handshake this server cannot accept (RFC 6455 §4.2.1): a method other than GET, a
 * missing or malformed `Sec-WebSocket-Key`, or a protocol version other than 13 (and 8, its draft).
 */
export class BadWebSocketHandshakeError extends ApiError {
  override readonly name = 'BadWebSocketHandshakeError'
  override readonly code = -32600
  override readonly httpStatus: number
  override readonly restStatus: number
  override readonly restCode = 'bad_websocket_handshake'
  constructor(problem: string, { status = 400, headers = {} }: { status?: 400 | 405; headers?: Record<string, string> } = {}) {
    super(`not a WebSocket handshake this server accepts: ${problem}`)
    this.httpStatus = status
    this.restStatus = status
    Object.assign(this.headers, headers)
  }
}

/** A request body in a content coding the server does not decode (RFC 9110 §15.5.16). */
export class UnsupportedContentEncodingError extends ApiError {
  override readonly name = 'UnsupportedContentEncodingError'
  override readonly code = -32600
  override readonly httpStatus = 415
  override readonly restStatus = 415
  override readonly restCode = 'unsupported_media_type'
  /** `accepted`: the codings `path` does decode (none on GraphQL, whose library reads the body as it comes). */
  constructor(coding: string, path: string, accepted: readonly string[]) {
    super(
      `content-encoding ${JSON.stringify(coding)} is not decoded on ${path}; send the body uncompressed${accepted.length === 0 ? '' : ` or ${accepted.join(', ')}`}`,
    )
    this.headers['accept-encoding'] = accepted.length === 0 ? 'identity' : accepted.join(', ')
    // The body is not read: the connection cannot carry another request.
    this.headers.connection = 'close'
  }
}

export class DuplicateApiKeyNameError extends ApiError {
  override readonly name = 'DuplicateApiKeyNameError'
  override readonly restStatus = 409
  override readonly restCode = 'duplicate_name'
  constructor(keyName: string) {
    super(`an API key named ${JSON.stringify(keyName)} already exists`)
  }
}

export class TooManyRequestsError extends ApiError {
  override readonly name = 'TooManyRequestsError'
  override readonly code = -32005
  override readonly restStatus = 429
  override readonly restCode = 'rate_limited'
  constructor(retryAfterSeconds: number) {
    super(`too many requests from this address; retry in ${retryAfterSeconds} s`)
    this.headers['retry-after'] = String(retryAfterSeconds)
  }
}

export function isApiError(error: unknown): error is ApiError {
  return error instanceof ApiError
}

export type HttpErrorAnswer = { status: number; headers: Record<string, string>; body: { error: { code: string; message: string } } }

/** Maps any thrown value to a REST answer; unexpected errors are masked as a 500 (details only in the log). */
export function toHttpError(error: unknown): HttpErrorAnswer {
  if (isFlashgateError(error) && error.code !== -32603) {
    const status = error.restStatus ?? (error.httpStatus === 200 ? 400 : error.httpStatus)
    return { status, headers: error.headers, body: { error: { code: error.restCode, message: error.message } } }
  }
  return { status: 500, headers: {}, body: { error: { code: 'internal_error', message: 'internal error' } } }
}
