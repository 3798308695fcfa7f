import { EventEmitter } from 'node:events'
import type { ClusterOperation, ClusterOperations, PrimaryStatus, PrimaryToWorker, WorkerToPrimary } from './protocol.js'
import { isClusterMessage } from './protocol.js'

/** A request to the primary not answered within this fails (the caller then answers alone). */
const REQUEST_TIMEOUT_MS = 2_000
/**
 * Hydration waits for the primary's, which asks the upstream again for receipts it does not have yet for
 * about a block time (src/pending/hydrate.ts): it gets longer.
 */
const TIMEOUT_MS_BY_OPERATION: Partial<Record<ClusterOperation, number>> = { hydrate: 15_000 }

type Broadcasts = {
  [kind in Exclude<PrimaryToWorker['fg'], 'reply' | 'status'>]: [message: Extract<PrimaryToWorker, { fg: kind }>]
}

/**
 * A serving worker's side of the cluster channel: requests to the primary (hydration, rate-limit buckets,
 * forwarded nonces, machine-wide metrics) and what the primary announces (flashblocks, sealed blocks, its
 * status). `send` and `receive` are the process's IPC channel; tests pass a pair of their own.
 */
export function createClusterLink({
  workerId,
  // With a callback, a failed write is reported to it rather than as an uncaught 'error' on the process.
  send = (message, failed) =>
    process.send!(message, undefined, undefined, (error: Error | null) => {
      if (error) failed(error)
    }),
  receive = (listener) => process.on('message', listener),
}: {
  workerId: number
  /** Sends `message`; a write that fails later is given to `failed`. */
  send?: (message: WorkerToPrimary, failed: (error: Error) => void) => void
  receive?: (listener: (message: unknown) => void) => void
}) {
  const waiting = new Map<number, { resolve(result: unknown): void; reject(error: Error): void; timer: NodeJS.Timeout }>()
  const events = new EventEmitter<Broadcasts>()
  let nextId = 0
  let status: PrimaryStatus | null = null

  receive((message) => {
    if (!isClusterMessage(message)) return
    const received = message as PrimaryToWorker
    if (received.fg === 'reply') {
      const request = waiting.get(received.id)
      if (request === undefined) return
      waiting.delete(received.id)
      clearTimeout(request.timer)
      if (received.error !== undefined) request.reject(new Error(received.error))
      else request.resolve(received.result)
      return
    }
    if (received.fg === 'status') {
      status = received.status
      return
    }
    ;(events.emit as (kind: string, message: PrimaryToWorker) => boolean)(received.fg, received)
  })

  return {
    workerId,
    events,
    /** Asks the primary; rejects if it does not answer within REQUEST_TIMEOUT_MS. */
    request<operation extends ClusterOperation>(
      operation: operation,
      ...args: ClusterOperations[operation]['args']
    ): Promise<ClusterOperations[operation]['result']> {
      const id = nextId++
      const timeoutMs = TIMEOUT_MS_BY_OPERATION[operation] ?? REQUEST_TIMEOUT_MS
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(id)
          reject(new Error(`the cluster primary did not answer ${operation} within ${timeoutMs} ms`))
        }, timeoutMs)
        timer.unref()
        waiting.set(id, { resolve: resolve as (result: unknown) => void, reject, timer })
        const failed = (error: unknown) => {
          waiting.delete(id)
          clearTimeout(timer)
          reject(error as Error)
        }
        try {
          send({ fg: 'request', id, operation, args }, failed)
        } catch (error) {
          failed(error)
        }
      })
    },
    /** Sends without waiting for an answer (replies to the primary's own requests, announcements). */
    post(message: WorkerToPrimary) {
      try {
        send(message, () => {})
      } catch {
        // The primary is gone: this worker is being shut down anyway.
      }
    },
    /** The primary's latest status (ingester, feed, pending source), or `null` before its first. */
    primaryStatus: () => status,
  }
}

export type ClusterLink = ReturnType<typeof createClusterLink>
