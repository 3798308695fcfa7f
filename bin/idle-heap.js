import { setFlagsFromString } from 'node:v8'

/**
 * How long V8 waits, once the process has grown and then gone quiet, before its memory reducer shrinks the
 * heap: ~23 days here, that is never for a server (2^31 - 1 ms is the most the flag holds).
 */
const IDLE_HEAP_KEPT_MS = 2_000_000_000

/**
 * Keeps the heap's room when the process goes quiet. V8's memory reducer shrinks the heap once a process
 * has been quiet for a while (~90 s for an idle gateway) and leaves it to grow back slowly: the load after
 * any quiet spell then ran with an old generation a few MB above its live size and a full collection every
 * ~150 ms. Measured on the bench's 1M-log chain, `eth_getBlockReceipts` without the answer cache (each 107 KB
 * answer an external buffer), after 100 s idle: ~2,200 requests/s and ~550 µs of CPU a request against
 * ~3,600 and ~250 µs with this, 36 full collections in 6 s against 2. A process keeps the memory it took
 * (bounded, as all its heap, by `--max-old-space-size`).
 *
 * The delay counts from when the reducer is first armed, by a collection once the heap has grown: set later
 * (once the gateway's modules are loaded), the reducer already armed still runs once, and the slow growth
 * after it is what costs. So it is set on import, and `bin/flashgate.js` imports this before anything else
 * (as the bench does for its own process and the floor's: `node --import ./bin/idle-heap.js`).
 */
setFlagsFromString(`--gc-memory-reducer-start-delay-ms=${IDLE_HEAP_KEPT_MS}`)
