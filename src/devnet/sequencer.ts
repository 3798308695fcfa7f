import { type Address, type Hash, type Hex, type RpcBlock, type RpcTransactionReceipt, concat, keccak256, numberToHex } from 'viem'
import type { DevnetLogger } from './anvil.js'
import { type JsonRpcRequest, type JsonRpcResponse, createAnvilClient } from './anvil-client.js'
import { createChainLock } from './chain-lock.js'
import type { FlashblockWireMessage } from '../pending/message.js'
import { SYNC_SEND_MAX_TIMEOUT_MS, syncSendTimeoutTooLong } from '../pending/sync-send.js'
import { type FeedFormat, type FlashblockId, buildFlashblockMessage } from './flashblock-message.js'
import { type PendingBlock, hidePendingBlockHash, readAsNode } from './node-view.js'
import { createNodeFilters, FILTER_METHODS } from './filters.js'

// How the devnet turns anvil into a Base-like sequencer (DESIGN.md §6). anvil runs with --no-mining and
// FIFO ordering; a slot of `blockTimeMs` has `blockTimeMs / flashblockIntervalMs` ticks. Every tick but the
// last mines the slot's transactions so far on a snapshot of the sealed head and leaves that block in place
// until the next tick, which reverts it, puts the slot's transactions back in the pool ahead of the newer
// ones, and mines again; the last tick mines for real. Between ticks anvil's `latest` is the pre-confirmed
// block, which the JSON-RPC serves as `pending` (node-view.ts), and anvil checks new transactions against
// its state, as a Base node does. Timestamp and base fee are pinned on every run, so every pre-confirmed
// answer equals the sealed one, block hash aside.

/** anvil flags the sequencer relies on: arrival order decides block order, so a re-sent prefix re-mines identically. */
export const SEQUENCER_ANVIL_ARGS = ['--order', 'fifo'] as const
const PAYLOAD_ID_BYTES = 8
const MS_PER_SECOND = 1_000
/** anvil's code for "transaction already imported": the transaction is still in the pool. */
const ALREADY_IMPORTED_CODE = -32003
const INVALID_PARAMS_CODE = -32602
/** eth_sendRawTransactionSync waits this many block times for the receipt unless the caller says otherwise. */
const SYNC_SEND_TIMEOUT_BLOCKS = 2
/** EIP-7966's answer when the transaction is accepted but not included in time; `data` is its hash. */
const SYNC_SEND_TIMEOUT_ERROR = {
  code: 4,
  message: "The transaction was added to the mempool but wasn't processed within the designated timeout interval.",
}
/** While anvil is down every tick fails; one log line per this interval is enough. */
const ERROR_LOG_INTERVAL_MS = 5_000
/** anvil and hardhat methods that change nothing: every other one is run with the pre-confirmed block taken down. */
const READ_ONLY_DEV_METHODS = new Set([
  'anvil_nodeInfo',
  'anvil_metadata',
  'anvil_getAutomine',
  'anvil_getIntervalMining',
  'hardhat_getAutomine',
  'hardhat_metadata',
])

export type SequencerOptions = {
  anvilRpcUrl: string
  blockTimeMs: number
  flashblockIntervalMs: number
  /** `current` (default): Base's frames since Azul; `legacy`: with receipts and balances. */
  feedFormat?: FeedFormat
  /** Called inside the tick, before any waiting read or send runs, so feed and chain never disagree. */
  onFlashblock: (message: FlashblockWireMessage) => void
  /** Called after every tick with its duration (for logs and benchmarks). */
  onTick?: (tick: { index: number; transactions: number; durationMs: number; sealed: boolean }) => void
  logger?: DevnetLogger
}

export type Sequencer = {
  /** One JSON-RPC request, answered as a flashblocks-aware Base node would; everything waits while a tick runs. */
  forward: (request: JsonRpcRequest) => Promise<JsonRpcResponse>
  /** Starts ticking; the first flashblock comes one interval later. */
  start: () => void
  /**
   * Stops after the tick in flight and takes the pre-confirmed block down: anvil's head is the sealed one,
   * every unsealed transaction back in its pool in order. Idempotent.
   */
  stop: () => Promise<void>
}

type Slot = {
  payloadId: Hex
  parentHash: Hash
  timestamp: bigint
  baseFeePerGas: bigint
  nextIndex: number
  /** Transactions already sent in this slot's flashblocks, in block order. */
  emitted: Hash[]
}

type BuiltBlock = {
  block: RpcBlock<'latest', false>
  newHashes: Hash[]
  raws: Hex[]
  /** Of the new transactions: all of them for a legacy feed, else those an eth_sendRawTransactionSync waits for. */
  receipts: RpcTransactionReceipt[]
  /** Legacy feeds only: after the block, of the accounts the new transactions touched. */
  balances?: Record<Address, Hex>
}

/** The block a tick left in place, and the snapshot that takes it down. */
type Speculative = PendingBlock & { snapshot: Hex; block: RpcBlock<'latest', false> }

/** A slot's flashblocks announced transactions that the re-mined block does not start with. */
class SlotMismatchError extends Error {
  override readonly name = 'SlotMismatchError'
}

/** Flashblocks per block; throws unless the block time is a whole number of flashblock intervals. */
export function ticksPerSlot(blockTimeMs: number, flashblockIntervalMs: number): number {
  const ticks = blockTimeMs / flashblockIntervalMs
  if (!Number.isInteger(ticks) || ticks < 1 || flashblockIntervalMs <= 0) {
    throw new Error(`block time (${blockTimeMs} ms) must be a positive multiple of the flashblock interval (${flashblockIntervalMs} ms)`)
  }
  return ticks
}

export function createSequencer(options: SequencerOptions): Sequencer {
  const { blockTimeMs, flashblockIntervalMs, onFlashblock, logger, feedFormat = 'current' } = options
  const ticks = ticksPerSlot(blockTimeMs, flashblockIntervalMs)
  // Whole seconds, as block timestamps are; sub-second blocks still need strictly increasing timestamps.
  const slotSeconds = BigInt(Math.max(1, Math.round(blockTimeMs / MS_PER_SECOND)))
  const anvil = createAnvilClient(options.anvilRpcUrl)
  const lock = createChainLock()
  /** Raw form of every transaction sent and not yet sealed, in arrival order: a revert drops them from the pool. */
  const rawByHash = new Map<Hash, Hex>()
  /** eth_sendRawTransactionSync calls waiting for the flashblock that includes their transaction. */
  const inclusionWaiters = new Map<Hash, Set<(receipt: RpcTransactionReceipt | undefined) => void>>()
  let slot: Slot | undefined
  let speculative: Speculative | undefined
  /**
   * The flashblock announced last, which the next one names as the one it follows (`prev_flashblock_id`), as
   * Base's builder does: across blocks too, and none before the first since the devnet started.
   */
  let lastAnnounced: FlashblockId | null = null
  let lastErrorLogAt = 0

  async function openSlot(parent: RpcBlock<'latest', false>): Promise<Slot> {
    // anvil's next base fee, computed from the sealed parent (evm_revert does not restore it: read it first).
    const { baseFeePerGas } = await anvil.request<{ baseFeePerGas: Hex[] }>('eth_feeHistory', ['0x1', 'latest', []])
    const timestamp = BigInt(parent.timestamp) + slotSeconds
    const payloadId = keccak256(concat([parent.hash, numberToHex(timestamp, { size: 8 })])).slice(0, 2 + 2 * PAYLOAD_ID_BYTES)
    return {
      payloadId: payloadId as Hex,
      parentHash: parent.hash,
      timestamp,
      baseFeePerGas: BigInt(baseFeePerGas.at(-1) ?? '0x0'),
      nextIndex: 0,
      emitted: [],
    }
  }

  async function pin(current: Slot): Promise<void> {
    await anvil.request('evm_setNextBlockTimestamp', [numberToHex(current.timestamp)])
    await anvil.request('anvil_setNextBlockBaseFeePerGas', [numberToHex(current.baseFeePerGas)])
  }

  async function mine(current: Slot): Promise<BuiltBlock> {
    await pin(current)
    await anvil.request('evm_mine')
    const block = await head()
    const prefix = block.transactions.slice(0, current.emitted.length)
    if (block.parentHash !== current.parentHash || prefix.length < current.emitted.length || prefix.some((hash, i) => hash !== current.emitted[i])) {
      throw new SlotMismatchError(`block ${block.number} does not extend this slot's flashblocks (parent ${block.parentHash})`)
    }
    const newHashes = block.transactions.slice(current.emitted.length)
    const withReceipts = feedFormat === 'legacy' ? newHashes : newHashes.filter((hash) => inclusionWaiters.has(hash))
    const [receipts, raws] = await Promise.all([
      Promise.all(withReceipts.map((hash) => anvil.request<RpcTransactionReceipt>('eth_getTransactionReceipt', [hash]))),
      Promise.all(newHashes.map(rawTransaction)),
    ])
    if (feedFormat !== 'legacy') return { block, newHashes, raws, receipts }
    // Tracing would also find accounts paid by internal calls, but anvil re-executes the block's prefix for
    // every traced transaction: ~1 s a tick at 200 transactions.
    const touched = new Set<Address>(receipts.length === 0 ? [] : [block.miner])
    for (const { from, to, contractAddress } of receipts) for (const address of [from, to, contractAddress]) if (address) touched.add(address)
    const balances = await Promise.all(
      [...touched].map(async (address) => [address.toLowerCase(), await anvil.request<Hex>('eth_getBalance', [address, block.number])] as const),
    )
    return { block, newHashes, raws, receipts, balances: Object.fromEntries(balances) }
  }

  /** A transaction sent straight to anvil is still known by hash while it is in a block or the pool. */
  async function rawTransaction(hash: Hash): Promise<Hex> {
    let raw = rawByHash.get(hash)
    if (raw === undefined) {
      raw = await anvil.request<Hex>('eth_getRawTransactionByHash', [hash])
      rawByHash.set(hash, raw)
    }
    return raw
  }

  /** Takes the pre-confirmed block down: anvil's head is the sealed one, its pool without the slot's transactions. */
  async function retract(): Promise<void> {
    if (speculative === undefined) return
    const { snapshot, number } = speculative
    speculative = undefined
    // A reorganisation sent to anvil directly (anvil_reorg) takes the snapshot with it: anvil answers that it
    // has none. The chain is then what that call made it, which the next block builds on.
    const reverted = await anvil.request<boolean>('evm_revert', [snapshot]).catch((error: unknown) => {
      logger?.warn({ block: Number(number), err: error }, 'anvil no longer has the pre-confirmed block’s snapshot (changed directly?)')
      return null
    })
    if (reverted === false) logger?.warn({ block: Number(number) }, 'anvil could not revert the pre-confirmed block; it stays in the chain')
  }

  /**
   * anvil's newest block. After an anvil_reorg, anvil 1.7.1 can answer `latest` with null while it has the
   * block by its number: then by its number.
   */
  async function head(): Promise<RpcBlock<'latest', false>> {
    const latest = await anvil.request<RpcBlock<'latest', false> | null>('eth_getBlockByNumber', ['latest', false])
    if (latest !== null) return latest
    const number = await anvil.request<Hex>('eth_blockNumber')
    const byNumber = await anvil.request<RpcBlock<'latest', false> | null>('eth_getBlockByNumber', [number, false])
    if (byNumber === null) throw new Error(`anvil has no block ${number}, its head`)
    return byNumber
  }

  /**
   * After a revert, puts the transactions it took out of the pool (`unpooled`, in block order) back ahead of
   * the newer ones, so that FIFO re-mines the announced prefix. The pool is emptied first: a re-sent
   * transaction would otherwise queue behind the newer ones.
   */
  async function restorePool(unpooled: Hash[]): Promise<void> {
    if (unpooled.length === 0) return
    const pooled = await poolHashes()
    for (const hash of pooled) await rawTransaction(hash) // sent to anvil directly
    const first = new Set(unpooled)
    const newer = [...rawByHash.keys()].filter((hash) => !first.has(hash))
    // Replaced or dropped by anvil since: not to be sent again.
    for (const hash of newer) if (!pooled.has(hash)) rawByHash.delete(hash)
    await anvil.request('anvil_dropAllTransactions')
    await resend([...unpooled, ...newer.filter((hash) => pooled.has(hash))])
  }

  async function resend(hashes: Hash[]): Promise<void> {
    const known = hashes.filter((hash) => rawByHash.has(hash))
    const requests = known.map((hash, i): JsonRpcRequest => ({ jsonrpc: '2.0', id: i, method: 'eth_sendRawTransaction', params: [rawByHash.get(hash)] }))
    const responses = await anvil.forwardInOrder(requests)
    responses.forEach(({ error }, i) => {
      if (error && error.code !== ALREADY_IMPORTED_CODE) {
        logger?.error?.({ hash: known[i], error }, 'an unsealed transaction could not be re-sent after a revert; it is dropped')
        rawByHash.delete(known[i]!)
      }
    })
  }

  async function poolHashes(): Promise<Set<Hash>> {
    type Pool = Record<'pending' | 'queued', Record<Address, Record<string, { hash: Hash }>>>
    const pool = await anvil.request<Pool>('txpool_content')
    const hashes = new Set<Hash>()
    for (const bySender of [pool.pending, pool.queued]) {
      for (const byNonce of Object.values(bySender)) for (const tx of Object.values(byNonce)) hashes.add(tx.hash)
    }
    return hashes
  }

  /** Keeps only the transactions still in anvil's pool (the rest were sealed or dropped by anvil). */
  async function pruneToPool(): Promise<void> {
    const pooled = await poolHashes()
    for (const hash of rawByHash.keys()) if (!pooled.has(hash)) rawByHash.delete(hash)
  }

  async function tick(): Promise<void> {
    const started = performance.now()
    if (slot !== undefined && speculative !== undefined && slot.nextIndex < ticks - 1 && (await nothingToInclude())) {
      // Re-mining the same transactions on the pinned timestamp and base fee would give the same block.
      return announce(slot, { block: speculative.block, newHashes: [], raws: [], receipts: [], balances: {} }, started)
    }
    await retract()
    const parent = await head()
    if (slot !== undefined && parent.hash !== slot.parentHash) {
      // Someone mined or reverted through anvil directly: the slot's flashblocks are void; start a new block.
      logger?.warn({ head: parent.number }, 'chain head moved outside the sequencer; opening a new block')
      slot = undefined
      await pruneToPool()
    }
    const current = (slot ??= await openSlot(parent))
    await restorePool(current.emitted)
    const sealing = current.nextIndex === ticks - 1
    const snapshot = sealing ? undefined : await anvil.request<Hex>('evm_snapshot')
    let built: BuiltBlock
    try {
      built = await mine(current)
    } catch (error) {
      // Undone where anvil can; what failed is the error to report either way.
      if (snapshot !== undefined) {
        await anvil
          .request('evm_revert', [snapshot])
          .then(() => restorePool([...new Set([...current.emitted, ...rawByHash.keys()])]))
          .catch((undo: unknown) => logger?.warn({ err: undo }, 'anvil could not undo a failed block'))
      }
      // A block that contradicts the flashblocks sent cannot be sealed: the next tick opens a new one.
      if (error instanceof SlotMismatchError || sealing) slot = undefined
      throw error
    }
    if (snapshot !== undefined) {
      speculative = { snapshot, number: BigInt(built.block.number), hash: built.block.hash, block: built.block }
      // evm_mine moved anvil's next base fee on; sends until the next tick are checked against the slot's.
      await anvil.request('anvil_setNextBlockBaseFeePerGas', [numberToHex(current.baseFeePerGas)])
    }
    await announce(current, built, started)
  }

  /** Nothing in the pool that the next block could take (a nonce gap keeps a transaction queued). */
  async function nothingToInclude(): Promise<boolean> {
    const { pending } = await anvil.request<{ pending: Hex }>('txpool_status')
    return BigInt(pending) === 0n
  }

  /** Sends the flashblock, answers the eth_sendRawTransactionSync calls it includes, closes the slot when sealed. */
  async function announce(current: Slot, built: BuiltBlock, started: number): Promise<void> {
    const index = current.nextIndex
    const sealing = index === ticks - 1
    onFlashblock(
      buildFlashblockMessage({
        payloadId: current.payloadId,
        index,
        block: built.block,
        transactions: built.raws,
        ...(feedFormat === 'legacy' ? { legacy: { receipts: built.receipts, balances: built.balances ?? {} } } : { previous: lastAnnounced }),
      }),
    )
    lastAnnounced = { blockNumber: Number(built.block.number), index }
    current.nextIndex++
    current.emitted.push(...built.newHashes)
    for (const receipt of built.receipts) {
      const waiting = inclusionWaiters.get(receipt.transactionHash)
      if (waiting === undefined) continue
      const shown = speculative ? hidePendingBlockHash(structuredClone(receipt), speculative.hash) : receipt
      for (const settle of [...waiting]) settle(shown)
    }
    if (sealing) {
      slot = undefined
      await pruneToPool()
    }
    const durationMs = performance.now() - started
    options.onTick?.({ index, transactions: built.newHashes.length, durationMs, sealed: sealing })
    logger?.debug?.({ block: Number(built.block.number), index, txs: built.newHashes.length, ms: Math.round(durationMs) }, 'flashblock')
  }

  async function sendRawTransaction(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    // anvil checks the nonce against its state, the pre-confirmed block's: a transaction that would replace
    // a pre-confirmed one is refused ("nonce too low"), as a Base node refuses it.
    const response = await anvil.forward(request)
    const [raw] = Array.isArray(request.params) ? (request.params as unknown[]) : []
    if (typeof response.result === 'string' && typeof raw === 'string') {
      rawByHash.set(response.result as Hash, raw as Hex)
      filters.accepted(response.result as Hash)
    }
    return response
  }

  async function sendTransaction(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    const response = await anvil.forward(request)
    // anvil signed it; the raw form is what a revert needs to put it back.
    if (typeof response.result === 'string') {
      await rawTransaction(response.result as Hash)
      filters.accepted(response.result as Hash)
    }
    return response
  }

  /** Resolves with the receipt from the flashblock that includes `hash`, or undefined after `timeoutMs`. */
  function waitForInclusion(hash: Hash, timeoutMs: number): Promise<RpcTransactionReceipt | undefined> {
    return new Promise((resolve) => {
      const waiting = inclusionWaiters.get(hash) ?? new Set()
      inclusionWaiters.set(hash, waiting)
      const settle = (receipt: RpcTransactionReceipt | undefined) => {
        clearTimeout(timer)
        waiting.delete(settle)
        if (waiting.size === 0 && inclusionWaiters.get(hash) === waiting) inclusionWaiters.delete(hash)
        resolve(receipt)
      }
      const timer = setTimeout(() => settle(undefined), timeoutMs)
      waiting.add(settle)
    })
  }

  /**
   * EIP-7966: the receipt as soon as a flashblock pre-confirms the transaction (zero block hash while the
   * block is open), as base-reth-node answers. https://eips.ethereum.org/EIPS/eip-7966
   */
  async function sendRawTransactionSync(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    const id = request.id ?? null
    const [raw, timeout] = Array.isArray(request.params) ? (request.params as unknown[]) : []
    const timeoutMs = syncTimeoutMs(timeout, Math.min(SYNC_SEND_TIMEOUT_BLOCKS * blockTimeMs, SYNC_SEND_MAX_TIMEOUT_MS))
    if (timeoutMs === undefined) return { jsonrpc: '2.0', id, error: { code: INVALID_PARAMS_CODE, message: 'timeout must be a number of milliseconds' } }
    // As Base's node: a longer wait is refused before the transaction is sent.
    if (timeoutMs > SYNC_SEND_MAX_TIMEOUT_MS)
      return {
        jsonrpc: '2.0',
        id,
        error: { code: INVALID_PARAMS_CODE, message: syncSendTimeoutTooLong(timeoutMs) },
      }
    let included: Promise<RpcTransactionReceipt | undefined> | undefined
    const sent = await lock.exclusive(async () => {
      const response = await sendRawTransaction({ ...request, method: 'eth_sendRawTransaction', params: [raw] })
      // Registered before the lock is released, so the tick that includes it cannot be missed.
      if (typeof response.result === 'string') included = waitForInclusion(response.result as Hash, timeoutMs)
      return response
    })
    if (included === undefined) return sent
    const receipt = await included
    if (receipt !== undefined) return { jsonrpc: '2.0', id, result: receipt }
    return { jsonrpc: '2.0', id, error: { ...SYNC_SEND_TIMEOUT_ERROR, data: sent.result } }
  }

  /** anvil_*, evm_*, hardhat_* calls that change the chain run on the sealed head, every unsealed transaction pooled. */
  async function onSealedHead(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    await retract()
    await restorePool(slot?.emitted ?? [])
    return anvil.forward(request)
  }

  // A node's filters, over the sealed chain and the transactions accepted (anvil's would see the speculative blocks).
  const filters = createNodeFilters({
    read: async <value>(method: string, params: unknown[]) => {
      const response = await lock.shared(() => readAsNode({ jsonrpc: '2.0', id: 1, method, params }, speculative, anvil.forward))
      if (response.error) throw response.error
      return response.result as value
    },
  })

  function forward(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    const { method } = request
    if (FILTER_METHODS.has(method)) return filters.handle(request)
    if (method === 'eth_sendRawTransaction') return lock.exclusive(() => sendRawTransaction(request))
    if (method === 'eth_sendTransaction' || method === 'eth_sendUnsignedTransaction') return lock.exclusive(() => sendTransaction(request))
    if (method === 'eth_sendRawTransactionSync') return sendRawTransactionSync(request)
    if (/^(anvil|evm|hardhat)_/.test(method) && !READ_ONLY_DEV_METHODS.has(method)) return lock.exclusive(() => onSealedHead(request))
    return lock.shared(() => readAsNode(request, speculative, anvil.forward))
  }

  // --- the clock ---------------------------------------------------------------------------------------
  let stopping = false
  let wake: (() => void) | undefined
  let loop: Promise<void> | undefined

  async function run(): Promise<void> {
    let deadline = performance.now() + flashblockIntervalMs
    while (!stopping) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, deadline - performance.now()))
        wake = () => {
          clearTimeout(timer)
          resolve()
        }
      })
      if (stopping) break
      try {
        await lock.exclusive(tick)
      } catch (error) {
        if (performance.now() - lastErrorLogAt > ERROR_LOG_INTERVAL_MS) {
          lastErrorLogAt = performance.now()
          logger?.warn({ err: error instanceof Error ? error.message : String(error) }, 'sequencer tick failed')
        }
      }
      // A tick that overran starts the next one at once, but a long stall does not cause a burst.
      deadline = Math.max(deadline + flashblockIntervalMs, performance.now())
    }
  }

  async function takeDown(): Promise<void> {
    stopping = true
    wake?.()
    await loop
    for (const waiting of inclusionWaiters.values()) for (const settle of [...waiting]) settle(undefined)
    await lock
      .exclusive(async () => {
        await retract()
        await restorePool(slot?.emitted ?? [])
      })
      .catch((error: unknown) => logger?.warn({ err: error instanceof Error ? error.message : String(error) }, 'could not take the pre-confirmed block down'))
  }

  let stopped: Promise<void> | undefined
  return {
    forward,
    start: () => {
      if (!stopping) loop ??= run()
    },
    stop: () => (stopped ??= takeDown()),
  }
}

/** EIP-7966's `timeout`: milliseconds, as a JSON number or a hex quantity; the default when absent. */
function syncTimeoutMs(timeout: unknown, defaultMs: number): number | undefined {
  if (timeout === undefined || timeout === null) return defaultMs
  const ms = typeof timeout === 'string' && /^0x[0-9a-fA-F]+$/.test(timeout) ? Number(timeout) : timeout
  return typeof ms === 'number' && Number.isSafeInteger(ms) && ms >= 0 ? ms : undefined
}
