import type { Hash, RpcLog } from 'viem'
import { toQuantity } from '../codecs/index.js'
import { byteaToHex, type LogRow } from '../db/index.js'

/** `eth_getLogs` adds `blockTimestamp`, as reth and anvil do. */
export type Log = RpcLog & { blockTimestamp: `0x${string}` }

/** A stored log as nodes write it (the ingester renders receipts' logs with it too: receipt.ts). */
export function formatLog(row: LogRow): Log {
  const topics: Hash[] = []
  for (const topic of [row.topic0, row.topic1, row.topic2, row.topic3]) {
    if (topic === null) break
    topics.push(byteaToHex(topic))
  }
  return {
    address: byteaToHex(row.address),
    topics: topics as Log['topics'],
    data: byteaToHex(row.data),
    blockHash: byteaToHex(row.blockHash),
    blockNumber: toQuantity(row.blockNumber),
    blockTimestamp: toQuantity(row.blockTimestamp),
    transactionHash: byteaToHex(row.transactionHash),
    transactionIndex: toQuantity(row.transactionIndex),
    logIndex: toQuantity(row.logIndex),
    removed: false,
  }
}
