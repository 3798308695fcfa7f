/** A failure to report in one line, exit code 1 (2 is for bad usage of the config). */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

/** A port that is taken, said in one line naming the option that chooses it; other errors pass through. */
export function explainListenFailure(error: unknown, ports: { port: number; option: string }[]): unknown {
  const { code, port } = error as { code?: string; port?: number }
  if (code !== 'EADDRINUSE') return error
  const chosen = ports.find((candidate) => candidate.port === port)
  return new UsageError(`port ${port} is already in use (EADDRINUSE)${chosen === undefined ? '' : `; choose another with ${chosen.option}`}`)
}
