/**
 * A value now, or later. The request path returns values as they are when it has them (an answer from the
 * memo, a key from the cache, a local rate-limit bucket) and promises only when it must wait: every `async`
 * layer costs a promise and a turn of the microtask queue per request, and a cached answer is a few
 * microseconds of work in all (issue 18: those layers made it 2× the cost of a bare Node server).
 */
export type MaybePromise<value> = value | Promise<value>

/** `next(value)` now when `value` is there, else when it arrives. */
export function whenReady<value, result>(value: MaybePromise<value>, next: (value: value) => MaybePromise<result>): MaybePromise<result> {
  return value instanceof Promise ? value.then(next) : next(value)
}
