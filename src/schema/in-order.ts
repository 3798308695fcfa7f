/**
 * Items a subscription may hold for a reader that does not keep up; past it, the subscription ends with an
 * error (the WebSocket endpoint cuts such a reader off the same way, at 16 MiB unread). Ten thousand logs
 * is several blocks of Base: a reader that far behind has lost the stream anyway.
 */
export const MAX_SUBSCRIPTION_BACKLOG = 10_000

export class SlowSubscriberError extends Error {
  constructor(limit: number) {
    super(`subscription ended: more than ${limit} events waited for the client to read them`)
    this.name = 'SlowSubscriberError'
  }
}

/**
 * Sends what a subscription hears one item at a time, in order, so that a reorg's removed logs never
 * overtake the logs they undo; `push` resolves when the reader has taken the item. What waits is bounded:
 * past `limit` items the subscription stops with SlowSubscriberError instead of growing without end.
 */
export function inOrder<item>(push: (item: item) => Promise<unknown>, stop: (error: unknown) => void, limit = MAX_SUBSCRIPTION_BACKLOG) {
  let queue = Promise.resolve()
  let waiting = 0
  let stopped = false
  return (items: readonly item[]) => {
    if (items.length === 0 || stopped) return
    waiting += items.length
    if (waiting > limit) {
      stopped = true
      stop(new SlowSubscriberError(limit))
      return
    }
    queue = queue
      .then(async () => {
        for (const item of items) {
          if (stopped) return
          await push(item)
          waiting--
        }
      })
      .catch((error: unknown) => {
        stopped = true
        stop(error)
      })
  }
}
