import { encodeChunks, postingsOf, signedBits } from '../codecs/log-chunks.js'
import { type LogRow, logAddressPostings, logChunks, logTopicPostings } from './schema.js'

/** The rows one block's logs are stored as. */
export type LogTables = {
  logChunks: (typeof logChunks.$inferInsert)[]
  logAddressPostings: (typeof logAddressPostings.$inferInsert)[]
  logTopicPostings: (typeof logTopicPostings.$inferInsert)[]
}

/** A block's logs as stored: in chunks, with their postings (codecs/log-chunks.ts). */
export function logTables(blockNumber: number, logs: readonly LogRow[]): LogTables {
  const chunks = encodeChunks(
    logs.map((log) => ({
      logIndex: log.logIndex,
      transactionIndex: log.transactionIndex,
      transactionHash: log.transactionHash,
      address: log.address,
      topics: [log.topic0, log.topic1, log.topic2, log.topic3].filter((topic) => topic !== null),
      data: log.data,
    })),
  )
  const { addresses, topics } = postingsOf(chunks)
  const postingRows = (map: Map<bigint, bigint>) => [...map].map(([key, bits]) => ({ key, blockNumber, chunks: signedBits(bits) }))
  return {
    logChunks: chunks.map(({ chunk, logCount, deflated }) => ({ blockNumber, chunk, logCount, deflated })),
    logAddressPostings: postingRows(addresses),
    logTopicPostings: postingRows(topics),
  }
}

/** The rows of many blocks' logs, given in chain order (by block, then log index). */
export function logTablesOfBlocks(logs: readonly LogRow[]): LogTables {
  const tables: LogTables = { logChunks: [], logAddressPostings: [], logTopicPostings: [] }
  for (let at = 0; at < logs.length; ) {
    const blockNumber = logs[at]!.blockNumber
    let next = at
    while (next < logs.length && logs[next]!.blockNumber === blockNumber) next++
    const block = logTables(blockNumber, logs.slice(at, next))
    tables.logChunks.push(...block.logChunks)
    tables.logAddressPostings.push(...block.logAddressPostings)
    tables.logTopicPostings.push(...block.logTopicPostings)
    at = next
  }
  return tables
}
