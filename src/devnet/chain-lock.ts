// Ticks change anvil's chain; reads must never see one half done.

export type ChainLock = {
  /** Reads: any number at once, never during a tick. */
  shared: <T>(fn: () => Promise<T>) => Promise<T>
  /** Ticks and sends: alone. */
  exclusive: <T>(fn: () => Promise<T>) => Promise<T>
}

/** A first-come, first-served read/write lock, so a tick is not starved by a stream of reads. */
export function createChainLock(): ChainLock {
  let readers = 0
  let writing = false
  const waiting: { exclusive: boolean; grant: () => void }[] = []
  function pump(): void {
    for (let next = waiting[0]; next !== undefined; next = waiting[0]) {
      if (writing || (next.exclusive && readers > 0)) return
      waiting.shift()
      if (next.exclusive) writing = true
      else readers++
      next.grant()
    }
  }
  async function run<T>(exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    await new Promise<void>((grant) => {
      waiting.push({ exclusive, grant })
      pump()
    })
    try {
      return await fn()
    } finally {
      if (exclusive) writing = false
      else readers--
      pump()
    }
  }
  return { shared: (fn) => run(false, fn), exclusive: (fn) => run(true, fn) }
}
