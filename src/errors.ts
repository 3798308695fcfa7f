/**
 * Typed errors, one module (STYLE.md §5). Every error that crosses a boundary is a `FlashgateError` with a
 * literal `name` and an EIP-1474 code; `toJsonRpcError` maps anything else to a masked `-32603`.
 * https://eips.ethereum.org/EIPS/eip-1474#error-codes
 */
export type JsonRpcErrorObject = { code: number; message: string; data?: unknown }

export abstract class FlashgateError extends Error {
  abstract override readonly name: string
  abstract readonly code: number
  /** HTTP status for a single (non-batch) JSON-RPC call; 200 unless a policy says otherwise. */
  readonly httpStatus: number = 200
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
  readonly code = -32602
}

/** A block range or result set larger than the configured limits; the message names a range that fits. */
export class LimitExceededError extends FlashgateError {
  override readonly name = 'LimitExceededError'
  readonly code = -32602
}

export class BlockRangeBeyondHeadError extends FlashgateError {
  override readonly name = 'BlockRangeBeyondHeadError'
  readonly code = -32602
  constructor() {
    super('block range extends beyond current head block')
  }
}

/** geth's wording and code for `fromBlock > toBlock`. */
export class InvalidBlockRangeError extends FlashgateError {
  override readonly name = 'InvalidBlockRangeError'
  readonly code = -32000
  constructor() {
    super('invalid block range params')
  }
}

/** geth answers `header not found` for a state read at a block it does not have. */
export class HeaderNotFoundError extends FlashgateError {
  override readonly name = 'HeaderNotFoundError'
  readonly code = -32000
  constructor(message = 'header not found') {
    super(message)
  }
}

export class UnknownBlockError extends FlashgateError {
  override readonly name = 'UnknownBlockError'
  readonly code = -32000
  constructor() {
    super('unknown block')
  }
}

/** The index does not reach back to the requested block (it starts at `--start-block`). */
export class HistoryUnavailableError extends FlashgateError {
  override readonly name = 'HistoryUnavailableError'
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

export class RateLimitedError extends FlashgateError {
  override readonly name = 'RateLimitedError'
  readonly code = -32005
  override readonly httpStatus = 429
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
  readonly code = -32603
  constructor(message = 'upstream unavailable', options?: { cause?: unknown }) {
    super(message, options)
  }
}

export function isFlashgateError(error: unknown): error is FlashgateError {
  return error instanceof FlashgateError
}

/** Maps any thrown value to a JSON-RPC error object; unexpected errors are masked (no stack, no SQL). */
export function toJsonRpcError(error: unknown): JsonRpcErrorObject {
  if (isFlashgateError(error)) {
    return error.data === undefined
      ? { code: error.code, message: error.message }
      : { code: error.code, message: error.message, data: error.data }
  }
  return { code: -32603, message: 'internal error' }
}
