/** A failure to report in one line, exit code 1 (2 is for bad usage of the config). */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}
