import { asc, between } from 'drizzle-orm'
import type { Hash } from 'viem'
import { byteaToHex } from './bytes.js'
import * as schema from './schema.js'
import type { DbSession } from './session.js'

/** The indexed blocks numbered `from` to `to` (both included), with their hashes, in order. */
export async function blockHashesBetween(db: Pick<DbSession, 'drizzle'>, from: number, to: number): Promise<{ number: number; hash: Hash }[]> {
  if (from > to) return []
  const rows = await db.drizzle
    .select({ number: schema.blocks.number, hash: schema.blocks.hash })
    .from(schema.blocks)
    .where(between(schema.blocks.number, from, to))
    .orderBy(asc(schema.blocks.number))
  return rows.map((row) => ({ number: row.number, hash: byteaToHex(row.hash) as Hash }))
}
