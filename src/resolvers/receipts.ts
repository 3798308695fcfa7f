import { deflateRawSync, inflateRawSync } from 'node:zlib'
import { sql } from 'drizzle-orm'
import type { Hash, RpcTransactionReceipt } from 'viem'
import type { BlockSelector } from '../codecs/index.js'
import { type Db, hexToBytea, schema } from '../db/index.js'
import type { AnswerCache } from './cache.js'
import type { ChainState } from './chain.js'
import { isPendingTag, type PendingView } from './pending.js'
import { RawJson } from './raw-json.js'
import { type ReceiptJsonRow, receiptJsonRows, renderReceipts } from './receipt-json.js'

const { blockReceipts, logs, receipts } = schema

/**
 * Receipts are answered as JSON text: a block's from `block_receipts` (rendered and deflated at ingest),
 * a transaction's built from its rows (receipt-json.ts). JSON-RPC writes the text as it is (the `…Json`
 * resolvers), GraphQL parses it (the object resolvers).
 */
export function createReceiptResolvers({
  db,
  chain,
  cache,
  pendingView,
}: { db: Db; chain: ChainState; cache: AnswerCache; pendingView: PendingView }) {
  /** https://github.com/ethereum/execution-apis (eth_getBlockReceipts); `null` for an unknown block. */
  async function getBlockReceiptsJson({ block }: { block: BlockSelector }): Promise<RawJson | null> {
    if (isPendingTag(block)) {
      const pending = await pendingReceipts()
      if (pending !== null) return RawJson.fromValue(pending)
    }
    const resolved = await chain.resolve(block)
    if (resolved.status !== 'known') return null
    // Cached deflated (~3 KB for a block of 160 logs instead of ~107 KB): the cache holds ~35 times more
    // blocks, and an inflate costs less than a database round trip.
    const deflated = await cache.remember(`receipts:${resolved.number}`, () => loadDeflatedReceipts(resolved.number), (answer) => answer.byteLength)
    return RawJson.fromBytes(inflateRawSync(deflated))
  }

  async function getBlockReceipts({ block }: { block: BlockSelector }): Promise<RpcTransactionReceipt[] | null> {
    if (isPendingTag(block)) {
      const pending = await pendingReceipts()
      if (pending !== null) return pending
    }
    return (await getBlockReceiptsJson({ block }))?.parse() ?? null
  }

  /** The receipts of the newest pre-confirmed block, or `null` when `pending` answers as `latest`. */
  async function pendingReceipts(): Promise<RpcTransactionReceipt[] | null> {
    const newest = await pendingView.newest()
    if (newest === null) return null
    return newest.receipts.filter((receipt) => receipt !== null) as unknown as RpcTransactionReceipt[]
  }

  /** The block's answer as raw DEFLATE, in a buffer of its own (a pooled slice would keep its whole pool). */
  async function loadDeflatedReceipts(number: number): Promise<Buffer> {
    const [stored] = await db.query<{ deflated: Uint8Array }>(
      sql`select ${blockReceipts.deflated} as deflated from ${blockReceipts} where ${blockReceipts.blockNumber} = ${number}`,
    )
    if (stored !== undefined) {
      const own = Buffer.allocUnsafeSlow(stored.deflated.byteLength)
      own.set(stored.deflated)
      return own
    }
    // A block indexed before block_receipts existed: rendered from its receipt and log rows.
    const rows = await db.query<ReceiptJsonRow>(receiptJsonRows(sql`${receipts.blockNumber} = ${number}`, sql`${logs.blockNumber} = ${number}`))
    return deflateRawSync(`[${renderReceipts(rows).join(',')}]`)
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_gettransactionreceipt */
  async function getTransactionReceiptJson({ hash }: { hash: Hash }): Promise<RawJson | null> {
    const confirmed = await cache.remember(`receipt:${hash}`, () => loadTransactionReceipt(hash), (answer) => answer?.byteLength ?? 0)
    if (confirmed !== null) return confirmed
    const pending = await pendingView.receipt(hash)
    return pending === null ? null : RawJson.fromValue(pending)
  }

  async function getTransactionReceipt({ hash }: { hash: Hash }): Promise<RpcTransactionReceipt | null> {
    return (await getTransactionReceiptJson({ hash }))?.parse() ?? null
  }

  async function loadTransactionReceipt(hash: Hash): Promise<RawJson | null> {
    const key = hexToBytea(hash)
    const receipt = sql`${receipts.transactionHash} = ${key}`
    // The receipt's own logs, found through the receipt's block and index (logs are keyed by block).
    const receiptLogs = sql`(${logs.blockNumber}, ${logs.transactionIndex}) = (select ${receipts.blockNumber}, ${receipts.transactionIndex} from ${receipts} where ${receipt})`
    const rendered = renderReceipts(await db.query<ReceiptJsonRow>(receiptJsonRows(receipt, receiptLogs)))
    return rendered.length === 0 ? null : RawJson.fromText(rendered[0]!)
  }

  return { getBlockReceipts, getBlockReceiptsJson, getTransactionReceipt, getTransactionReceiptJson }
}
