import type { Logger } from 'pino'
import { type Address, type Hash, type Hex, RpcError, RpcRequestError, zeroAddress } from 'viem'
import { toQuantity } from '../codecs/index.js'
import { loggableError } from '../errors.js'
import type { Upstream } from '../upstream/index.js'
import { type AccountState, type PrestateDiff, type RawWithdrawal, untracedRecipients, type WithdrawalCredits, withdrawalCredits } from './account-diffs.js'
import { type BlockData, InconsistentBlockError, type RawBlock, type RawReceipt, toBlockData } from './block-data.js'

const PRESTATE_DIFF_TRACER = { tracer: 'prestateTracer', tracerConfig: { diffMode: true } } as const

/** What the upstream turned out to offer; learnt on the first block and kept for the process's life. */
export type UpstreamCapabilities = { blockReceipts: boolean; tracing: boolean }

type TraceResult = { txHash?: Hash; result?: PrestateDiff; error?: string }

/** What a node or provider says when it does not offer a method at all (with the method named, or the word "method"). */
const NOT_OFFERED = /does not exist|is not available|not available on|not supported|unsupported|not enabled|is disabled|not allowed|not whitelisted/
/** What it says when the method runs but not with the tracer asked for. */
const TRACER_NOT_OFFERED = /tracer.*(not found|not supported|unsupported|not (?:exist|available))|(unknown|unsupported|invalid) tracer/

/**
 * Errors that mean "this node does not offer `method`", as opposed to a failure worth retrying. What is
 * learnt from them is kept for the process's life, and a node without tracing turns the index's account
 * reads to the node for good (sync.ts), so a message only counts when it is about the method: "historical
 * state not available", "block does not exist" or "backend not available" come from a node behind or busy,
 * and are retried like any other failure.
 */
export function isUnsupported(error: unknown, method: string): boolean {
  const details = error as { code?: number; cause?: { code?: number }; message?: string; details?: string }
  const code = details.code ?? details.cause?.code
  if (code === -32601 || code === -32004) return true
  // The node's own words: viem's message also quotes the request, which names the method whatever the node said.
  const text = (typeof details.details === 'string' ? details.details : (details.message ?? '')).toLowerCase()
  if (text.includes('method not found')) return true
  if (TRACER_NOT_OFFERED.test(text)) return true
  const aboutMethod = text.includes(method.toLowerCase()) || /\bmethods?\b/.test(text)
  return aboutMethod && NOT_OFFERED.test(text)
}

/**
 * What a node answers for state it does not keep, as opposed to being busy or limited: geth's "historical state
 * unavailable" and "missing trie node", reth's "pruned", anvil's "BlockOutOfRangeError" (past `--prune-history`).
 */
const STATE_NOT_KEPT = /historical state|state.*(?:not available|unavailable|pruned|not found)|missing trie node|pruned|BlockOutOfRange/i
/** Codes of a limit or an overload, whatever the words: never taken for missing state. */
const LIMITED_CODES = new Set([-32005, -32029, 429])

export function createBlockFetcher({
  upstream,
  capabilities,
  keepStateDiffs,
  logger,
}: {
  upstream: Upstream
  capabilities: UpstreamCapabilities
  /** Which blocks keep their raw state diffs on their `BlockData` (none unless asked). */
  keepStateDiffs?: (block: RawBlock) => boolean
  logger?: Logger
}) {
  /**
   * Whether the node keeps the state a block runs on, asked when tracing it failed: a balance at its parent.
   * A node that answers "no such state" (a full node below its window, anvil past its kept states) cannot
   * trace the block however often asked. An error it did not answer (the network) is thrown, to retry.
   */
  async function keepsStateFor(block: RawBlock): Promise<boolean> {
    try {
      await upstream.request('eth_getBalance', [zeroAddress, { blockHash: block.parentHash }])
      return true
    } catch (error) {
      if (!(error instanceof RpcError || error instanceof RpcRequestError)) throw error
      const details = error as { code?: number; details?: string; message: string }
      return LIMITED_CODES.has(details.code ?? 0) || !STATE_NOT_KEPT.test(details.details ?? details.message)
    }
  }

  async function fetchReceipts(block: RawBlock): Promise<RawReceipt[]> {
    if (block.transactions.length === 0) return []
    if (capabilities.blockReceipts) {
      try {
        const receipts = await upstream.request<RawReceipt[] | null>('eth_getBlockReceipts', [{ blockHash: block.hash }])
        if (receipts !== null) return receipts
      } catch (error) {
        if (!isUnsupported(error, 'eth_getBlockReceipts')) throw error
        capabilities.blockReceipts = false
      }
    }
    // Per-transaction fallback for nodes without eth_getBlockReceipts.
    return Promise.all(
      block.transactions.map(async (transaction) => {
        const receipt = await upstream.request<RawReceipt | null>('eth_getTransactionReceipt', [transaction.hash])
        if (receipt === null) throw new InconsistentBlockError(`no receipt for ${transaction.hash}`)
        return receipt
      }),
    )
  }

  async function fetchDiffs(block: RawBlock): Promise<PrestateDiff[] | null> {
    if (!capabilities.tracing) return null
    if (block.transactions.length === 0) return []
    try {
      const traces = await upstream.request<TraceResult[]>('debug_traceBlockByHash', [block.hash, PRESTATE_DIFF_TRACER])
      if (traces.length !== block.transactions.length)
        throw new InconsistentBlockError(`block ${block.number}: ${traces.length} traces for ${block.transactions.length} transactions`)
      return traces.map((trace) => {
        if (trace.result === undefined) throw new InconsistentBlockError(`trace failed: ${trace.error ?? 'no result'}`)
        return trace.result
      })
    } catch (error) {
      if (isUnsupported(error, 'debug_traceBlockByHash')) {
        capabilities.tracing = false
        return null
      }
      if (await keepsStateFor(block)) throw error
      // Written without its diffs: the index reads accounts from the node from now on (sync.ts), as without tracing.
      logger?.warn(
        { block: Number.parseInt(block.number, 16), err: loggableError(error) },
        'the node keeps no state to trace this block: account reads go to the node from now on',
      )
      return null
    }
  }

  /**
   * What the block's withdrawals pay, with the state before the block of each recipient its transactions'
   * traces do not hold, read from the node at the parent (by hash: the parent of this very block).
   */
  async function fetchWithdrawals(block: RawBlock, diffs: PrestateDiff[]): Promise<WithdrawalCredits | undefined> {
    const credits = withdrawalCredits(block.withdrawals as RawWithdrawal[] | undefined)
    if (credits.size === 0) return undefined
    const parent = { blockHash: block.parentHash }
    const before = new Map<Address, AccountState>()
    await Promise.all(
      untracedRecipients(diffs, credits).map(async (address) => {
        const [balance, nonce] = await Promise.all([
          upstream.request<Hex>('eth_getBalance', [address, parent]),
          upstream.request<Hex>('eth_getTransactionCount', [address, parent]),
        ])
        before.set(address, { balance: BigInt(balance), nonce: BigInt(nonce) })
      }),
    )
    return { credits, before }
  }

  /** Fetches a block with its receipts and state diffs; throws if the upstream answers inconsistently. */
  async function fetchBlock(number: number): Promise<BlockData> {
    const block = await upstream.request<RawBlock | null>('eth_getBlockByNumber', [toQuantity(number), true])
    if (block === null) throw new InconsistentBlockError(`upstream has no block ${number}`)
    const [receipts, diffs] = await Promise.all([fetchReceipts(block), fetchDiffs(block)])
    const withdrawals = diffs === null ? undefined : await fetchWithdrawals(block, diffs)
    return toBlockData(block, receipts, diffs, keepStateDiffs?.(block) ?? false, withdrawals)
  }

  async function fetchHeader(number: number): Promise<{ number: Hex; hash: Hash; parentHash: Hash } | null> {
    return upstream.request('eth_getBlockByNumber', [toQuantity(number), false])
  }

  return { fetchBlock, fetchHeader }
}

export type BlockFetcher = ReturnType<typeof createBlockFetcher>
