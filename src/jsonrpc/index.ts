import type { Logger } from 'pino'
import { createUnexpectedErrorLog } from '../logger.js'
import { describeParamsError } from '../codecs/index.js'
import {
  InvalidParamsError,
  InvalidRequestError,
  isFlashgateError,
  type JsonRpcErrorObject,
  MethodNotAllowedError,
  MethodNotFoundError,
  ParseError,
  RateLimitedError,
  ResponseTooLargeError,
  toJsonRpcError,
} from '../errors.js'
import { type LogLimits, RawJson, type Resolvers } from '../resolvers/index.js'
import type { CallContext, MethodDefinition } from './define-method.js'
import { methods as indexMethods } from './methods/index.js'
import type { CallMemo } from './memo.js'
import { exactIds, type NumericId } from './request-ids.js'
import { type MaybePromise, whenReady } from '../http/maybe-promise.js'

export { methods } from './methods/index.js'

/** Requests of one batch run at most this many at a time, so that a batch cannot take the whole pool. */
const BATCH_CONCURRENCY = 8
const DEFAULT_MAX_BATCH_SIZE = 1_000

/** A numeric id the parsed number cannot reproduce is kept as its text (`NumericId`). */
type Id = string | number | NumericId | null
export type JsonRpcResponse = { jsonrpc: '2.0'; id: Id; result: unknown } | { jsonrpc: '2.0'; id: Id; error: JsonRpcErrorObject }

/** What the HTTP layer sends back: a status, headers and a body (`null` for a batch of notifications only). */
export type JsonRpcReply = { status: number; headers?: Record<string, string>; body: JsonRpcResponse | JsonRpcResponse[] | null }

export type JsonRpcHandlerConfig = {
  resolvers: Resolvers
  /** The endpoint's `eth_getLogs` limits, passed to the resolvers with each call. */
  limits: LogLimits
  logger: Logger
  methods?: Record<string, MethodDefinition>
  maxBatchSize?: number
  /** Bytes of a batch's results past which the calls not yet started get `-32003` (geth's rule); none when absent. */
  maxBatchResponseBytes?: number
  /** Methods this endpoint refuses: `-32004`, and HTTP 403 for a single call (src/policy). */
  refusedMethods?: ReadonlySet<string>
  /** Forwards a method the index does not answer to the upstream node, if it is on the allowlist. */
  passThrough?: PassThrough | null
  /** Results of calls whose answer is fixed by the blocks they name (jsonrpc/memo.ts); none when absent. */
  memo?: CallMemo | null
}

/** Forwards one call to the upstream node; `null` when the method is not on the pass-through allowlist. */
export type PassThrough = (method: string, params: unknown[]) => Promise<unknown> | null

export type HandleOptions = {
  /** Methods of one connection, e.g. `eth_subscribe` on a WebSocket. */
  local?: LocalMethods
  /**
   * Admits a request costing `cost` calls (a batch costs its length) against the client's rate limit:
   * `0` to go ahead, or the seconds to wait before retrying.
   */
  admit?: (cost: number) => MaybePromise<number>
  /** Who asks (an API key, or an address on the public endpoint), for what a client holds (stateful filters). */
  client?: string
}

/** A valid request id: a string, a finite number or null (https://www.jsonrpc.org/specification#request_object). */
const isValidId = (id: unknown): id is string | number | null => id === null || typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id))

/** The id an answer to a request carries: a numeric id as the request wrote it, else its id if valid, else `null`. */
const answerId = (request: unknown, exactId?: NumericId): Id => {
  if (exactId !== undefined) return exactId
  const id = typeof request === 'object' && request !== null ? (request as { id?: unknown }).id : undefined
  return isValidId(id) ? id : null
}

/** Methods that only make sense on one connection, e.g. subscriptions on a WebSocket. */
export type LocalMethods = Record<string, (params: unknown, request: { notification: boolean }) => Promise<unknown>>
const NO_LOCAL_METHODS: LocalMethods = {}

/**
 * JSON-RPC 2.0 over any transport: parses, validates, dispatches to the method table and maps errors.
 * https://www.jsonrpc.org/specification
 */
export function createJsonRpcHandler(config: JsonRpcHandlerConfig) {
  const { resolvers, logger } = config
  const anonymous: CallContext = { limits: config.limits, client: null }
  const table = config.methods ?? indexMethods
  const maxBatchSize = config.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE
  const maxBatchResponseBytes = config.maxBatchResponseBytes ?? Number.POSITIVE_INFINITY
  const refusedMethods = config.refusedMethods ?? new Set<string>()
  const passThrough = config.passThrough ?? null
  const memo = config.memo ?? null

  const logUnexpected = createUnexpectedErrorLog(logger)
  function failure(id: Id, error: unknown): JsonRpcResponse {
    if (!isFlashgateError(error)) logUnexpected(error, 'unexpected error while serving a JSON-RPC call')
    return { jsonrpc: '2.0', id, error: toJsonRpcError(error) }
  }

  /** A call's outcome as the response to its request (`null` for a notification) and the HTTP status it asks for. */
  type Outcome = { response: JsonRpcResponse | null; status: number }
  const succeeded = (id: Id, hasId: boolean, result: unknown): Outcome => ({ response: hasId ? { jsonrpc: '2.0', id, result } : null, status: 200 })
  const failed = (id: Id, hasId: boolean, error: unknown): Outcome => {
    const response = failure(id, error)
    return { response: hasId ? response : null, status: isFlashgateError(error) ? error.httpStatus : 200 }
  }

  /** Handles one request object; `null` for a notification (no `id`), which gets no answer. */
  function handleOne(request: unknown, local: LocalMethods, context: CallContext, exactId?: NumericId): MaybePromise<Outcome> {
    if (typeof request !== 'object' || request === null || Array.isArray(request))
      return { response: failure(null, new InvalidRequestError('invalid request')), status: 200 }
    const message = request as Record<string, unknown>
    const validId = isValidId(message.id)
    const hasId = 'id' in message
    const id = answerId(message, exactId)
    if (hasId && !validId && exactId === undefined)
      return { response: failure(null, new InvalidRequestError('invalid request: id must be a string, number or null')), status: 200 }
    if (message.jsonrpc !== '2.0') return { response: failure(id, new InvalidRequestError('invalid request: jsonrpc must be "2.0"')), status: 200 }
    if (typeof message.method !== 'string') return { response: failure(id, new InvalidRequestError('invalid request: method must be a string')), status: 200 }

    let result: MaybePromise<unknown>
    try {
      const localMethod = Object.hasOwn(local, message.method) ? local[message.method] : undefined
      result = localMethod ? localMethod(message.params, { notification: !hasId }) : call(message.method, message.params, context)
    } catch (error) {
      return failed(id, hasId, error)
    }
    // An answer at hand (from the memo) goes out without waiting a turn.
    if (!(result instanceof Promise)) return succeeded(id, hasId, result)
    return result.then(
      (value) => succeeded(id, hasId, value),
      (error: unknown) => failed(id, hasId, error),
    )
  }

  /** A call's result: at once when the memo has it, else a promise; invalid params throw at once. */
  function call(method: string, rawParams: unknown, context: CallContext = anonymous): MaybePromise<unknown> {
    if (refusedMethods.has(method)) throw new MethodNotAllowedError(method)
    if (rawParams !== undefined && rawParams !== null && !Array.isArray(rawParams)) throw new InvalidParamsError('invalid params: non-array args')
    const definition = Object.hasOwn(table, method) ? table[method] : undefined
    if (definition === undefined) {
      const forwarded = passThrough?.(method, (rawParams as unknown[] | null | undefined) ?? [])
      if (forwarded === undefined || forwarded === null) throw new MethodNotFoundError(method)
      return forwarded
    }
    const memoized = memo?.lookup(method, rawParams, definition.pins) ?? null
    if (memoized?.hit !== undefined) return memoized.hit
    const parsed = definition.params.safeParse(rawParams ?? [])
    if (!parsed.success) throw new InvalidParamsError(describeParamsError(parsed.error, rawParams ?? []))
    return definition.handler(resolvers, parsed.data, context).then((result) => {
      if (memoized !== null) return memo!.keep(memoized.ticket, result) ?? null
      return result === undefined ? null : result
    })
  }

  /**
   * A result and the bytes it takes in the answer. An object or array is written to JSON once here, kept as
   * those bytes (the answer copies them in as they are: src/jsonrpc/serialize.ts); a string or a scalar is
   * small, and measured as it is.
   */
  function sizedResult(result: unknown): { result: unknown; bytes: number } {
    if (result instanceof RawJson) return { result, bytes: result.byteLength }
    if (typeof result === 'object' && result !== null) {
      const raw = RawJson.fromValue(result)
      return { result: raw, bytes: raw.byteLength }
    }
    return { result, bytes: typeof result === 'string' ? Buffer.byteLength(result) + 2 : String(result).length }
  }

  /** The bytes an error object takes in the answer (its message and data are the node's, of any length). */
  function errorBytes(error: unknown): number {
    try {
      return JSON.stringify(error)?.length ?? 0
    } catch {
      return 0
    }
  }

  /** A call of a batch past its bound on answered bytes, not yet started: not run, and `-32003` unless it is a notification. */
  function refusedAsTooLarge(request: unknown, exactId?: NumericId): JsonRpcResponse | null {
    if (typeof request !== 'object' || request === null || Array.isArray(request)) return failure(null, new InvalidRequestError('invalid request'))
    if (!('id' in request)) return null
    return { jsonrpc: '2.0', id: answerId(request, exactId), error: toJsonRpcError(new ResponseTooLargeError()) }
  }

  async function handleBatch(requests: unknown[], local: LocalMethods, context: CallContext, ids?: (NumericId | undefined)[]): Promise<JsonRpcReply> {
    if (requests.length === 0) return { status: 200, body: failure(null, new InvalidRequestError('empty batch')) }
    if (requests.length > maxBatchSize)
      return { status: 200, body: failure(null, new InvalidRequestError(`batch too large: at most ${maxBatchSize} requests`)) }
    const responses: (JsonRpcResponse | null)[] = new Array(requests.length).fill(null)
    let next = 0
    // Results are held as their JSON bytes, counted as they come: once past the endpoint's bound, the calls not
    // yet started are refused instead of run (geth's rule). Calls already running finish and keep their answers:
    // one may have sent a transaction. A batch then holds at most the bound and one answer per running call;
    // without a bound, large `eth_getLogs` answers could take gigabytes and pass the longest string V8 makes.
    let resultBytes = 0
    const full = () => resultBytes > maxBatchResponseBytes
    async function worker() {
      while (next < requests.length) {
        const index = next++
        if (full()) {
          responses[index] = refusedAsTooLarge(requests[index], ids?.[index])
          continue
        }
        const { response } = await handleOne(requests[index], local, context, ids?.[index])
        if (response === null || maxBatchResponseBytes === Number.POSITIVE_INFINITY) {
          responses[index] = response
          continue
        }
        // An error counts too: a node's answer to a forwarded call (a revert's data) can be megabytes.
        if (!('result' in response)) {
          resultBytes += errorBytes(response.error)
          responses[index] = response
          continue
        }
        const { result, bytes } = sizedResult(response.result)
        resultBytes += bytes
        responses[index] = { ...response, result }
      }
    }
    await Promise.all(Array.from({ length: Math.min(BATCH_CONCURRENCY, requests.length) }, worker))
    const answered = responses.filter((response): response is JsonRpcResponse => response !== null)
    return { status: 200, body: answered.length === 0 ? null : answered }
  }

  /** Handles a raw request body (text): at once when nothing has to wait (a memoised answer, no rate to take). */
  function handle(body: string, { local = NO_LOCAL_METHODS, admit, client }: HandleOptions = {}): MaybePromise<JsonRpcReply> {
    const context = client === undefined ? anonymous : { limits: config.limits, client }
    let payload: unknown
    try {
      payload = JSON.parse(body)
    } catch {
      return { status: 200, body: failure(null, new ParseError()) }
    }
    const ids = exactIds(body, payload)
    // Refusing an oversized batch costs nothing against the rate; anything else is charged per call.
    const oversized = Array.isArray(payload) && payload.length > maxBatchSize
    const wait = oversized || admit === undefined ? 0 : admit(Array.isArray(payload) ? Math.max(1, payload.length) : 1)
    return whenReady(wait, (wait) => {
      if (wait > 0) {
        const id = Array.isArray(payload) ? null : answerId(payload, ids?.[0])
        const limited = new RateLimitedError(wait)
        return { status: limited.httpStatus, headers: limited.headers, body: failure(id, limited) }
      }
      if (Array.isArray(payload)) return handleBatch(payload, local, context, ids)
      return whenReady(handleOne(payload, local, context, ids?.[0]), ({ response, status }) => ({ status, body: response }))
    })
  }

  return { handle, call }
}

export type JsonRpcHandler = ReturnType<typeof createJsonRpcHandler>
