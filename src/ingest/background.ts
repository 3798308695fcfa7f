/** A task the ingest leader runs again and again in the background (retention, sealing), until stopped. */
export type BackgroundLoop = {
  /** False once `stop` was called: a long round checks it between steps. */
  running(): boolean
  /** Waits `ms`, or less if the loop is stopped meanwhile. */
  pause(ms: number): Promise<void>
  stop(): Promise<void>
}

/**
 * Runs `round` every `intervalMs` while `leads()` (the process holds the ingest lock), from now until
 * `stop()`, which wakes a pause at once and waits for the round under way. A failed round is reported to
 * `failed` and the next one runs as usual.
 */
export function startBackgroundLoop({
  intervalMs,
  leads,
  round,
  failed,
}: {
  intervalMs: number
  leads(): boolean
  round(loop: BackgroundLoop): Promise<void>
  failed(error: unknown): void
}): BackgroundLoop {
  let running = true
  let timer: NodeJS.Timeout | null = null
  let wake: (() => void) | null = null
  const control: BackgroundLoop = {
    running: () => running,
    pause: (ms) =>
      new Promise<void>((resolve) => {
        wake = resolve
        timer = setTimeout(resolve, ms)
      }),
    async stop() {
      running = false
      if (timer !== null) clearTimeout(timer)
      wake?.()
      await loop
    },
  }
  const loop = (async () => {
    while (running) {
      try {
        if (leads()) await round(control)
      } catch (error) {
        failed(error)
      }
      if (running) await control.pause(intervalMs)
    }
  })()
  return control
}
