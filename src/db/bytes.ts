import type { Hex } from 'viem'

/** Hex at the edges, bytes in the database. Buffer is the fastest codec Node has for both directions. */
export function hexToBytea(value: Hex): Uint8Array {
  return Buffer.from(value.slice(2), 'hex')
}

export function byteaToHex(value: Uint8Array): Hex {
  const buffer = Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength)
  return `0x${buffer.toString('hex')}`
}

/**
 * A Postgres array literal (`{1,2}`, `{"a","b"}`) bound as one text parameter and cast in the statement
 * (`::bigint[]`, `::text[]`): the statement's text is the same however many values there are (prepared once),
 * and the client sends no array type. Strings are quoted, their quotes and backslashes escaped.
 * https://www.postgresql.org/docs/current/arrays.html#ARRAYS-IO
 */
export function arrayLiteral(values: Iterable<number | bigint | string>): string {
  const elements: string[] = []
  for (const value of values) elements.push(typeof value === 'string' ? `"${value.replace(/["\\]/g, '\\$&')}"` : String(value))
  return `{${elements.join(',')}}`
}

/** A `bytea[]` literal of `values` (elements in bytea's `\x` hex form), bound as one text parameter and cast `::bytea[]` (see `arrayLiteral`). */
export function byteaArrayLiteral(values: Iterable<Uint8Array>): string {
  const elements: string[] = []
  for (const value of values) elements.push(`\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')}`)
  return arrayLiteral(elements)
}
