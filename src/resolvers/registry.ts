import { asc, gt, sql } from 'drizzle-orm'
import { type Address, getAddress, type Hex } from 'viem'
import { createRegistryFold, isRegistryCode, type RegistryEntry, type RegistryEventKind } from '../attribution/registry.js'
import { byteaToHex, type Db, schema } from '../db/index.js'
import type { ChainState, ChainView } from './chain.js'

/** What the on-chain Builder Codes registry says of a code, as REST and GraphQL show it. */
export type RegistryStatus = {
  /** The registry followed. */
  registry: Address
  /** Whether the code can be registered there at all: 1 to 32 of `[0-9a-z_]`. */
  validCode: boolean
  registered: boolean
  /** The token id (the code, left-aligned in 32 bytes); `null` when not registered. */
  tokenId: Hex | null
  registeredBlock: number | null
  /** Block timestamp (unix seconds) of the registration. */
  registeredAt: number | null
  owner: Address | null
  payoutAddress: Address | null
  /** `false` while the registry's events below the index are still being read from the upstream. */
  complete: boolean
}

/**
 * Each code's state in the on-chain registry, folded from `builder_code_registry_events` up to the indexed
 * head. The fold is kept and extended by the events of new blocks; a reorg, or a change of registry or of
 * what is read below the index, starts it over.
 */
export function createRegistryReader({ db, chain }: { db: Db; chain: ChainState }) {
  let folded: { key: string; through: number; fold: ReturnType<typeof createRegistryFold> } | null = null
  let inFlight: Promise<ReturnType<typeof createRegistryFold>> | null = null

  async function refresh(view: ChainView): Promise<ReturnType<typeof createRegistryFold>> {
    const head = view.head?.number ?? -1
    const key = JSON.stringify([view.reorgEpoch, view.registry])
    if (folded === null || folded.key !== key) folded = { key, through: -1, fold: createRegistryFold() }
    const current = folded
    if (current.through >= head) return current.fold
    const { builderCodeRegistryEvents: events } = schema
    const rows = await db.drizzle
      .select()
      .from(events)
      .where(sql`${gt(events.blockNumber, current.through)} and ${events.blockNumber} <= ${head}`)
      .orderBy(asc(events.blockNumber), asc(events.logIndex))
    for (const row of rows)
      current.fold.apply({
        blockNumber: row.blockNumber,
        logIndex: row.logIndex,
        blockTimestamp: row.blockTimestamp,
        tokenId: byteaToHex(row.tokenId),
        kind: row.kind as RegistryEventKind,
        code: row.code,
        account: row.account === null ? null : getAddress(byteaToHex(row.account)),
      })
    current.through = Math.max(current.through, head)
    return current.fold
  }

  /** The fold at the current head; concurrent callers share one read. */
  async function entries(): Promise<{ view: ChainView; entries: ReadonlyMap<string, RegistryEntry> | null }> {
    const view = await chain.view()
    if (view.registry === null) return { view, entries: null }
    while (inFlight !== null) await inFlight.catch(() => {})
    const reading = refresh(view)
    inFlight = reading
    try {
      return { view, entries: (await reading).entries }
    } finally {
      if (inFlight === reading) inFlight = null
    }
  }

  function statusOf(view: ChainView, known: ReadonlyMap<string, RegistryEntry>, code: string): RegistryStatus {
    const entry = known.get(code)
    return {
      registry: getAddress(view.registry!.address),
      validCode: isRegistryCode(code),
      registered: entry !== undefined,
      tokenId: entry?.tokenId ?? null,
      registeredBlock: entry?.registeredBlock ?? null,
      registeredAt: entry?.registeredAt ?? null,
      owner: entry?.owner ?? null,
      payoutAddress: entry?.payoutAddress ?? null,
      complete: view.registry!.next >= view.registry!.below,
    }
  }

  return {
    /** The registry's word on each of `codes`; `null` when no registry is followed. */
    async registryStatuses(codes: readonly string[]): Promise<Map<string, RegistryStatus> | null> {
      const { view, entries: known } = await entries()
      if (known === null) return null
      return new Map(codes.map((code) => [code, statusOf(view, known, code)]))
    },
  }
}

export type RegistryReader = ReturnType<typeof createRegistryReader>
