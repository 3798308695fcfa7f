import type { Address, Hex } from 'viem'
import { REGISTRY_ADDRESSES, registryEvents, REGISTRY_TOPICS } from '../attribution/registry.js'
import { toQuantity } from '../codecs/index.js'
import type { Logger } from '../logger.js'
import type { Upstream } from '../upstream/index.js'
import { registryEventRows } from './block-data.js'
import type { RegistryProgress, Store } from './store.js'

/** `default`: the registry Base runs on this chain (src/attribution/registry.ts), if any; `null`: none. */
export type RegistrySetting = Address | null | 'default'

/** The first `eth_getLogs` span tried below the index; it halves on refusal and doubles again on success. */
const FIRST_SPAN_BLOCKS = 1_000_000
/** How long one backfill turn may take before the ingester goes back to new blocks. */
const TURN_MS = 1_000
/** After the upstream refused even a one-block span, wait this long before trying again. */
const REFUSED_RETRY_MS = 30_000

type UpstreamLog = { address: string; topics: Hex[]; data: Hex; logIndex: Hex; blockNumber: Hex; blockTimestamp?: Hex }

/**
 * Keeps `builder_code_registry_events` complete for the registry in use. New blocks bring their events
 * with them (ingest/block-data.ts); when the registry is first set, or changes, its events are taken from
 * the indexed logs, and those of the blocks below the index are read from the upstream a span at a time,
 * in turns between the ingester's batches, progress kept in `sync_state` (a restart resumes).
 */
export function createRegistryFollower({ setting, upstream, logger }: { setting: RegistrySetting; upstream: Upstream; logger: Logger }) {
  let address: Address | null = null
  let progress: RegistryProgress | null = null
  let span = FIRST_SPAN_BLOCKS
  let retryAt = 0

  /** Resolves the setting for `chainId` and starts over when it differs from what the database holds. */
  async function start(store: Store, chainId: number, stored: unknown, firstBlock: number) {
    address = setting === 'default' ? (REGISTRY_ADDRESSES[chainId] ?? null) : setting
    address = address === null ? null : (address.toLowerCase() as Address)
    const held = stored as RegistryProgress | null | undefined
    if ((held?.address ?? null) === address && held !== undefined) {
      progress = held
      return
    }
    const below = (await store.lowestBlock()) ?? firstBlock
    await store.setRegistry(address, below)
    progress = address === null ? null : { address, below, next: 0 }
    if (address !== null) logger.info({ registry: address, below }, 'builder-code registry: following; reading its events below the index from the upstream')
  }

  async function logsBetween(from: number, to: number): Promise<UpstreamLog[]> {
    return upstream.request<UpstreamLog[]>('eth_getLogs', [
      {
        address,
        fromBlock: toQuantity(from),
        toBlock: toQuantity(to),
        topics: [[REGISTRY_TOPICS.transfer, REGISTRY_TOPICS.registered, REGISTRY_TOPICS.payout]],
      },
    ])
  }

  async function timestamps(logs: UpstreamLog[]): Promise<Map<number, number>> {
    const found = new Map<number, number>()
    for (const log of logs) if (log.blockTimestamp !== undefined) found.set(Number(log.blockNumber), Number(log.blockTimestamp))
    const missing = [...new Set(logs.map((log) => Number(log.blockNumber)))].filter((number) => !found.has(number))
    for (const number of missing) {
      const block = await upstream.request<{ timestamp: Hex } | null>('eth_getBlockByNumber', [toQuantity(number), false])
      if (block === null) throw new Error(`the upstream has no block ${number}`)
      found.set(number, Number(block.timestamp))
    }
    return found
  }

  /** One turn of reading below the index; returns true while more remains. */
  async function backfill(store: Store): Promise<boolean> {
    if (address === null || progress === null || progress.next >= progress.below) return false
    if (Date.now() < retryAt) return true
    const deadline = Date.now() + TURN_MS
    while (progress.next < progress.below && Date.now() < deadline) {
      const from = progress.next
      const to = Math.min(progress.below - 1, from + span - 1)
      let logs: UpstreamLog[]
      try {
        logs = await logsBetween(from, to)
      } catch (error) {
        // Providers cap the span or the results of eth_getLogs in ways of their own: ask for less.
        if (span > 1) {
          span = Math.max(1, Math.floor(span / 2))
          continue
        }
        retryAt = Date.now() + REFUSED_RETRY_MS
        logger.warn({ err: error, from }, 'builder-code registry: the upstream refuses its logs; trying again later')
        return true
      }
      const byTimestamp = await timestamps(logs)
      const rows = registryEventRows(
        logs
          .sort((a, b) => Number(a.blockNumber) - Number(b.blockNumber) || Number(a.logIndex) - Number(b.logIndex))
          .flatMap((log) => registryEvents(address!, { number: Number(log.blockNumber), timestamp: byTimestamp.get(Number(log.blockNumber))! }, [log])),
      )
      const next: RegistryProgress = { ...progress, next: to + 1 }
      await store.addRegistryEvents(rows, next)
      progress = next
      span = Math.min(span * 2, FIRST_SPAN_BLOCKS)
    }
    if (progress.next >= progress.below) logger.info({ registry: address, events: 'complete' }, 'builder-code registry: read below the index')
    return progress.next < progress.below
  }

  return {
    start,
    backfill,
    /** The registry in use, once started. */
    address: () => address,
  }
}
