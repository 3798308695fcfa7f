import DataLoader from 'dataloader'
import { BATCH_PER_TURN } from './batching.js'
import { eq, sql } from 'drizzle-orm'
import type { Hash } from 'viem'
import type { DeflatedText } from '../codecs/deflated.js'
import type { BlockSelector } from '../codecs/index.js'
import { arrayLiteral, hexToBytea, renderStatement, schema } from '../db/index.js'
import type { ReadContext } from './context.js'
import { RawJson } from './raw-json.js'
import { createBlockBodies } from './block-bodies.js'

const { blockReceipts } = schema

/**
 * The stored answers of some blocks, by number: one parameter, an array literal (the client sends no array
 * types), so that the statement's text is the same for any batch. Rendered once: it runs for every batch.
 */
const STORED_RECEIPTS = renderStatement(
  sql`select ${blockReceipts.blockNumber} as number, ${blockReceipts.deflated} as deflated, ${blockReceipts.plainLength} as "plainLength",
          ${blockReceipts.adler32} as adler32, ${blockReceipts.crc32} as crc32
        from ${blockReceipts} where ${blockReceipts.blockNumber} = any(${''}::bigint[])`,
)

type StoredBlockReceipts = {
  number: number
  deflated: Uint8Array
  plainLength: number | null
  adler32: string | number | null
  crc32: string | number | null
}

/**
 * Receipts are answered as JSON text (`RawJson`) from `block_receipts` (rendered and deflated at ingest): a
 * block's stream as it is, a transaction's from the stream's segment that holds it (block-bodies.ts).
 * JSON-RPC writes the text as it is; GraphQL and the send path parse it.
 */
/** `eth_getBlockReceipts`: a block by number, tag or hash. */
export type GetBlockReceiptsParameters = { block: BlockSelector }
/** `eth_getTransactionReceipt`: a transaction by hash. */
export type TransactionReceiptLookup = { hash: Hash }

export function createReceiptResolvers({ db, chain, cache, pendingView, history }: ReadContext) {
  const bodies = createBlockBodies({ db })

  /** https://github.com/ethereum/execution-apis (eth_getBlockReceipts); `null` for an unknown block. */
  async function getBlockReceipts({ block }: GetBlockReceiptsParameters): Promise<RawJson | null> {
    const argument = await pendingView.resolve(block)
    if (argument.kind === 'pending') return RawJson.fromValue(pendingView.receiptsOf(argument.block))
    const resolved = await chain.resolve(argument.selector)
    if (resolved.status === 'beforeIndex') {
      const older = await history.blockReceipts(resolved.number)
      return older === null ? null : RawJson.fromValue(older)
    }
    if (resolved.status === 'unknownHash' && argument.selector.kind === 'hash') {
      const block = await history.blockByHash(argument.selector.hash, false)
      const older = block === null ? null : await history.blockReceipts(Number(block.number))
      return older === null ? null : RawJson.fromValue(older)
    }
    if (resolved.status !== 'known') return null
    // Cached deflated (~3 KB for a block of 160 logs instead of ~107 KB): the cache holds ~35 times more
    // blocks, and an inflate costs less than a database round trip. The answer inflates only when read:
    // a client accepting `deflate` gets the stream as it is.
    const deflated = await cache.remember(
      `receipts:${resolved.number}`,
      () => loadDeflatedReceipts(resolved.number),
      (answer) => answer.stream.byteLength,
    )
    return RawJson.fromDeflated(deflated)
  }

  /**
   * Stored answers of the blocks asked for at the same moment (one event-loop turn), in one query: under
   * concurrent load a round trip and a statement serve several requests. Nothing is kept between batches
   * (that is the answer cache's job, and `--answer-cache-mb 0` must read the database each time).
   */
  const storedReceipts = new DataLoader<number, StoredBlockReceipts | undefined>(async (numbers) => {
    if (!numbers.every(Number.isSafeInteger)) throw new TypeError('block numbers must be integers')
    const rows = await db.query<StoredBlockReceipts>(STORED_RECEIPTS.withParameters(arrayLiteral(new Set(numbers))))
    const byNumber = new Map(rows.map((row) => [Number(row.number), row]))
    return numbers.map((number) => byNumber.get(number))
  }, BATCH_PER_TURN)

  /**
   * The block's answer as an open DEFLATE stream (codecs/deflated.ts), in a buffer of its own (a pooled slice
   * would keep its whole pool). Every indexed block has one: the ingester writes it with the block, and
   * `upgradeStorage` (db/upgrade.ts) rendered those of indexes written before.
   */
  async function loadDeflatedReceipts(number: number): Promise<DeflatedText> {
    const stored = await storedReceipts.load(number)
    if (stored === undefined || stored.plainLength === null || stored.adler32 === null)
      throw new Error(`block ${number} is indexed but its receipts are not stored; restart flashgate to finish upgrading the index`)
    const own = Buffer.allocUnsafeSlow(stored.deflated.byteLength)
    own.set(stored.deflated)
    const deflated: DeflatedText = { stream: own, length: stored.plainLength, adler32: Number(stored.adler32) }
    if (stored.crc32 !== null) deflated.crc32 = Number(stored.crc32)
    return deflated
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_gettransactionreceipt */
  async function getTransactionReceipt({ hash }: TransactionReceiptLookup): Promise<RawJson | null> {
    const confirmed = await cache.remember(
      `receipt:${hash}`,
      () => loadTransactionReceipt(hash),
      (answer) => answer?.byteLength ?? 0,
    )
    if (confirmed !== null) return confirmed
    const pending = await pendingView.receipt(hash)
    if (pending !== null) return RawJson.fromValue(pending)
    // Its block may have sealed while we looked: the index commits a block before the pending view lets go of it.
    const sealed = await loadTransactionReceipt(hash)
    if (sealed !== null) return sealed
    const older = await history.receipt(hash)
    return older === null ? null : RawJson.fromValue(older)
  }

  async function loadTransactionReceipt(hash: Hash): Promise<RawJson | null> {
    const [found] = await bodies.receiptsWhere(eq(schema.transactions.hash, hexToBytea(hash)))
    return found === undefined ? null : RawJson.fromValue(found.item)
  }

  return { getBlockReceipts, getTransactionReceipt }
}
