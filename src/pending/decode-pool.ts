import { availableParallelism } from 'node:os'
import { extname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import type { Logger } from 'pino'
import type { Hex } from 'viem'
import { decodePendingTransaction, type PendingTransaction } from './transactions.js'

/**
 * Transactions one thread is given at least. A frame is split only when each part is worth the hop to a
 * thread and back: measured on 2 cores, 10 transactions split in two gained 0.6 ms at the median but lost
 * 3 ms at the 99th percentile to thread wake-ups, while 25 went from 6.7 to 4.0 ms at the median.
 */
const MIN_TRANSACTIONS_PER_THREAD = 8
/** Threads worth starting: a flashblock of Base holds tens of transactions. */
const MAX_THREADS = 4
/** Cores from which threads are started unless `--decode-threads` says otherwise. */
const MIN_CORES_FOR_THREADS = 4

export type DecodeRequest = { id: number; raws: Hex[] }
export type DecodeReply = { id: number; results: ({ transaction: PendingTransaction } | { error: string })[] }
/** A raw transaction decoded with its sender, or why it could not be. */
export type Decoded = PendingTransaction | Error

export type DecodePool = {
  /** The transactions of `raws` in order, decoded on the pool's threads (inline when it has none left). */
  decode(raws: Hex[]): Promise<Decoded[]>
  /** Threads ready to decode (0: inline on the caller's thread). */
  threads(): number
  /** Starts the threads now rather than with the first large frame; resolves with how many are ready. */
  warm(): Promise<number>
  /** Transactions decoded so far on the threads, and on the caller's thread. */
  figures(): { onThreads: number; inline: number }
  close(): Promise<void>
}

/**
 * Threads for a machine: one per core, up to `MAX_THREADS` (the main thread waits while they decode), from 4
 * cores up. On 2 cores they would share the cores of the main thread and Postgres: a 50-transaction frame
 * still decoded twice as fast, but starting them (seconds of CPU each) slowed everything else in the
 * project's CI on this 2-core machine; `--decode-threads 2` there is the operator's choice.
 */
export function defaultDecodeThreads(): number {
  const cores = availableParallelism()
  return cores < MIN_CORES_FOR_THREADS ? 0 : Math.min(MAX_THREADS, cores)
}

/** Decodes on the calling thread: the pool's fallback, and what a pool of no threads does. */
export function decodeInline(raws: Hex[]): Promise<Decoded[]> {
  return Promise.all(raws.map((raw) => decodePendingTransaction(raw).catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))))))
}

/** The thread's module: built, or from source through an entry that registers tsx in the thread. */
function workerUrl(): URL {
  const built = extname(fileURLToPath(import.meta.url)) === '.js'
  return new URL(built ? './decode-worker.js' : './decode-worker-entry.mjs', import.meta.url)
}

type Thread = { worker: Worker; waiting: Map<number, { resolve(reply: DecodeReply): void; reject(error: Error): void }> }

/**
 * Flashblock transactions decoded, and their senders recovered, on worker threads: a large frame's
 * transactions are split between them, so that its decoding takes a fraction of the time it takes on one
 * thread, and the main thread serves requests meanwhile. The threads start with the first frame large enough
 * to split (loading flashgate's modules takes a thread seconds of CPU: a process whose frames stay small never
 * pays it), and take work once they say they are ready; until then frames are decoded inline. A thread that
 * fails is dropped and what it held is decoded inline. The threads do not keep the process alive.
 */
export function createDecodePool({ threads: size, logger }: { threads: number; logger: Logger }): DecodePool {
  /** Started threads, and of them those ready for work. */
  const started: Thread[] = []
  const ready: Thread[] = []
  let readyWaiters: (() => void)[] = []
  let nextId = 0
  let nextThread = 0
  let closed = false
  const figures = { onThreads: 0, inline: 0 }
  const inline = (raws: Hex[]) => {
    figures.inline += raws.length
    return decodeInline(raws)
  }
  const settled = () => started.every((thread) => ready.includes(thread))
  const wakeWaiters = () => {
    if (!settled()) return
    for (const wake of readyWaiters) wake()
    readyWaiters = []
  }

  function start(): Thread {
    const worker = new Worker(workerUrl())
    const thread: Thread = { worker, waiting: new Map() }
    worker.unref()
    worker.on('message', (reply: DecodeReply | { ready: true }) => {
      if ('ready' in reply) {
        if (!closed && started.includes(thread)) ready.push(thread)
        if (ready.length === size) logger.info({ threads: size }, 'flashblock transactions are decoded on threads from now on')
        return wakeWaiters()
      }
      const waiter = thread.waiting.get(reply.id)
      thread.waiting.delete(reply.id)
      waiter?.resolve(reply)
    })
    const fail = (error: Error) => {
      if (!started.includes(thread)) return
      started.splice(started.indexOf(thread), 1)
      if (ready.includes(thread)) ready.splice(ready.indexOf(thread), 1)
      if (!closed)
        logger.warn({ err: error.message, left: started.length }, 'a flashblock decoding thread failed; its transactions are decoded on the main thread')
      for (const waiter of thread.waiting.values()) waiter.reject(error)
      thread.waiting.clear()
      wakeWaiters()
    }
    worker.on('error', fail)
    worker.on('exit', (code) => fail(new Error(`decoding thread exited with code ${code}`)))
    return thread
  }

  let starting = false
  function startOnce() {
    if (starting || closed || size < 2) return
    starting = true
    for (let index = 0; index < size; index++) started.push(start())
  }

  function onThread(thread: Thread, raws: Hex[]): Promise<Decoded[]> {
    const id = nextId++
    const reply = new Promise<DecodeReply>((resolve, reject) => thread.waiting.set(id, { resolve, reject }))
    thread.worker.postMessage({ id, raws } satisfies DecodeRequest)
    return reply.then(
      ({ results }) => {
        figures.onThreads += results.length
        return results.map((result) => ('transaction' in result ? result.transaction : new Error(result.error)))
      },
      () => inline(raws),
    )
  }

  return {
    async decode(raws) {
      // Split in two or more, or not at all: one thread alone would decode no faster than this one.
      if (raws.length >= 2 * MIN_TRANSACTIONS_PER_THREAD) startOnce()
      const parts = Math.min(ready.length, Math.floor(raws.length / MIN_TRANSACTIONS_PER_THREAD))
      if (parts < 2) return inline(raws)
      const size = Math.ceil(raws.length / parts)
      const chunks: Promise<Decoded[]>[] = []
      for (let start = 0; start < raws.length; start += size) {
        nextThread = (nextThread + 1) % ready.length
        chunks.push(onThread(ready[nextThread]!, raws.slice(start, start + size)))
      }
      return (await Promise.all(chunks)).flat()
    },
    threads: () => ready.length,
    warm() {
      startOnce()
      return new Promise<number>((resolve) => {
        readyWaiters.push(() => resolve(ready.length))
        wakeWaiters()
      })
    },
    figures: () => ({ ...figures }),
    async close() {
      closed = true
      await Promise.all(started.map((thread) => thread.worker.terminate()))
    },
  }
}
