import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const FLOOR_SERVER_PATH = fileURLToPath(new URL('./floor-server.ts', import.meta.url))

/**
 * Starts the floor (bench/floor-server.ts): a bare Node HTTP server answering every JSON-RPC body with a
 * fixed result, in a process of its own. What flashgate's cached answers are measured against (issue 18).
 */
export async function startFloorServer(): Promise<{ url: string; stop(): void }> {
  const child = fork(FLOOR_SERVER_PATH, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (message: { port: number }) => resolve(message.port))
    child.once('exit', (code) => reject(new Error(`the floor server exited with code ${code}`)))
  })
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill('SIGKILL') }
}
