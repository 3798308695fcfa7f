import { type SQL, sql } from 'drizzle-orm'
import type { PgColumn } from 'drizzle-orm/pg-core'
import { inflateAny } from '../codecs/deflated.js'
import { BODY_DEFLATE_LEVEL, deflateSegmented } from '../codecs/segmented.js'
import { arrayLiteral } from './bytes.js'
import * as schema from './schema.js'
import { SYNC_KEYS } from './schema.js'
import { type DbConfig, type DbSession, rowsOf } from './session.js'

const { blockReceipts, blockTransactions, blocks, logs, receipts, syncState, transactions } = schema

/**
 * The index's storage of transaction and receipt bodies, brought to today's layout once, after the
 * migrations and before anything reads it. Indexes written before migration 0009 kept a JSON body per
 * transaction (`transactions.body`) and per receipt (`receipts`); blocks indexed before migration 0003 have
 * no stored receipts answer, and those before 0004 a finished stream without its length and checksum. Each
 * block's bodies now live in `block_transactions` and `block_receipts`, in segments (codecs/segmented.ts).
 * The conversion goes a batch of blocks at a time, each batch in one transaction, so an interrupted upgrade
 * resumes where it stopped; when it is done, `sync_state` says so and later starts skip it.
 */

/** The layout this code reads: bodies per block, in segments. */
export const STORAGE_VERSION = 2
const BATCH_BLOCKS = 500
/** Serialises the conversion between processes that share one Postgres ("flup"). */
const UPGRADE_LOCK_ID = 0x666c7570

export type UpgradeProgress = NonNullable<DbConfig['upgradeProgress']>

export async function upgradeStorage(db: DbSession, progress: UpgradeProgress = () => {}): Promise<void> {
  const [marker] = await db.query<{ value: unknown }>(
    sql`select ${syncState.value} as value from ${syncState} where ${syncState.key} = ${SYNC_KEYS.storageVersion}`,
  )
  if (marker !== undefined && Number(marker.value) >= STORAGE_VERSION) return
  const [range] = await db.query<{ first: string | null; last: string | null }>(
    sql`select min(${blocks.number})::text as first, max(${blocks.number})::text as last from ${blocks}`,
  )
  if (range?.first != null && range.last != null) {
    const last = Number(range.last)
    for (let from = Number(range.first); from <= last; from += BATCH_BLOCKS) {
      const to = Math.min(last, from + BATCH_BLOCKS - 1)
      await db.transaction(async (tx) => {
        // Processes starting together take turns; a batch another one converted has nothing left to do.
        await tx.execute(sql`select pg_advisory_xact_lock(${UPGRADE_LOCK_ID})`)
        const session = { query: <row extends Record<string, unknown>>(statement: SQL) => tx.execute(statement).then(rowsOf<row>) }
        await upgradeTransactions(session, from, to)
        await upgradeReceipts(session, from, to)
      })
      progress({ fromBlock: from, toBlock: to, lastBlock: last })
    }
  }
  await db.query(sql`insert into ${syncState} (${sql.identifier('key')}, ${sql.identifier('value')}) values (${SYNC_KEYS.storageVersion}, ${JSON.stringify(STORAGE_VERSION)}::jsonb)
    on conflict (${sql.identifier('key')}) do update set value = excluded.value`)
}

type Session = { query<row extends Record<string, unknown>>(statement: SQL): Promise<row[]> }

async function upgradeTransactions(session: Session, from: number, to: number): Promise<void> {
  const missing = await session.query<{ number: string }>(sql`
    select ${blocks.number}::text as number from ${blocks} left join ${blockTransactions} on ${blockTransactions.blockNumber} = ${blocks.number}
    where ${blocks.number} between ${from} and ${to} and ${blockTransactions.blockNumber} is null`)
  if (missing.length === 0) return
  const rows = await session.query<{ block_number: string; body: string }>(sql`
    select ${transactions.blockNumber}::text as block_number, ${transactions.body}::text as body from ${transactions}
    where ${transactions.blockNumber} between ${from} and ${to} and ${transactions.body} is not null
    order by ${transactions.blockNumber}, ${transactions.transactionIndex}`)
  const bodies = groupByBlock(rows, (row) => row.body)
  // Every block gets its row, an empty one's `[]` too, as the ingester writes them.
  for (const { number } of missing) {
    const { stream, length, adler32, offsets } = deflateSegmented(bodies.get(Number(number)) ?? [], BODY_DEFLATE_LEVEL)
    await session.query(sql`insert into ${blockTransactions} (block_number, deflated, plain_length, adler32, segment_offsets)
      values (${Number(number)}, ${stream}, ${length}, ${adler32}, ${arrayLiteral(offsets)}::int[])`)
  }
  await session.query(
    sql`update ${transactions} set body = null where ${transactions.blockNumber} between ${from} and ${to} and ${transactions.body} is not null`,
  )
}

async function upgradeReceipts(session: Session, from: number, to: number): Promise<void> {
  // Blocks whose receipts answer is missing (before 0003) or a finished stream without length (before 0004).
  const missing = await session.query<{ number: string; deflated: Uint8Array | null }>(sql`
    select ${blocks.number}::text as number, ${blockReceipts.deflated} as deflated from ${blocks}
    left join ${blockReceipts} on ${blockReceipts.blockNumber} = ${blocks.number}
    where ${blocks.number} between ${from} and ${to} and (${blockReceipts.blockNumber} is null or ${blockReceipts.plainLength} is null)`)
  for (const { number, deflated } of missing) {
    const items =
      deflated === null
        ? renderReceipts(
            await session.query<ReceiptJsonRow>(
              receiptJsonRows(sql`${receipts.blockNumber} = ${Number(number)}`, sql`${logs.blockNumber} = ${Number(number)}`),
            ),
          )
        : (JSON.parse(inflateAny(deflated).toString('utf8')) as unknown[]).map((receipt) => JSON.stringify(receipt))
    const { stream, length, adler32, crc32, offsets } = deflateSegmented(items, BODY_DEFLATE_LEVEL)
    await session.query(sql`insert into ${blockReceipts} (block_number, deflated, plain_length, adler32, crc32, segment_offsets)
      values (${Number(number)}, ${stream}, ${length}, ${adler32}, ${crc32}, ${arrayLiteral(offsets)}::int[])
      on conflict (block_number) do update set deflated = excluded.deflated, plain_length = excluded.plain_length,
        adler32 = excluded.adler32, crc32 = excluded.crc32, segment_offsets = excluded.segment_offsets`)
  }
  await session.query(sql`delete from ${receipts} where ${receipts.blockNumber} between ${from} and ${to}`)
}

function groupByBlock<row extends { block_number: string }>(rows: row[], item: (row: row) => string): Map<number, string[]> {
  const byBlock = new Map<number, string[]>()
  for (const row of rows) {
    const number = Number(row.block_number)
    const items = byBlock.get(number)
    if (items === undefined) byBlock.set(number, [item(row)])
    else items.push(item(row))
  }
  return byBlock
}

/**
 * Receipts of legacy rows as JSON text: the stored receipt (the upstream's JSON with `logs` emptied) and
 * its log rows, hex-encoded by Postgres and spliced, in the keys and order `formatLog` (resolvers/logs.ts)
 * writes a log. One row per receipt (`kind` 0) or log (`kind` 1).
 */
export type ReceiptJsonRow = {
  kind: number
  transaction_index: number
  log_index: number | null
  /** Receipt: the stored receipt as text. Log: its address. */
  a: string
  /** Receipt: its transaction hash. Log: its data. */
  b: string
  /** Receipt: the block's hash, number and timestamp, in hex and space-separated. Log: its topics, `","0x`-separated. */
  c: string
}

const hex = (column: PgColumn) => sql`encode(${column}, 'hex')`

/** The rows for the legacy receipts `receiptFilter` picks and the logs `logFilter` picks, in no particular order. */
export function receiptJsonRows(receiptFilter: SQL, logFilter: SQL): SQL {
  return sql`
    select 0 as kind, ${receipts.transactionIndex} as transaction_index, null::int as log_index, ${receipts.body}::text as a,
      ${hex(receipts.transactionHash)} as b,
      (select ${hex(blocks.hash)} || ' ' || to_hex(${blocks.number}) || ' ' || to_hex(${blocks.timestamp}) from ${blocks} where ${blocks.number} = ${receipts.blockNumber}) as c
    from ${receipts} where ${receiptFilter}
    union all
    select 1, ${logs.transactionIndex}, ${logs.logIndex}, ${hex(logs.address)}, ${hex(logs.data)},
      concat_ws('","0x', ${hex(logs.topic0)}, ${hex(logs.topic1)}, ${hex(logs.topic2)}, ${hex(logs.topic3)})
    from ${logs} where ${logFilter}`
}

const EMPTY_LOGS = '"logs":[]'
/** Offset of the `]` that closes the stored receipt's empty `logs`. */
const LOGS_CLOSE = EMPTY_LOGS.length - 1

const byLogIndex = (left: ReceiptJsonRow, right: ReceiptJsonRow) => left.log_index! - right.log_index!

/** The receipts of `rows` as JSON texts, by index, each with its logs back in its `logs` array. */
export function renderReceipts(rows: ReceiptJsonRow[]): string[] {
  const receiptRows = rows.filter((row) => row.kind === 0).sort((left, right) => left.transaction_index - right.transaction_index)
  const logRows = rows.filter((row) => row.kind === 1).sort(byLogIndex)
  const byIndex = new Map<number, { logTail: string; logs: string[] }>()
  for (const row of receiptRows) {
    const [blockHash, blockNumber, blockTimestamp] = row.c.split(' ')
    // What follows `data` in each of this receipt's logs, up to the log index.
    const logTail = `","blockHash":"0x${blockHash}","blockNumber":"0x${blockNumber}","blockTimestamp":"0x${blockTimestamp}","transactionHash":"0x${row.b}","transactionIndex":"0x${row.transaction_index.toString(16)}","logIndex":"0x`
    byIndex.set(row.transaction_index, { logTail, logs: [] })
  }
  for (const row of logRows) {
    const receipt = byIndex.get(row.transaction_index)
    if (receipt === undefined) continue
    // concat_ws skips null topics, which only ever trail the others.
    const topics = row.c === '' ? '' : `"0x${row.c}"`
    receipt.logs.push(`{"address":"0x${row.a}","topics":[${topics}],"data":"0x${row.b}${receipt.logTail}${row.log_index!.toString(16)}","removed":false}`)
  }
  return receiptRows.map((row) => {
    const body = row.a
    const logJsons = byIndex.get(row.transaction_index)!.logs
    if (logJsons.length === 0) return body
    const at = body.indexOf(EMPTY_LOGS)
    if (at !== -1) return `${body.slice(0, at + LOGS_CLOSE)}${logJsons.join(',')}${body.slice(at + LOGS_CLOSE)}`
    // A receipt stored without a `logs` key gets one at the end, as `{ ...body, logs }` would.
    return `${body.slice(0, -1)},"logs":[${logJsons.join(',')}]}`
  })
}
