import { connect } from 'node:net'
import {
  type Address,
  type Hash,
  type Hex,
  type RpcBlock,
  type RpcTransactionReceipt,
  concat,
  keccak256,
  numberToHex,
  parseTransaction,
  recoverTransactionAddress,
} from 'viem'
import type { JsonRpcErrorObject } from '../errors.js'
import type { DevnetLogger } from './anvil.js'
import type { FlashblockMessage, FlashblockReceipt } from './flashblock-message.js'

// How the devnet turns anvil into a Base-like sequencer (DESIGN.md §6). anvil runs with --no-mining and
// FIFO ordering; a slot of `blockTimeMs` has `blockTimeMs / flashblockIntervalMs` ticks. On every tick but
// the last, the slot's transactions so far are mined on top of a snapshot, the new ones are emitted as the
// next flashblock, and the snapshot is restored (which also empties those transactions out of anvil's
// pool, so they are sent again). The last tick mines the same way for real. Timestamp and base fee are
// pinned on every run, so every speculative receipt equals the sealed one.

/** anvil flags the sequencer relies on: arrival order decides block order, so a re-sent prefix re-mines identically. */
export const SEQUENCER_ANVIL_ARGS = ['--order', 'fifo'] as const
const PAYLOAD_ID_BYTES = 8
const MS_PER_SECOND = 1_000
/** anvil's code for "transaction already imported": the transaction is still in the pool. */
const ALREADY_IMPORTED_CODE = -32003
/** geth's code and wording for a nonce below the sender's next one. */
const NONCE_TOO_LOW_CODE = -32000
const HEADER_END = '\r\n\r\n'
/** eth_sendRawTransactionSync waits this many block times for the receipt unless the caller says otherwise. */
const SYNC_SEND_TIMEOUT_BLOCKS = 2
/** EIP-7966's answer when the transaction is accepted but not included in time. */
const SYNC_SEND_TIMEOUT_ERROR = {
  code: 4,
  message: "The transaction was added to the mempool but wasn't processed within the designated timeout interval.",
}
/** While anvil is down every tick fails; one log line per this interval is enough. */
const ERROR_LOG_INTERVAL_MS = 5_000

export type JsonRpcId = string | number | null
export type JsonRpcRequest = { jsonrpc: '2.0'; id?: JsonRpcId; method: string; params?: unknown }
export type JsonRpcResponse = { jsonrpc: '2.0'; id: JsonRpcId; result?: unknown; error?: JsonRpcErrorObject }

export type SequencerOptions = {
  anvilRpcUrl: string
  blockTimeMs: number
  flashblockIntervalMs: number
  /** Called inside the tick, before any waiting read or send runs, so feed and chain never disagree. */
  onFlashblock: (message: FlashblockMessage) => void
  /** Called after every tick with its duration (for logs and benchmarks). */
  onTick?: (tick: { index: number; transactions: number; durationMs: number; sealed: boolean }) => void
  logger?: DevnetLogger
}

export type Sequencer = {
  /** One JSON-RPC request to anvil: sends go through the sequencer; everything waits while a tick runs. */
  forward: (request: JsonRpcRequest) => Promise<JsonRpcResponse>
  /** Starts ticking; the first flashblock comes one interval later. */
  start: () => void
  /** Stops after the tick in flight, which always leaves anvil without a speculative block. Idempotent. */
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
  /** Each sender's next nonce after its pre-confirmed transactions: a lower one would replace one of them. */
  nextNonces: Map<Address, number>
}

type BuiltBlock = {
  block: RpcBlock<'latest', false>
  newHashes: Hash[]
  raws: Hex[]
  receipts: RpcTransactionReceipt[]
  /** After the block, of the accounts the new transactions touched (sender, recipient, created, fee recipient). */
  balances: Record<Address, Hex>
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
  const { blockTimeMs, flashblockIntervalMs, onFlashblock, logger } = options
  const ticks = ticksPerSlot(blockTimeMs, flashblockIntervalMs)
  // Whole seconds, as block timestamps are; sub-second blocks still need strictly increasing timestamps.
  const slotSeconds = BigInt(Math.max(1, Math.round(blockTimeMs / MS_PER_SECOND)))
  const anvil = createAnvilClient(options.anvilRpcUrl)
  const lock = createChainLock()
  /** Raw form of every transaction sent and not yet sealed, in arrival order: a revert drops them from the pool. */
  const rawByHash = new Map<Hash, Hex>()
  let slot: Slot | undefined
  let lastErrorLogAt = 0

  async function openSlot(parent: RpcBlock<'latest', false>): Promise<Slot> {
    // Read before any speculative run: evm_revert does not restore anvil's next base fee.
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
      nextNonces: new Map(),
    }
  }

  async function pin(current: Slot): Promise<void> {
    await anvil.request('evm_setNextBlockTimestamp', [numberToHex(current.timestamp)])
    await anvil.request('anvil_setNextBlockBaseFeePerGas', [numberToHex(current.baseFeePerGas)])
  }

  async function mine(current: Slot): Promise<BuiltBlock> {
    await pin(current)
    await anvil.request('evm_mine')
    const block = await anvil.request<RpcBlock<'latest', false>>('eth_getBlockByNumber', ['latest', false])
    const prefix = block.transactions.slice(0, current.emitted.length)
    if (block.parentHash !== current.parentHash || prefix.some((hash, i) => hash !== current.emitted[i])) {
      throw new Error(`block ${block.number} does not extend this slot's flashblocks (parent ${block.parentHash})`)
    }
    const newHashes = block.transactions.slice(current.emitted.length)
    const [receipts, raws] = await Promise.all([
      Promise.all(newHashes.map((hash) => anvil.request<RpcTransactionReceipt>('eth_getTransactionReceipt', [hash]))),
      Promise.all(newHashes.map(rawTransaction)),
    ])
    // Read on the mined state, before a revert. Tracing would also find accounts paid by internal calls,
    // but anvil re-executes the block's prefix for every traced transaction: ~1 s a tick at 200 transactions.
    const touched = new Set<Address>(receipts.length === 0 ? [] : [block.miner])
    for (const { from, to, contractAddress } of receipts) for (const address of [from, to, contractAddress]) if (address) touched.add(address)
    const balances = await Promise.all(
      [...touched].map(async (address) => [address.toLowerCase(), await anvil.request<Hex>('eth_getBalance', [address, block.number])] as const),
    )
    return { block, newHashes, raws, receipts, balances: Object.fromEntries(balances) }
  }

  /** A transaction sent straight to anvil is still known by hash while its block exists. */
  async function rawTransaction(hash: Hash): Promise<Hex> {
    let raw = rawByHash.get(hash)
    if (raw === undefined) {
      raw = await anvil.request<Hex>('eth_getRawTransactionByHash', [hash])
      rawByHash.set(hash, raw)
    }
    return raw
  }

  /** Mines on a snapshot and restores it: anvil's chain, pool order and base fee are as before. */
  async function speculate(current: Slot): Promise<BuiltBlock> {
    const snapshot = await anvil.request<Hex>('evm_snapshot')
    let mined: Hash[] | undefined
    try {
      const built = await mine(current)
      mined = built.block.transactions
      return built
    } finally {
      await anvil.request('evm_revert', [snapshot])
      await anvil.request('anvil_setNextBlockBaseFeePerGas', [numberToHex(current.baseFeePerGas)])
      // Block order, so that FIFO rebuilds the same prefix; without a block, arrival order.
      await resubmit(mined ?? [...rawByHash.keys()])
    }
  }

  async function resubmit(hashes: Hash[]): Promise<void> {
    const known = hashes.filter((hash) => rawByHash.has(hash))
    const requests = known.map((hash, i): JsonRpcRequest => ({ jsonrpc: '2.0', id: i, method: 'eth_sendRawTransaction', params: [rawByHash.get(hash)] }))
    const responses = await anvil.forwardInOrder(requests)
    responses.forEach(({ error }, i) => {
      if (error && error.code !== ALREADY_IMPORTED_CODE) {
        logger?.error?.({ hash: known[i], error }, 'a pre-confirmed transaction could not be re-sent after a revert')
      }
    })
  }

  /** Keeps only the transactions still in anvil's pool (the rest were sealed or dropped by anvil). */
  async function pruneToPool(): Promise<void> {
    type Pool = Record<'pending' | 'queued', Record<Address, Record<string, { hash: Hash }>>>
    const pool = await anvil.request<Pool>('txpool_content')
    const inPool = new Set<Hash>()
    for (const bySender of [pool.pending, pool.queued]) {
      for (const byNonce of Object.values(bySender)) for (const tx of Object.values(byNonce)) inPool.add(tx.hash)
    }
    for (const hash of rawByHash.keys()) if (!inPool.has(hash)) rawByHash.delete(hash)
  }

  async function tick(): Promise<void> {
    const started = performance.now()
    const parent = await anvil.request<RpcBlock<'latest', false>>('eth_getBlockByNumber', ['latest', false])
    if (slot !== undefined && parent.hash !== slot.parentHash) {
      // Someone mined or reverted through anvil directly: the slot's flashblocks are void; start a new block.
      logger?.warn({ head: parent.number }, 'chain head moved outside the sequencer; opening a new block')
      slot = undefined
      await pruneToPool()
    }
    const current = (slot ??= await openSlot(parent))
    const index = current.nextIndex
    const sealing = index === ticks - 1
    const built = sealing ? await mine(current) : await speculate(current)

    onFlashblock(toMessage(current, index, built))
    current.nextIndex++
    current.emitted.push(...built.newHashes)
    built.raws.forEach((raw, i) => {
      const sender = built.receipts[i]?.from
      if (sender) current.nextNonces.set(sender.toLowerCase() as Address, parseTransaction(raw).nonce! + 1)
    })
    if (sealing) {
      slot = undefined
      await pruneToPool()
    }
    const durationMs = performance.now() - started
    options.onTick?.({ index, transactions: built.newHashes.length, durationMs, sealed: sealing })
    logger?.debug?.({ block: Number(built.block.number), index, txs: built.newHashes.length, ms: Math.round(durationMs) }, 'flashblock')
  }

  /** A nonce below the sender's pre-confirmed ones would let anvil replace a transaction already announced. */
  function checkNonce(sender: Address | undefined, nonce: number | undefined): JsonRpcErrorObject | undefined {
    if (sender === undefined || nonce === undefined) return undefined
    const next = slot?.nextNonces.get(sender.toLowerCase() as Address)
    if (next === undefined || nonce >= next) return undefined
    return { code: NONCE_TOO_LOW_CODE, message: `nonce too low: next nonce ${next}, tx nonce ${nonce}` }
  }

  async function sendRawTransaction(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    const [raw] = Array.isArray(request.params) ? (request.params as unknown[]) : []
    if (typeof raw === 'string' && (slot?.nextNonces.size ?? 0) > 0) {
      // Undecodable input falls through to anvil, which answers it in its own words.
      const sender = await recoverTransactionAddress({ serializedTransaction: raw as never }).catch(() => undefined)
      const error = checkNonce(sender, sender && parseTransaction(raw as Hex).nonce)
      if (error) return { jsonrpc: '2.0', id: request.id ?? null, error }
    }
    const response = await anvil.forward(request)
    if (typeof response.result === 'string' && typeof raw === 'string') rawByHash.set(response.result as Hash, raw as Hex)
    return response
  }

  async function sendTransaction(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    const [tx] = Array.isArray(request.params) ? (request.params as { from?: Address; nonce?: Hex }[]) : []
    const error = checkNonce(tx?.from, tx?.nonce === undefined ? undefined : Number(tx.nonce))
    if (error) return { jsonrpc: '2.0', id: request.id ?? null, error }
    const response = await anvil.forward(request)
    // anvil signed it; the raw form is what a revert needs to put it back.
    if (typeof response.result === 'string') await rawTransaction(response.result as Hash)
    return response
  }

  /**
   * EIP-7966: the receipt once sealed. anvil would wait for the block itself, holding a read lock that the
   * tick sealing that block waits for; here the wait is outside the lock.
   */
  async function sendRawTransactionSync(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    const [raw, timeoutMs] = Array.isArray(request.params) ? (request.params as unknown[]) : []
    const sent = await lock.exclusive(() => sendRawTransaction({ ...request, method: 'eth_sendRawTransaction', params: [raw] }))
    if (sent.error) return sent
    const deadline = performance.now() + (typeof timeoutMs === 'number' ? timeoutMs : SYNC_SEND_TIMEOUT_BLOCKS * blockTimeMs)
    while (performance.now() < deadline) {
      const receipt = await lock.shared(() => anvil.forward({ ...request, method: 'eth_getTransactionReceipt', params: [sent.result] }))
      if (receipt.result || receipt.error) return receipt
      await new Promise((resolve) => setTimeout(resolve, flashblockIntervalMs))
    }
    return { jsonrpc: '2.0', id: request.id ?? null, error: { ...SYNC_SEND_TIMEOUT_ERROR, data: sent.result } }
  }

  function forward(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    if (request.method === 'eth_sendRawTransaction') return lock.exclusive(() => sendRawTransaction(request))
    if (request.method === 'eth_sendRawTransactionSync') return sendRawTransactionSync(request)
    if (request.method === 'eth_sendTransaction') return lock.exclusive(() => sendTransaction(request))
    return lock.shared(() => anvil.forward(request))
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

  let stopped: Promise<void> | undefined
  return {
    forward,
    start: () => {
      if (!stopping) loop ??= run()
    },
    stop: () =>
      (stopped ??= (async () => {
        stopping = true
        wake?.()
        await loop
      })()),
  }
}

function toMessage(slot: Slot, index: number, { block, raws, receipts, balances }: BuiltBlock): FlashblockMessage {
  const zeroHash: Hash = `0x${'0'.repeat(64)}`
  return {
    payload_id: slot.payloadId,
    index,
    ...(index === 0 && {
      base: {
        parent_beacon_block_root: block.parentBeaconBlockRoot ?? zeroHash,
        parent_hash: block.parentHash,
        fee_recipient: block.miner,
        prev_randao: block.mixHash,
        block_number: block.number,
        gas_limit: block.gasLimit,
        timestamp: block.timestamp,
        extra_data: block.extraData,
        base_fee_per_gas: block.baseFeePerGas ?? '0x0',
      },
    }),
    diff: {
      state_root: block.stateRoot,
      receipts_root: block.receiptsRoot,
      logs_bloom: block.logsBloom,
      gas_used: block.gasUsed,
      block_hash: block.hash,
      transactions: raws,
      withdrawals: [],
      ...(block.withdrawalsRoot && { withdrawals_root: block.withdrawalsRoot }),
    },
    metadata: {
      block_number: Number(block.number),
      receipts: Object.fromEntries(receipts.map((receipt) => [receipt.transactionHash, toFlashblockReceipt(receipt)])),
      new_account_balances: balances,
    },
  }
}

/** The consensus receipt, in node-reth's tagged form: what a node cannot derive from the transaction itself. */
function toFlashblockReceipt(receipt: RpcTransactionReceipt): FlashblockReceipt {
  return {
    type: receipt.type as Hex,
    status: receipt.status as Hex,
    cumulativeGasUsed: receipt.cumulativeGasUsed,
    logs: receipt.logs.map(({ address, topics, data }) => ({ address, topics: [...topics], data })),
  }
}

// --- plumbing ------------------------------------------------------------------------------------------

type AnvilClient = {
  forward: (request: JsonRpcRequest) => Promise<JsonRpcResponse>
  /** Answers in request order, and anvil handles them in that order (which FIFO mining depends on). */
  forwardInOrder: (requests: JsonRpcRequest[]) => Promise<JsonRpcResponse[]>
  request: <T = unknown>(method: string, params?: unknown[]) => Promise<T>
}

function createAnvilClient(rpcUrl: string): AnvilClient {
  let nextId = 0
  async function forward(request: JsonRpcRequest): Promise<JsonRpcResponse> {
    const response = await fetch(rpcUrl, {
      method: 'POST',
      // anvil refuses a body without this header (-32600 "Invalid request").
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(request),
    })
    return (await response.json()) as JsonRpcResponse
  }
  async function forwardInOrder(requests: JsonRpcRequest[]): Promise<JsonRpcResponse[]> {
    if (requests.length <= 1) return Promise.all(requests.map(forward))
    const answered: string[] = []
    try {
      await pipeline(new URL(rpcUrl), requests.map((request) => JSON.stringify(request)), answered)
    } catch {
      // The rest one at a time; a request that did reach anvil is answered "already imported".
    }
    const rest = []
    for (const request of requests.slice(answered.length)) rest.push(await forward(request))
    return [...answered.map((body) => JSON.parse(body) as JsonRpcResponse), ...rest]
  }
  async function request<T>(method: string, params: unknown[] = []): Promise<T> {
    const response = await forward({ jsonrpc: '2.0', id: ++nextId, method, params })
    if (response.error) throw new Error(`anvil ${method}: ${response.error.message} (${response.error.code})`)
    return response.result as T
  }
  return { forward, forwardInOrder, request }
}

/**
 * HTTP/1.1 pipelining: every request written at once on one connection. anvil (hyper) handles a
 * connection's requests one after another, so they reach its pool in order, at a fifth of the cost of
 * awaiting each (0.2 ms against 0.85 ms a transaction, measured). A JSON-RPC batch is no substitute:
 * anvil runs a batch's calls concurrently, and FIFO order then follows whichever finished first.
 */
function pipeline(url: URL, bodies: string[], answers: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    let buffer = Buffer.alloc(0)
    const socket = connect(Number(url.port), url.hostname)
    socket.setNoDelay(true)
    socket.on('error', reject)
    socket.on('close', () => reject(new Error(`connection closed after ${answers.length} of ${bodies.length} answers`)))
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk])
      for (let end = buffer.indexOf(HEADER_END); end >= 0; end = buffer.indexOf(HEADER_END)) {
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(buffer.subarray(0, end).toString('latin1'))?.[1]
        if (length === undefined) return socket.destroy(new Error('anvil answered without content-length'))
        const bodyStart = end + HEADER_END.length
        if (buffer.length < bodyStart + Number(length)) return
        const body = buffer.subarray(bodyStart, bodyStart + Number(length)).toString('utf8')
        buffer = buffer.subarray(bodyStart + Number(length))
        answers.push(body)
        if (answers.length === bodies.length) {
          resolve()
          socket.end()
        }
      }
    })
    const host = `${url.hostname}:${url.port}`
    socket.write(
      bodies
        .map((body) => `POST / HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
        .join(''),
    )
  })
}

type ChainLock = {
  /** Reads: any number at once, never during a tick. */
  shared: <T>(fn: () => Promise<T>) => Promise<T>
  /** Ticks and sends: alone. */
  exclusive: <T>(fn: () => Promise<T>) => Promise<T>
}

/** A first-come, first-served read/write lock, so a tick is not starved by a stream of reads. */
function createChainLock(): ChainLock {
  let readers = 0
  let writing = false
  const waiting: { exclusive: boolean; grant: () => void }[] = []
  function pump(): void {
    for (let next = waiting[0]; next !== undefined; next = waiting[0]) {
      if (writing || (next.exclusive && readers > 0)) return
      waiting.shift()
      if (next.exclusive) writing = true
      else readers++
      next.grant()
    }
  }
  async function run<T>(exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    await new Promise<void>((grant) => {
      waiting.push({ exclusive, grant })
      pump()
    })
    try {
      return await fn()
    } finally {
      if (exclusive) writing = false
      else readers--
      pump()
    }
  }
  return { shared: (fn) => run(false, fn), exclusive: (fn) => run(true, fn) }
}
