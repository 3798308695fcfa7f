import type { Address, Hash, Hex, RpcLog } from 'viem'
import { toQuantity } from '../codecs/index.js'
import { byteaToHex, type LogRow } from '../db/index.js'

/** `eth_getLogs` adds `blockTimestamp`, as reth and anvil do. */
export type Log = RpcLog & { blockTimestamp: `0x${string}` }

/** A log in `eth_getLogs` form whose block and position are known (sealed or pre-confirmed): no field null. */
export type PlacedLog = {
  address: Address
  topics: Hash[]
  data: Hex
  blockHash: Hash
  blockNumber: Hex
  blockTimestamp: Hex
  transactionHash: Hash
  transactionIndex: Hex
  logIndex: Hex
  removed: boolean
}

/**
 * A stored log's fields already in their JSON-RPC form, its topics in their columns: as `formatLog` converts
 * a row, or as Postgres writes them itself (`'0x' || encode(…, 'hex')`, `'0x' || to_hex(…)`: resolvers/logs.ts).
 */
export type HexLogFields = Omit<PlacedLog, 'topics' | 'removed'> & {
  topic0: Hash | null
  topic1: Hash | null
  topic2: Hash | null
  topic3: Hash | null
}

/** A log as nodes write it, from its fields in JSON-RPC form: the one place that gives a log its keys and their order. */
export function logFromHex(fields: HexLogFields): Log {
  const topics: Hash[] = []
  for (const topic of [fields.topic0, fields.topic1, fields.topic2, fields.topic3]) {
    if (topic === null) break
    topics.push(topic)
  }
  return {
    address: fields.address,
    topics: topics as Log['topics'],
    data: fields.data,
    blockHash: fields.blockHash,
    blockNumber: fields.blockNumber,
    blockTimestamp: fields.blockTimestamp,
    transactionHash: fields.transactionHash,
    transactionIndex: fields.transactionIndex,
    logIndex: fields.logIndex,
    removed: false,
  }
}

const optionalHex = (value: Uint8Array | null): Hash | null => (value === null ? null : (byteaToHex(value) as Hash))

/** A stored log as nodes write it (the ingester renders receipts' logs with it too: receipt.ts). */
export function formatLog(row: LogRow): Log {
  return logFromHex({
    address: byteaToHex(row.address) as Address,
    topic0: optionalHex(row.topic0),
    topic1: optionalHex(row.topic1),
    topic2: optionalHex(row.topic2),
    topic3: optionalHex(row.topic3),
    data: byteaToHex(row.data),
    blockHash: byteaToHex(row.blockHash) as Hash,
    blockNumber: toQuantity(row.blockNumber),
    blockTimestamp: toQuantity(row.blockTimestamp),
    transactionHash: byteaToHex(row.transactionHash) as Hash,
    transactionIndex: toQuantity(row.transactionIndex),
    logIndex: toQuantity(row.logIndex),
  })
}
