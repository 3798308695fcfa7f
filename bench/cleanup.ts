/** Longest any single cleanup step may take before the next one runs anyway. */
const CLEANUP_STEP_TIMEOUT_MS = 20_000

export type Cleanup = {
  /** Registers a step; steps run last-in, first-out. */
  defer(label: string, step: () => Promise<void> | void): void
  /** Runs every registered step once, whatever fails; safe to call more than once. */
  run(): Promise<void>
}

export function createCleanup(log: (line: string) => void): Cleanup {
  const steps: { label: string; step: () => Promise<void> | void }[] = []
  let running: Promise<void> | null = null

  async function runSteps() {
    while (steps.length > 0) {
      const { label, step } = steps.pop()!
      let timer: NodeJS.Timeout | undefined
      try {
        await Promise.race([
          Promise.resolve().then(step),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`timed out after ${CLEANUP_STEP_TIMEOUT_MS} ms`)), CLEANUP_STEP_TIMEOUT_MS)
          }),
        ])
      } catch (error) {
        log(`cleanup: ${label} failed: ${error instanceof Error ? error.message : String(error)}`)
      } finally {
        clearTimeout(timer)
      }
    }
  }

  return {
    defer(label, step) {
      steps.push({ label, step })
    },
    run() {
      running ??= runSteps()
      return running
    },
  }
}
