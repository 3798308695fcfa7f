import { getTableName, type SQL, sql } from 'drizzle-orm'
import type { AnyPgColumn } from 'drizzle-orm/pg-core'
import type { Hex } from 'viem'
import { byteaArrayLiteral, hexToBytea } from './bytes.js'

/**
 * The `logs` indexes (migration 0011) are keyed on 8 bytes of a log's address and topic0, not on all 20 and
 * 32: an entry of the (address, topic0, block) index takes 40 bytes instead of 72. Measured: on 1-2M rows
 * the two indexes took 33-43% less space and writes were 2-17% faster (two A/B runs); on 10.1M Base-shaped
 * logs, 67 -> 40 and 17 -> 13 bytes per log. 8 bytes tell values apart nearly as well as the whole (any two
 * share them by a chance of 1 in 2^64), and every query names the whole value beside its key, so a shared
 * key costs a row read, never a wrong answer. A contract may emit a topic0 sharing a hot event's key on
 * purpose, but it could as well emit that event's own topic0: the rows a query reads are no more than before.
 *
 * The address's key is its *last* 8 bytes: the first are shared by vanity addresses with leading zeros
 * (EntryPoint, Permit2, Seaport) and by the OP Stack's predeploys (0x4200…0006 is Base's WETH). A topic0 is a
 * hash: its first 8 bytes.
 *
 * Since migration 0012, topic1 and topic2 are keyed too, on their *last* 8 bytes: they are most often an
 * address padded to 32 bytes (a Transfer's `from` and `to`, a swap's sender and recipient), whose first 12
 * bytes are zeros. "A token's Transfers to this wallet" (topics `[Transfer, null, wallet]`) is what a wallet
 * asks for its history; without a key on topic2 it read every Transfer of the token in the range and kept
 * those to the wallet. topic3 (an ERC-721 token id) is not keyed.
 *
 * The expressions are written exactly as the indexes are, literals and all, so that the planner matches them
 * to the indexes (a bind parameter for the offset would not match).
 */
export const LOG_INDEX_KEYS = {
  /** `logs_address_topic0_idx`: an address with topic0, over a block range. */
  address_topic0_idx: 'substr(address, 13, 8), substr(topic0, 1, 8), block_number',
  /** `logs_topic0_idx`: a topic0 alone, over a block range. */
  topic0_idx: 'substr(topic0, 1, 8), block_number',
  /** `logs_topic1_idx`: a topic1 (a sender, an owner), over a block range. */
  topic1_idx: 'substr(topic1, 25, 8), block_number',
  /** `logs_topic2_idx`: a topic2 (a recipient, a spender), over a block range. */
  topic2_idx: 'substr(topic2, 25, 8), block_number',
} as const

/** The key of an address (0x + 40 hex digits): its last 8 bytes. */
export function addressKey(address: Hex): Uint8Array {
  return hexToBytea(`0x${address.slice(-16)}`)
}

/** The key of a topic (0x + 64 hex digits): its first 8 bytes. */
export function topic0Key(topic: Hex): Uint8Array {
  return hexToBytea(`0x${topic.slice(2, 18)}`)
}

/** The key of a topic1 or topic2 (0x + 64 hex digits): its last 8 bytes (an address's, when it is one). */
export function topicTailKey(topic: Hex): Uint8Array {
  return hexToBytea(`0x${topic.slice(-16)}`)
}

/**
 * Takes a bind parameter's value and answers its placeholder in the statement's text (`$1`, `$2`…). The
 * conditions below are written as text with such placeholders: `eth_getLogs` builds its statement from them
 * per call (resolvers/logs.ts), where building it from drizzle's SQL objects cost more of the gateway's time
 * than Postgres took to answer a one-block filter. `toSql` turns one into drizzle's SQL for everything else.
 */
export type Param = (value: unknown) => string

/** A column of `logs` (or of a table with its columns) as a condition names it: quoted, qualified when drizzle's. */
type ColumnName = AnyPgColumn | string

function columnText(column: ColumnName): string {
  return typeof column === 'string' ? column : `"${getTableName(column.table)}"."${column.name}"`
}

/** `expression` equal to one of `values`: one bind parameter for the whole list (a `bytea[]` literal), never one per value. */
function anyOf(param: Param, expression: string, values: Uint8Array[]): string {
  if (values.length === 1) return `${expression} = ${param(values[0]!)}`
  return `${expression} = any(${param(byteaArrayLiteral(values))}::bytea[])`
}

/** As text: a log's `column` is one of `values` (lower-case hex), by the value alone, for the columns no index keys. */
export function columnIsAnyOfText(param: Param, column: ColumnName, values: Hex[]): string {
  return anyOf(param, columnText(column), values.map(hexToBytea))
}

/** As text: a log's address is one of `addresses`, by its key (the index) and by the whole address. */
export function logAddressIsAnyOfText(param: Param, address: ColumnName, addresses: Hex[]): string {
  const column = columnText(address)
  return `${anyOf(param, `substr(${column}, 13, 8)`, unique(addresses.map(addressKey)))} and ${anyOf(param, column, addresses.map(hexToBytea))}`
}

/** As text: a log's topic0 is one of `topics`, by its key (the index) and by the whole topic. */
export function logTopic0IsAnyOfText(param: Param, topic0: ColumnName, topics: Hex[]): string {
  const column = columnText(topic0)
  return `${anyOf(param, `substr(${column}, 1, 8)`, unique(topics.map(topic0Key)))} and ${anyOf(param, column, topics.map(hexToBytea))}`
}

/** The keyed topics after topic0 (topic1 and topic2, by their tails: `logs_topic1_idx`, `logs_topic2_idx`). */
export const TAIL_KEYED_TOPICS: ReadonlySet<number> = new Set([1, 2])

/** As text: a log's topic1 or topic2 (`column`) is one of `topics`, by its key (the index) and by the whole topic. */
export function logTopicTailIsAnyOfText(param: Param, topic: ColumnName, topics: Hex[]): string {
  const column = columnText(topic)
  return `${anyOf(param, `substr(${column}, 25, 8)`, unique(topics.map(topicTailKey)))} and ${anyOf(param, column, topics.map(hexToBytea))}`
}

/** Marks a parameter's place in a condition's text until `toSql` splits it there (NUL appears in no SQL written here). */
const PARAM_MARK = '\u0000'

/** A condition written as text (the functions above) as drizzle's SQL, its values as bind parameters. */
export function toSql(build: (param: Param) => string): SQL {
  const values: unknown[] = []
  const text = build((value) => `${PARAM_MARK}${values.push(value) - 1}${PARAM_MARK}`)
  return sql.join(
    text.split(PARAM_MARK).map((part, index) => (index % 2 === 0 ? sql.raw(part) : sql`${values[Number(part)]}`)),
    sql.raw(''),
  )
}

/** A log's `column` is one of `values` (lower-case hex), by the value alone: for the columns no index keys. */
export function columnIsAnyOf(column: AnyPgColumn, values: Hex[]): SQL {
  return toSql((param) => columnIsAnyOfText(param, column, values))
}

/** A log's address is one of `addresses`: by its key (the index) and by the whole address. */
export function logAddressIsAnyOf(address: AnyPgColumn, addresses: Hex[]): SQL {
  return toSql((param) => logAddressIsAnyOfText(param, address, addresses))
}

/** A log's topic0 is one of `topics`: by its key (the index) and by the whole topic. */
export function logTopic0IsAnyOf(topic0: AnyPgColumn, topics: Hex[]): SQL {
  return toSql((param) => logTopic0IsAnyOfText(param, topic0, topics))
}

/** A log's topic1 or topic2 (`column`) is one of `topics`: by its key (the index) and by the whole topic. */
export function logTopicTailIsAnyOf(column: AnyPgColumn, topics: Hex[]): SQL {
  return toSql((param) => logTopicTailIsAnyOfText(param, column, topics))
}

/** Keys once each (two values may share one). */
function unique(keys: Uint8Array[]): Uint8Array[] {
  const seen = new Map(keys.map((key) => [Buffer.from(key).toString('hex'), key]))
  return [...seen.values()]
}
