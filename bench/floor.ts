import { fork } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const FLOOR_SERVER_PATH = fileURLToPath(new URL('./floor-server.ts', import.meta.url))
/** The floor keeps its heap when quiet, as flashgate does (bin/idle-heap.js): like is measured against like. */
const IDLE_HEAP_PATH = fileURLToPath(new URL('../bin/idle-heap.js', import.meta.url))

export type FloorServer = {
  url: string
  /** Gives the floor these answers (by method and params) to write, instead of `"0x0"`. */
  answer(calls: { method: string; params: unknown[]; result: unknown }[], file: string): Promise<void>
  stop(): void
}

/**
 * Starts the floor (bench/floor-server.ts): a bare Node HTTP server answering JSON-RPC bodies from a table
 * of results, in a process of its own. What flashgate's cached answers are measured against (issue 18).
 */
export async function startFloorServer(): Promise<FloorServer> {
  const child = fork(FLOOR_SERVER_PATH, [], { execArgv: ['--import', IDLE_HEAP_PATH, '--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (message: { port: number }) => resolve(message.port))
    child.once('exit', (code) => reject(new Error(`the floor server exited with code ${code}`)))
  })
  return {
    url: `http://127.0.0.1:${port}`,
    async answer(calls, file) {
      writeFileSync(file, calls.map((call) => JSON.stringify(call)).join('\n'))
      await new Promise<void>((resolve) => {
        child.once('message', () => resolve())
        child.send({ answers: file })
      })
    },
    stop: () => child.kill('SIGKILL'),
  }
}
