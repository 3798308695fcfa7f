import { LRUCache } from 'lru-cache'
import { deflateOpen } from '../codecs/deflated.js'
import { COMPRESS_MIN_BYTES } from '../http/compress.js'
import type { AnswerCache } from '../resolvers/cache.js'
import type { IndexedRange } from '../resolvers/chain.js'
import { RawJson } from '../resolvers/raw-json.js'

/**
 * A block a call's answer is fixed by: an explicit number, `latest` (the head the resolvers see now), or
 * `indexed`: a block the index holds, named by its hash, whose number is not known before the call runs. Such
 * an answer is given again while the index still starts where it did (retention has dropped nothing since).
 */
export type Pin = number | 'latest' | 'indexed'

/**
 * The blocks a call's answer is fixed by, read from its raw params: `[]` for an answer no block changes
 * (the chain id), `['indexed']` for logs by a block hash (read from the index alone, and emptied from the memo
 * by a reorg as every other answer is), `null` when it is not fixed (`pending`, `safe`, `finalized`, a missing
 * block argument). Raw params are not validated yet: anything unexpected is `null`.
 */
export type Pins = (params: unknown[]) => Pin[] | null

/** Answers larger than this are not memoised: one would push out thousands of small ones. */
const MAX_ENTRY_BYTES = 256 * 1024
/**
 * A kept result at least this large is also deflated (once, when it is first asked for again), so that a
 * client accepting `deflate` or `gzip` gets it spliced into its answer as it is (jsonrpc/serialize.ts) instead of
 * compressed again per request. Not before: an indexer's ranges, each asked once, would pay for nothing.
 */
const DEFLATE_FROM_BYTES = COMPRESS_MIN_BYTES
const DEFLATE_LEVEL = 6

/** A hex quantity small enough to be an exact JS number; anything else pins nothing. */
const QUANTITY = /^0x[0-9a-fA-F]{1,13}$/

/** The block a raw block argument pins: an explicit number or `latest`; `null` for anything else (another tag, a hash, an object, absent). */
export function pinOf(argument: unknown): Pin | null {
  if (argument === 'latest') return 'latest'
  return typeof argument === 'string' && QUANTITY.test(argument) ? Number.parseInt(argument.slice(2), 16) : null
}

/** Pins for a method whose block argument is the param at `position`. */
export function pinAt(position: number): Pins {
  return (params) => {
    const pin = pinOf(params[position])
    return pin === null ? null : [pin]
  }
}

/**
 * The memo key of a call, or `null` for params too deeply nested to write back as JSON (`JSON.parse` takes
 * any depth, `JSON.stringify` recurses): such a call runs, and its params are refused as they should be.
 */
function keyOf(method: string, params: unknown[]): string | null {
  try {
    return `${method}\u0000${JSON.stringify(params)}`
  } catch {
    return null
  }
}

/** The same JSON text, also deflated when it is large enough for answers to be compressed (and is not yet). */
function withDeflated(text: RawJson): RawJson {
  if (text.deflated !== undefined || text.byteLength < DEFLATE_FROM_BYTES) return text
  return RawJson.withDeflated(text.bytes, deflateOpen(text.bytes, DEFLATE_LEVEL))
}

/**
 * A call under way that may be memoised: its key, the memo's generation when it started, the head its `latest`
 * meant, and the index's first block when it named a block by hash (else `null`).
 */
export type MemoTicket = { key: string; generation: number; head: number | null; first: number | null }

/**
 * Results smaller than this are kept as the values they are (shared, never changed): written per answer, a
 * short string or object costs less than splicing bytes in, and goes out in one write with the headers.
 */
const TEXT_FROM_BYTES = 512

/**
 * A kept result, with the head it was computed at when it named `latest` (else `null`: it holds at any head):
 * JSON text when it is large, else the value itself; `bytes` is its JSON's size, for the memory bound.
 */
type Entry = { result: unknown; bytes: number; head: number | null; first: number | null }

/**
 * Whole JSON-RPC results (as JSON text when large) of calls whose answer is fixed: every block they name is an explicit
 * number inside the indexed range when the call starts (so already committed, and not `pending`), or
 * `latest`, kept with the head it meant and given again only while that is still the head the resolvers see.
 * A repeated call (a wallet polling a balance, an indexer re-reading a range) then skips validation, the
 * resolvers and serialisation: its result is the stored text, copied into the answer.
 *
 * The key is the method and its params as sent; ids are not part of it. Only results are kept, never errors
 * or `null` (a block not indexed yet may be a moment later). A reorg clears it with the answer cache (and a
 * call that began before the reorg is not kept after it); a memo per endpoint policy, since log limits differ.
 * Off when the answer cache is off (`--answer-cache-mb 0`).
 */
export function createCallMemo({ cache, indexed, maxBytes }: { cache: AnswerCache; indexed: () => IndexedRange | null; maxBytes: number }) {
  const store =
    cache.enabled && maxBytes > 0 ? new LRUCache<string, Entry>({ maxSize: maxBytes, sizeCalculation: (entry, key) => entry.bytes + key.length }) : null
  let generation = 0
  const figures = { hits: 0, kept: 0 }
  cache.onClear(() => {
    generation++
    store?.clear()
  })

  return {
    /**
     * The ticket of a call whose answer would be fixed now (`pins` inside the indexed range), with the stored
     * result when there is one; `null` for a call that must run and not be kept.
     */
    lookup(method: string, params: unknown, pins: Pins | undefined): { ticket: MemoTicket; hit: unknown } | null {
      if (store === null || pins === undefined) return null
      const list = params === undefined || params === null ? [] : params
      if (!Array.isArray(list)) return null
      const range = indexed()
      const pinned = pins(list)
      if (range === null || pinned === null) return null
      let latest = false
      let byHash = false
      for (const pin of pinned) {
        if (pin === 'latest') latest = true
        else if (pin === 'indexed') byHash = true
        else if (pin > range.head || pin < range.first) return null
      }
      // `latest` only while the range is the resolvers' own view: else they would load a newer head.
      if (latest && !range.current) return null
      const head = latest ? range.head : null
      const first = byHash ? range.first : null
      const key = keyOf(method, list)
      if (key === null) return null
      const ticket: MemoTicket = { key, generation, head, first }
      const entry = store.get(key)
      if (entry === undefined || entry.head !== head || entry.first !== first) return { ticket, hit: undefined }
      figures.hits++
      if (!(entry.result instanceof RawJson)) return { ticket, hit: entry.result }
      const text = withDeflated(entry.result)
      if (text.heldBytes !== entry.bytes) {
        // A text now deflated too, or a stream kept alone (see `keep`) asked for again: given out, to be inflated
        // by a plain client's answer and kept so, it counts from now as the text it will hold. A stream whose
        // text is too large to keep is given as a copy, and stays a stream here.
        if (text === entry.result && text.heldBytes > MAX_ENTRY_BYTES) return { ticket, hit: RawJson.fromDeflated(text.deflated!) }
        store.set(key, { result: text, bytes: text.heldBytes, head, first })
      }
      return { ticket, hit: text }
    },
    /**
     * Keeps a call's result (a small one as it is, a larger one as JSON text), unless it is `null` or a reorg
     * came while it ran. Returns what to answer with: the result as it was kept, so that it is written to JSON
     * once. A text too large to keep is answered all the same: written again, a result of megabytes of logs
     * would cost a second `JSON.stringify` and a count of its UTF-8 bytes.
     */
    keep(ticket: MemoTicket, result: unknown): unknown {
      if (store === null || result === null || result === undefined || ticket.generation !== generation) return result
      const remember = (kept: unknown, bytes: number) => {
        if (bytes <= MAX_ENTRY_BYTES) {
          store.set(ticket.key, { result: kept, bytes, head: ticket.head, first: ticket.first })
          figures.kept++
        }
        return kept
      }
      if (result instanceof RawJson) {
        if (result.deflated === undefined || result.inflated) return remember(result, result.heldBytes)
        // A stream not inflated yet (a block's receipts) is kept as a copy of its own, which holds the stream
        // alone until it is asked for again (above); the answer given now is inflated for a plain client and
        // gone with it. Kept with its text, a scan of blocks each asked once would hold every answer it wrote
        // until a full garbage collection (held past young collections, ~107 KB each): 1.7x the CPU per
        // request of a read without the memo (846 against 436 us).
        remember(RawJson.fromDeflated(result.deflated), result.deflated.stream.length)
        return result
      }
      const json = JSON.stringify(result)
      if (json.length < TEXT_FROM_BYTES) return remember(result, json.length)
      const text = RawJson.fromText(json)
      return remember(text, text.heldBytes)
    },
    /** Calls answered from it and results kept since the start, and what it holds now (for `/metrics`). */
    figures: () => ({ ...figures, entries: store?.size ?? 0, bytes: store?.calculatedSize ?? 0 }),
  }
}

export type CallMemo = ReturnType<typeof createCallMemo>
