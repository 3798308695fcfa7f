// The entry of a decoding thread (decode-pool.ts). A thread does not inherit the TypeScript loader that
// bin/flashgate.js registers for the process (and `--import tsx` in a thread's execArgv does not reach its
// entry on Node 20): it registers its own, then runs the thread's module.
import { register } from 'tsx/esm/api'

register()
await import('./decode-worker.ts')
