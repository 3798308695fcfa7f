import type { Logger } from 'pino'
import type { Hash } from 'viem'
import type { ExecutorStatus } from './execute/index.js'
import type { Hydrate, PendingState, UpstreamReceipt } from './state.js'

/** One round trip to the upstream may take this long before it counts as failed. */
const ROUND_TRIP_TIMEOUT_MS = 5_000
/**
 * A flashblocks-aware node follows the same feed and may see a flashblock a little after we do: receipts
 * it does not have yet are asked again after these pauses (about one block time in all), then given up.
 */
const RETRY_DELAYS_MS = [20, 40, 80, 160, 320, 640, 800]
/** In `auto`, this many flashblocks whose receipts the upstream never had, and none it had: not flashblocks-aware. */
const UNAWARE_AFTER_FLASHBLOCKS = 3
/** An upstream found not flashblocks-aware is asked again this much later (it may have been catching up). */
const REPROBE_AFTER_MS = 60_000

/**
 * Where pre-confirmed receipts, logs and balances come from when the feed carries none (Base since Azul):
 * `auto` hydrates from the upstream when it is flashblocks-aware and keeps to the frames otherwise;
 * `execute` runs the transactions itself on the parent block's state (src/pending/execute/).
 */
export const PENDING_SOURCE_MODES = ['auto', 'hydrate', 'frames', 'execute'] as const
export type PendingSourceMode = (typeof PENDING_SOURCE_MODES)[number]
/** Where pre-confirmed receipts come from now: the frames themselves (legacy feeds), the upstream, or nowhere. */
export type PendingSourceKind = 'feed' | 'hydrate' | 'frames' | 'probing' | 'execute'

type JsonRpcAnswer = { id?: unknown; result?: unknown; error?: { code: number; message: string } }

/**
 * Receipts of pre-confirmed transactions from a flashblocks-aware upstream (a Base node, or a provider that
 * serves `pending` from Flashblocks), one JSON-RPC batch of `eth_getTransactionReceipt` per flashblock.
 * Measured against `eth_getBlockReceipts("pending")` in bench/pending.ts: the batch asks only for the
 * flashblock's new transactions, where the block's receipts grow with every flashblock of the block.
 */
export function createReceiptFetcher({ rpcUrl, request }: { rpcUrl: string; request: <T>(method: string, params: unknown[]) => Promise<T> }) {
  const isHttp = /^https?:/i.test(rpcUrl)
  let nextId = 0

  async function batchOverHttp(hashes: Hash[]): Promise<UpstreamReceipt[]> {
    const firstId = nextId
    nextId += hashes.length
    const body = JSON.stringify(hashes.map((hash, offset) => ({ jsonrpc: '2.0', id: firstId + offset, method: 'eth_getTransactionReceipt', params: [hash] })))
    const response = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(ROUND_TRIP_TIMEOUT_MS),
    })
    if (!response.ok) throw new Error(`upstream answered HTTP ${response.status}`)
    const answers = (await response.json()) as JsonRpcAnswer[] | JsonRpcAnswer
    if (!Array.isArray(answers)) throw new Error(`upstream refused the batch: ${answers.error?.message ?? 'no array'}`)
    const byId = new Map(answers.map((answer) => [answer.id, answer]))
    return hashes.map((_, offset) => {
      const answer = byId.get(firstId + offset)
      if (answer === undefined) throw new Error('upstream left a batch entry unanswered')
      if (answer.error !== undefined) throw new Error(`upstream: ${answer.error.message}`)
      return (answer.result as UpstreamReceipt | undefined) ?? null
    })
  }

  /** Over a WebSocket every request shares one connection: sent together, they take one round trip. */
  function concurrentOverTransport(hashes: Hash[]): Promise<UpstreamReceipt[]> {
    return Promise.all(hashes.map((hash) => request<UpstreamReceipt>('eth_getTransactionReceipt', [hash])))
  }

  return (hashes: Hash[]): Promise<UpstreamReceipt[]> => (isHttp ? batchOverHttp(hashes) : concurrentOverTransport(hashes))
}

/**
 * Hydration with patience: receipts the upstream has not got yet are asked for again (only those) until
 * it has them, about a block time has passed, or the flashblock no longer matters (its block sealed or
 * dropped). A retry that fails ends the retries but keeps what the earlier answers gave; only a failed
 * first round trip fails the hydration.
 */
export function withRetries(fetchReceipts: (hashes: Hash[]) => Promise<UpstreamReceipt[]>, sleep = defaultSleep): Hydrate {
  return async (hashes, { live = () => true } = {}) => {
    const receipts: UpstreamReceipt[] = await fetchReceipts(hashes)
    for (const delay of RETRY_DELAYS_MS) {
      const missing = receipts.flatMap((receipt, offset) => (receipt === null ? [offset] : []))
      if (missing.length === 0) break
      await sleep(delay)
      if (!live()) break
      let again: UpstreamReceipt[]
      try {
        again = await fetchReceipts(missing.map((offset) => hashes[offset]!))
      } catch {
        break
      }
      missing.forEach((offset, position) => {
        receipts[offset] = again[position] ?? null
      })
    }
    return receipts
  }
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Chooses and reports the pending view's receipt source. `hydrate` always asks the upstream; `frames` never
 * does; `auto` asks it, and falls back to the frames alone once the upstream has shown that it has no
 * pre-confirmed receipts (an ordinary node), saying so in the log and in `/readyz`.
 */
export function createPendingSource({
  mode,
  state,
  fetchReceipts,
  execute = null,
  logger,
}: {
  mode: PendingSourceMode
  state: PendingState
  fetchReceipts: ((hashes: Hash[]) => Promise<UpstreamReceipt[]>) | null
  /** Receipts (with balances) from flashgate's own execution of the flashblocks, for `execute`. */
  execute?: { hydrate: Hydrate; status(): ExecutorStatus } | null
  logger: Logger
}) {
  let found = 0
  let unanswered = 0
  let upstreamAware: boolean | null = mode === 'hydrate' ? true : mode === 'frames' ? false : null
  let reprobe: NodeJS.Timeout | undefined

  const observed: Hydrate | null =
    fetchReceipts === null
      ? null
      : async (hashes, options) => {
          const receipts = await withRetries(fetchReceipts)(hashes, options)
          const had = receipts.filter((receipt) => receipt !== null).length
          found += had
          if (had === 0) unanswered++
          if (mode === 'auto' && upstreamAware === null) {
            if (found > 0) {
              upstreamAware = true
              logger.info('upstream is flashblocks-aware: pre-confirmed receipts, logs and balances are hydrated from it')
            } else if (unanswered >= UNAWARE_AFTER_FLASHBLOCKS) {
              upstreamAware = false
              state.setHydrate(null)
              logger.warn(
                { reprobeInMs: REPROBE_AFTER_MS },
                'upstream is not flashblocks-aware (it has no receipts for pre-confirmed transactions): pending serves transactions, nonces and attribution from the frames alone; no pending receipts or logs',
              )
              reprobe = setTimeout(() => {
                unanswered = 0
                upstreamAware = null
                state.setHydrate(observed)
              }, REPROBE_AFTER_MS)
              reprobe.unref()
            }
          }
          return receipts
        }

  if (mode === 'execute') {
    if (execute === null) throw new Error('--pending-source execute needs the executor')
    state.setHydrate(execute.hydrate)
    upstreamAware = false
  } else if (mode === 'frames' || observed === null) {
    state.setHydrate(null)
    upstreamAware = false
  } else state.setHydrate(observed)
  if (mode === 'auto')
    logger.info('pending source: auto (receipts from the feed where it sends them, else hydrated from the upstream if it is flashblocks-aware)')
  else logger.info({ mode }, 'pending source')

  return {
    stop() {
      clearTimeout(reprobe)
    },
    status(): { mode: PendingSourceMode; source: PendingSourceKind; upstreamAware: boolean | null; execution: ExecutorStatus | null } {
      const source: PendingSourceKind = state.feedSendsReceipts
        ? 'feed'
        : mode === 'execute'
          ? 'execute'
          : upstreamAware === null
            ? 'probing'
            : upstreamAware
              ? 'hydrate'
              : 'frames'
      return { mode, source, upstreamAware, execution: execute?.status() ?? null }
    },
  }
}

export type PendingSource = ReturnType<typeof createPendingSource>
