import type { Address, Hash, Hex, RpcBlock, RpcTransaction, RpcTransactionReceipt } from 'viem'
import { registryEvents } from '../attribution/registry.js'
import { attributedActions, ENTRY_POINTS, type EntryPoint } from '../attribution/user-operations.js'
import { BODY_DEFLATE_LEVEL, deflateSegmented } from '../codecs/segmented.js'
import { hexToBytea, type LogRow, type schema } from '../db/index.js'
import { renderReceiptItems } from '../objects/receipt.js'
import { type AccountChange, foldPrestateDiffs, type PrestateDiff, type WithdrawalCredits } from './account-diffs.js'

export type RawBlock = RpcBlock<'latest', true, RpcTransaction> & { hash: Hash; number: Hex }
export type RawReceipt = RpcTransactionReceipt

/** Everything the index stores for one block, fetched from the upstream and checked for consistency. */
export type BlockData = {
  block: RawBlock
  receipts: RawReceipt[]
  /** `null` when the upstream offers no tracing; account state is then read through (resolvers/accounts.ts). */
  accountChanges: AccountChange[] | null
  /** The block's per-transaction state diffs, kept only when asked (the flashblock executor's cache, for recent blocks). */
  stateDiffs?: PrestateDiff[]
}

export type BlockRows = {
  block: typeof schema.blocks.$inferInsert
  /** A transaction's keys: where it is (by hash) and who sent and received it; its body is in `blockTransactions`. */
  transactions: (typeof schema.transactions.$inferInsert)[]
  blockTransactions: typeof schema.blockTransactions.$inferInsert
  blockReceipts: typeof schema.blockReceipts.$inferInsert
  logs: (typeof schema.logs.$inferInsert)[]
  accountChanges: (typeof schema.accountChanges.$inferInsert)[]
  /** One row per (code, transaction) for calldata that ends in an ERC-8021 suffix (DESIGN.md §7). */
  attributions: (typeof schema.attributions.$inferInsert)[]
  /** Events of the on-chain Builder Codes registry, when one is configured (src/attribution/registry.ts). */
  registryEvents: (typeof schema.builderCodeRegistryEvents.$inferInsert)[]
}

export class InconsistentBlockError extends Error {
  override readonly name = 'InconsistentBlockError'
}

export function toBlockData(
  block: RawBlock,
  receipts: RawReceipt[],
  diffs: PrestateDiff[] | null,
  keepDiffs = false,
  withdrawals?: WithdrawalCredits,
): BlockData {
  if (receipts.length !== block.transactions.length)
    throw new InconsistentBlockError(`block ${block.number}: ${block.transactions.length} transactions but ${receipts.length} receipts`)
  receipts.forEach((receipt, index) => {
    const transaction = block.transactions[index]!
    if (receipt.blockHash !== block.hash || receipt.transactionHash !== transaction.hash)
      throw new InconsistentBlockError(`block ${block.number}: receipt ${index} belongs to another block`)
  })
  return {
    block,
    receipts,
    accountChanges: diffs === null ? null : foldPrestateDiffs(diffs, withdrawals),
    ...(keepDiffs && diffs !== null && { stateDiffs: diffs }),
  }
}

const toNumber = (value: Hex | null | undefined) => Number.parseInt(value ?? '0x0', 16)

export type RowOptions = {
  /** The on-chain Builder Codes registry whose events are kept; `null` for none. */
  registry: Address | null
  /** The EntryPoints whose user operations are attributed; default: the canonical ones. */
  entryPoints?: readonly EntryPoint[]
}

/** Splits a block into table rows: typed columns for what is queried, the upstream's JSON for the rest. */
export function toRows({ block, receipts, accountChanges }: BlockData, options: RowOptions = { registry: null }): BlockRows {
  const number = toNumber(block.number)
  const timestamp = toNumber(block.timestamp)
  const blockHash = hexToBytea(block.hash)
  const logs: LogRow[] = []
  for (const receipt of receipts) {
    for (const log of receipt.logs) {
      const [topic0, topic1, topic2, topic3] = log.topics
      logs.push({
        blockNumber: number,
        logIndex: toNumber(log.logIndex),
        blockHash,
        blockTimestamp: timestamp,
        transactionHash: hexToBytea(log.transactionHash!),
        transactionIndex: toNumber(log.transactionIndex),
        address: hexToBytea(log.address),
        topic0: topic0 ? hexToBytea(topic0) : null,
        topic1: topic1 ? hexToBytea(topic1) : null,
        topic2: topic2 ? hexToBytea(topic2) : null,
        topic3: topic3 ? hexToBytea(topic3) : null,
        data: hexToBytea(log.data),
      })
    }
  }
  const receiptRows = receipts.map((receipt, index) => ({
    transactionHash: hexToBytea(receipt.transactionHash),
    blockNumber: number,
    transactionIndex: index,
    body: { ...receipt, logs: [] },
  }))
  const attributions: BlockRows['attributions'] = []
  block.transactions.forEach((transaction, index) => {
    const receipt = receipts[index]!
    // The transaction's own suffix, and those of the user operations it bundles (src/attribution/user-operations.ts).
    const forAttribution = { gasUsed: receipt.gasUsed, logs: receipt.logs as { address: string; topics: Hex[]; data: Hex }[] }
    for (const action of attributedActions(transaction, forAttribution, options.entryPoints ?? ENTRY_POINTS)) {
      const row = {
        transactionHash: hexToBytea(transaction.hash),
        kind: action.kind,
        operationIndex: action.operationIndex,
        blockNumber: number,
        blockTimestamp: timestamp,
        transactionIndex: index,
        sender: hexToBytea(action.sender),
        target: action.target === null ? null : hexToBytea(action.target),
        gasUsed: Number(action.gasUsed ?? 0n),
        suffixGas: action.attribution.suffixGas,
        value: action.value.toString(),
      }
      action.attribution.codes.forEach((code, position) => {
        attributions.push({ code, role: action.attribution.roles[position] ?? 'code', ...row })
      })
    }
  })
  return {
    block: {
      number,
      hash: blockHash,
      parentHash: hexToBytea(block.parentHash),
      timestamp,
      header: { ...block, transactions: [] },
    },
    transactions: block.transactions.map((transaction, index) => ({
      hash: hexToBytea(transaction.hash),
      blockNumber: number,
      transactionIndex: index,
      from: hexToBytea(transaction.from),
      to: transaction.to ? hexToBytea(transaction.to) : null,
    })),
    blockTransactions: storedSegments(
      number,
      block.transactions.map((transaction) => JSON.stringify(transaction)),
    ),
    blockReceipts: storedReceipts(number, renderReceiptItems(receiptRows, logs)),
    logs,
    accountChanges: (accountChanges ?? []).map((change) => ({
      address: hexToBytea(change.address),
      blockNumber: number,
      balanceBefore: change.before.balance.toString(),
      nonceBefore: Number(change.before.nonce),
      balance: change.after.balance.toString(),
      nonce: Number(change.after.nonce),
    })),
    attributions,
    registryEvents:
      options.registry === null
        ? []
        : registryEventRows(
            registryEvents(
              options.registry,
              { number, timestamp },
              receipts.flatMap((receipt) => receipt.logs),
            ),
          ),
  }
}

export function registryEventRows(events: ReturnType<typeof registryEvents>): BlockRows['registryEvents'] {
  return events.map((event) => ({
    blockNumber: event.blockNumber,
    logIndex: event.logIndex,
    blockTimestamp: event.blockTimestamp,
    tokenId: hexToBytea(event.tokenId),
    kind: event.kind,
    code: event.code,
    account: event.account === null ? null : hexToBytea(event.account),
  }))
}

/**
 * A block's transactions or receipts answer as stored: a JSON array in an open DEFLATE stream of segments,
 * with its length and checksum (codecs/segmented.ts).
 */
export function storedSegments(blockNumber: number, items: readonly string[]): BlockRows['blockTransactions'] {
  const { stream, length, adler32, offsets } = deflateSegmented(items, BODY_DEFLATE_LEVEL)
  return { blockNumber, deflated: stream, plainLength: length, adler32, segmentOffsets: offsets }
}

/** A block's receipts answer as stored: the same, with its CRC-32 (sent as it is to gzip-only clients). */
export function storedReceipts(blockNumber: number, items: readonly string[]): BlockRows['blockReceipts'] {
  const { stream, length, adler32, crc32, offsets } = deflateSegmented(items, BODY_DEFLATE_LEVEL)
  return { blockNumber, deflated: stream, plainLength: length, adler32, crc32, segmentOffsets: offsets }
}
