import { createRequire } from 'node:module'
import { type Block, createBlock } from '@ethereumjs/block'
import { type Common, createCustomCommon, Mainnet } from '@ethereumjs/common'
import { createLegacyTx, createTxFromRLP } from '@ethereumjs/tx'
import { Account, Address, bytesToHex, hexToBytes, setLengthLeft } from '@ethereumjs/util'
import { createVM, runTx, type VM } from '@ethereumjs/vm'
import type { Logger } from 'pino'
import type { Hash, Hex } from 'viem'
import { type CallRequest, toQuantity } from '../../codecs/index.js'
import { isFlashgateError } from '../../errors.js'
import type { FeedReceipt } from '../message.js'
import { buildPendingReceipt } from '../../objects/receipt.js'
import { type Divergence, EXECUTED_BALANCES_KEY, type Hydrate, type PendingBlock, type PendingState, type UpstreamReceipt } from '../state.js'
import type { PendingTransaction } from '../transactions.js'
import { type AccessListResult, type CallKind, runPendingCall } from './call.js'
import {
  BASE_FEE_VAULT,
  DEPOSIT_RECEIPT_VERSION,
  estimatedSizeScaled,
  isJovianL1Info,
  L1_BLOCK,
  L1_FEE_VAULT,
  l1DataFee,
  OPERATOR_FEE_VAULT,
  opReceiptFields,
  operatorFee,
  readL1FeeParameters,
} from './op-stack.js'
import type { PrestateDiff } from '../../ingest/account-diffs.js'
import { ExecutionState, type LoadedAccount, ParentState, type StateLoader } from './state.js'

/** EVM rules the executor applies unless told otherwise: Base's execution layer since Isthmus is Prague's. */
export const DEFAULT_EXECUTION_HARDFORK = 'prague'
/** An answer not produced within this long (its flashblock was never executed) is given up as unknown. */
export const RESULT_TIMEOUT_MS = 10_000
/** Sealed blocks whose state diffs are kept for catching the parent state up (a few seconds of Base). */
const SEALED_DIFFS_KEPT = 16
/** BLOCKHASH sees this many blocks back (the yellow paper's window). */
const BLOCKHASH_WINDOW = 256
/** Cached parent-state entries (accounts and storage slots) kept from block to block at most. */
const MAX_CACHED_ENTRIES = 250_000
/**
 * System contracts Prague writes outside transactions at the start of each block (EIP-4788 beacon roots,
 * EIP-2935 block hashes): their storage is read fresh at each parent, never carried over.
 */
const SYSTEM_CONTRACTS = new Set(['0x000f3df6d732807ef1319fb7b8bb8522d0beac02', '0x0000f90827f1c53a10cb7a02335b175320002935'])
/** EIP-2718 type of an OP-Stack deposit transaction. */
const DEPOSIT_TRANSACTION_TYPE = 0x7e
/** EIP-7685's commitment to no requests (sha256 of nothing): a pending block has none. */
const EMPTY_REQUESTS_HASH = hexToBytes('0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')

/**
 * Public-key recovery for the EVM (senders and the ECRECOVER precompile) by libsecp256k1's native addon,
 * ~20× faster than the pure-JS default; the default stays where the addon does not load.
 */
function nativeEcrecover(): ((hash: Uint8Array, v: bigint, r: Uint8Array, s: Uint8Array, chainId?: bigint) => Uint8Array) | undefined {
  try {
    const native = createRequire(import.meta.url)('secp256k1/bindings') as {
      ecdsaRecover(signature: Uint8Array, recoveryId: number, hash: Uint8Array, compressed: boolean): Uint8Array
    }
    return (hash, v, r, s, chainId) => {
      const recovery = v === 0n || v === 1n ? v : chainId === undefined ? v - 27n : v - (chainId * 2n + 35n)
      if (recovery !== 0n && recovery !== 1n) throw new Error('invalid signature v')
      const signature = new Uint8Array(64)
      signature.set(r.subarray(Math.max(0, r.length - 32)), 32 - Math.min(32, r.length))
      signature.set(s.subarray(Math.max(0, s.length - 32)), 64 - Math.min(32, s.length))
      return native.ecdsaRecover(signature, Number(recovery), hash, false).subarray(1)
    }
  } catch {
    return undefined
  }
}

type Deferred = { promise: Promise<UpstreamReceipt>; resolve: (receipt: UpstreamReceipt) => void }

/** One pending block being executed: its VM over the parent's state, and how far it got. */
type BlockRun = {
  block: PendingBlock
  vm: VM
  header: Block
  /** The header deposits run under: they pay no gas, so no base fee either. */
  depositHeader: Block
  /** Set when the block opened with an OP-Stack deposit (the L1-attributes one): OP-Stack fees and receipts. */
  opStack: { jovian: boolean } | null
  state: ExecutionState
  parent: ParentState
  /** Position in the block of the next transaction to execute. */
  next: number
  gasUsed: bigint
  logCount: number
  /** Set when a transaction could not be executed: the rest of the block is unknown. */
  failed: boolean
}

export type ExecutorStatus = {
  executedTransactions: number
  failedBlocks: number
  /** Blocks that started from the state the block before left, and blocks whose parent state was read afresh. */
  carriedBlocks: number
  freshBlocks: number
  /** Blocks that started from the cache caught up with the sealed blocks' state diffs (the block before was not executed to its end). */
  canonicalBlocks: number
  /** Blocks whose executed receipts were withdrawn because the block they were built on diverged. */
  withdrawnBlocks: number
  /** OP-Stack deposit transactions executed (the L1-attributes one opens every block of such a chain). */
  executedDeposits: number
  /** `eth_call`, `eth_estimateGas` and `eth_createAccessList` at `pending` answered from the executed state. */
  pendingCalls: number
  upstreamReads: number
  cachedEntries: number
  lastFlashblockMs: number | null
}

/**
 * `--pending-source execute`: each flashblock's transactions executed, in order, on the parent block's
 * state (ethereumjs' EVM; why this one: README), producing the receipts, logs and balance changes a
 * flashblocks-aware node would report. State the block reads comes from a cache carried from one block to
 * the next (a block's writes are its child's parent state, when the child follows the block we executed to
 * its end: `continues`), and otherwise from the upstream at the parent block, prefetched for a flashblock's
 * senders and recipients in parallel. A block that opens with an OP-Stack deposit (the
 * L1-attributes one, on Base) is executed by the OP-Stack's rules: deposits, L1 data and operator fees,
 * fee vaults, and the receipts' OP fields (op-stack.ts).
 *
 * It hears the transactions from the pending state's `transactions` event and answers the state's
 * `Hydrate` calls (by hash) from what it executed, so that workers asking through their primary get the
 * same answers. It also runs `eth_call`, `eth_estimateGas` and `eth_createAccessList` at `pending` on the
 * state it executed (`call`, call.ts).
 */
export function createFlashblockExecutor({
  state,
  chainId,
  hardfork = DEFAULT_EXECUTION_HARDFORK,
  request,
  logger,
  maxCachedEntries = MAX_CACHED_ENTRIES,
}: {
  state: PendingState
  chainId: number
  hardfork?: string
  /** Reads from the upstream; calls made together should share a round trip (`Upstream.batchedRequest`). */
  request: <T>(method: string, params: unknown[]) => Promise<T>
  logger: Logger
  maxCachedEntries?: number
}) {
  const ecrecover = nativeEcrecover()
  const common: Common = createCustomCommon({ chainId }, Mainnet, { hardfork, ...(ecrecover ? { customCrypto: { ecrecover } } : {}) })
  const results = new Map<Hash, Deferred>()
  let parentAt: Hex = '0x0'
  let upstreamReads = 0
  /** Accounts' balance, nonce and code at the parent, asked together (one round trip with a batching `request`). */
  const loadAccounts = async (addresses: Hex[]): Promise<LoadedAccount[]> => {
    const at = parentAt
    upstreamReads += addresses.length
    const answers = await Promise.all(
      addresses.flatMap((address) => [
        request<Hex>('eth_getBalance', [address, at]),
        request<Hex>('eth_getTransactionCount', [address, at]),
        request<Hex>('eth_getCode', [address, at]),
      ]),
    )
    return addresses.map((_, offset) => {
      const [balance, nonce, code] = answers.slice(offset * 3, offset * 3 + 3) as [Hex, Hex, Hex]
      if (BigInt(balance) === 0n && BigInt(nonce) === 0n && code === '0x') return null
      return { balance: BigInt(balance), nonce: BigInt(nonce), code }
    })
  }
  const loader: StateLoader = {
    account: async (address) => (await loadAccounts([address]))[0]!,
    accounts: loadAccounts,
    storage(address, slot) {
      upstreamReads++
      return request<Hex>('eth_getStorageAt', [address, slot, parentAt])
    },
  }
  let parent = new ParentState(loader, maxCachedEntries, SYSTEM_CONTRACTS)
  /** The block whose state `parent` holds; `null` when that state may be wrong (built on a diverged block). */
  let parentBlock: { number: number; hash: Hex } | null = null
  /** Sealed blocks' state diffs, by number, as the ingester fetched them (recent blocks only). */
  const sealedDiffs = new Map<number, { hash: Hex; parentHash: Hex; diffs: readonly PrestateDiff[]; reread: string[] }>()
  /**
   * Hashes of the pending block's ancestors, for BLOCKHASH: the parent's from the feed, older ones read from
   * the upstream when a transaction asks (kept while blocks follow one another; a fresh start forgets them).
   */
  let ancestorHashes = new Map<number, Promise<Uint8Array>>()
  const blockchain = {
    async getBlock(number: number) {
      let hash = ancestorHashes.get(number)
      if (hash === undefined) {
        upstreamReads++
        hash = request<{ hash: Hex } | null>('eth_getBlockByNumber', [toQuantity(number), false]).then((block) =>
          block === null ? new Uint8Array(32) : hexToBytes(block.hash),
        )
        ancestorHashes.set(number, hash)
        hash.catch(() => ancestorHashes.delete(number))
      }
      const bytes = await hash
      return { hash: () => bytes }
    },
    async putBlock() {},
    shallowCopy() {
      return blockchain
    },
  }
  let run: BlockRun | null = null
  /** Flashblocks are executed one after another, across blocks: each may build on the one before. */
  let chain: Promise<unknown> = Promise.resolve()
  const status = {
    executedTransactions: 0,
    failedBlocks: 0,
    carriedBlocks: 0,
    freshBlocks: 0,
    canonicalBlocks: 0,
    withdrawnBlocks: 0,
    executedDeposits: 0,
    pendingCalls: 0,
    lastFlashblockMs: null as number | null,
  }

  function deferred(hash: Hash): Deferred {
    let entry = results.get(hash)
    if (entry === undefined) {
      let resolve!: (receipt: UpstreamReceipt) => void
      const promise = new Promise<UpstreamReceipt>((done) => {
        resolve = done
      })
      entry = { promise, resolve }
      results.set(hash, entry)
      const expire = setTimeout(() => {
        entry!.resolve(null)
        results.delete(hash)
      }, RESULT_TIMEOUT_MS)
      expire.unref()
    }
    return entry
  }

  async function startRun(block: PendingBlock): Promise<BlockRun> {
    if (run !== null && continues(run, block)) {
      parent.apply(run.state)
      status.carriedBlocks++
    } else if (catchUp(block)) {
      status.canonicalBlocks++
    } else {
      parent = new ParentState(loader, maxCachedEntries, SYSTEM_CONTRACTS)
      ancestorHashes = new Map()
      status.freshBlocks++
    }
    parentBlock = { number: block.number - 1, hash: block.header.parentHash }
    ancestorHashes.set(block.number - 1, Promise.resolve(hexToBytes(block.header.parentHash)))
    for (const number of ancestorHashes.keys()) if (number < block.number - BLOCKHASH_WINDOW) ancestorHashes.delete(number)
    parentAt = toQuantity(block.number - 1)
    const executionState = new ExecutionState(parent)
    const vm = await createVM({ common, stateManager: executionState, blockchain })
    return {
      block,
      vm,
      header: headerOf(block, block.header.baseFeePerGas),
      depositHeader: headerOf(block, 0n),
      opStack: null,
      state: executionState,
      parent,
      next: 0,
      gasUsed: 0n,
      logCount: 0,
      failed: false,
    }
  }

  /**
   * Whether `block` is built on the state `previous` left: `previous` executed every transaction of the block
   * before without failing, and that block is this one's parent. A legacy feed says so by hash: its last
   * flashblock's `block_hash` is the sealed block's, this block's parent hash. Base's builder today sends a
   * `block_hash` per flashblock that is never the sealed block's (that flashblock's header with a zero state
   * root), so there the index 0's `prev_flashblock_id` says it: it follows exactly the last flashblock the run
   * executed (not a later one whose transactions never arrived).
   *
   * The link says what the builder built on, not what sealed. That is safe because the pending state's
   * `confirm` compares the sealed block with what was pre-confirmed: a sealed block at that height whose hash
   * is not this block's parent hash, or whose transactions differ, drops the view, so this block is no longer
   * `building` and its run stops; and each difference it finds (those, or a receipt) is a divergence, on which
   * `onDivergence` fails this run and withdraws the receipts it published. Had the block before sealed
   * differently before this one opened, the divergence has already failed `previous`.
   */
  function continues(previous: BlockRun, block: PendingBlock): boolean {
    const before = previous.block
    if (previous.failed || before.number !== block.number - 1 || previous.next !== before.transactionCount) return false
    if (before.header.blockHash !== null && before.header.blockHash === block.header.parentHash) return true
    const { follows } = block
    return follows !== null && follows.blockNumber === before.number && follows.index === before.lastIndex
  }

  /**
   * When the block before was not executed to its end (a transaction the EVM refused, a divergence found
   * before this block started), the cache may still be brought to this block's parent by the state diffs of
   * the blocks sealed since the one it holds, each the parent of the next, the last this block's parent.
   */
  function catchUp(block: PendingBlock): boolean {
    if (parentBlock === null || parentBlock.number >= block.number - 1) return false
    const steps: { diffs: readonly PrestateDiff[]; reread: string[] }[] = []
    let hash = parentBlock.hash
    for (let number = parentBlock.number + 1; number < block.number; number++) {
      const sealed = sealedDiffs.get(number)
      if (sealed === undefined || sealed.parentHash !== hash) return false
      steps.push(sealed)
      hash = sealed.hash
    }
    if (hash !== block.header.parentHash) return false
    for (const { diffs, reread } of steps) parent.applyDiffs(diffs, reread)
    return true
  }

  /** A sealed block from the ingester: its state diffs, when it kept them, for `catchUp`. */
  function sealed(block: { number: number; hash: Hex; block: { parentHash: Hex; withdrawals?: { address: Hex }[] }; stateDiffs?: readonly PrestateDiff[] }) {
    if (block.stateDiffs === undefined) return
    sealedDiffs.set(block.number, {
      hash: block.hash,
      parentHash: block.block.parentHash,
      diffs: block.stateDiffs,
      reread: (block.block.withdrawals ?? []).map((withdrawal) => withdrawal.address),
    })
    for (const number of sealedDiffs.keys()) if (number <= block.number - SEALED_DIFFS_KEPT) sealedDiffs.delete(number)
  }

  /** The pending block's header for the EVM; a call that pays no fee sees a zero base fee (geth's `NoBaseFee`). */
  function headerOf({ number, header }: PendingBlock, baseFeePerGas: bigint): Block {
    return createBlock(
      {
        header: {
          number: BigInt(number),
          parentHash: hexToBytes(header.parentHash),
          timestamp: header.timestamp,
          gasLimit: header.gasLimit,
          baseFeePerGas,
          coinbase: hexToBytes(header.feeRecipient),
          mixHash: header.prevRandao === null ? undefined : hexToBytes(header.prevRandao),
          difficulty: 0n,
          excessBlobGas: 0n,
          blobGasUsed: 0n,
          parentBeaconBlockRoot: header.parentBeaconBlockRoot === null ? undefined : hexToBytes(header.parentBeaconBlockRoot),
          requestsHash: EMPTY_REQUESTS_HASH,
        },
      },
      { common, skipConsensusFormatValidation: true },
    )
  }

  /** Reads what the flashblock's transactions will surely touch, in parallel, before the EVM asks one at a time. */
  async function prefetch(current: BlockRun, transactions: PendingTransaction[]): Promise<void> {
    if (transactions.length === 0) return
    const addresses = new Set<string>([current.block.header.feeRecipient])
    if (current.opStack !== null || transactions[0]?.type === DEPOSIT_TRANSACTION_TYPE)
      for (const address of [L1_BLOCK, BASE_FEE_VAULT, L1_FEE_VAULT, OPERATOR_FEE_VAULT]) addresses.add(address)
    for (const transaction of transactions) {
      addresses.add(transaction.from)
      if (transaction.to !== null) addresses.add(transaction.to)
    }
    await current.parent.prefetch(addresses)
  }

  /** The L1 fee parameters as the block so far left them in the L1Block predeploy. */
  function l1Parameters(state: ExecutionState, jovian: boolean) {
    const l1Block = new Address(hexToBytes(L1_BLOCK))
    return readL1FeeParameters(async (slot) => setLengthLeft(await state.getStorage(l1Block, setLengthLeft(hexToBytes(toQuantity(slot)), 32)), 32), jovian)
  }

  /** Adds `amount` (negative: takes it) to an account's balance, outside any transaction. */
  async function credit(state: ExecutionState, address: Hex, amount: bigint): Promise<void> {
    if (amount === 0n) return
    const key = new Address(hexToBytes(address))
    const account = (await state.getAccount(key)) ?? new Account()
    account.balance += amount
    if (account.balance < 0n) throw new Error(`${address} cannot pay ${-amount} wei of OP-Stack fees`)
    await state.putAccount(key, account)
  }

  /**
   * An OP-Stack deposit (type 0x7e): its mint credited first and kept whatever happens; then run as a call
   * that pays no gas (a zero gas price under a zero base fee), with its sender from the envelope. A deposit
   * the EVM refuses (say its value exceeds the sender's balance) or halts is still included: failed, all its
   * gas used, nothing kept but the mint and the sender's nonce.
   */
  async function runDeposit(current: BlockRun, transaction: PendingTransaction) {
    const { fields } = transaction
    const sender = new Address(hexToBytes(transaction.from))
    await credit(current.state, transaction.from, BigInt(fields.mint as Hex))
    const nonce = (await current.state.getAccount(sender))?.nonce ?? 0n
    const gasLimit = BigInt(fields.gas as Hex)
    const tx = createLegacyTx(
      { nonce, gasPrice: 0n, gasLimit, to: transaction.to ?? undefined, value: BigInt(fields.value as Hex), data: hexToBytes(fields.input as Hex) },
      { common, freeze: false },
    )
    Object.assign(tx, { getSenderAddress: () => sender })
    const failed = async () => {
      const account = (await current.state.getAccount(sender)) ?? new Account()
      if (account.nonce === nonce) account.nonce++
      await current.state.putAccount(sender, account)
      return { status: 0 as const, cumulativeGasUsed: current.gasUsed + gasLimit, logs: [], depositNonce: nonce }
    }
    let result: Awaited<ReturnType<typeof runTx>>
    try {
      result = await runTx(current.vm, { tx, block: current.depositHeader, blockGasUsed: current.gasUsed, skipHardForkValidation: true })
    } catch {
      return failed()
    }
    const error = result.execResult.exceptionError
    if (error !== undefined && error.error !== 'revert') return failed()
    return {
      status: error === undefined ? (1 as const) : (0 as const),
      cumulativeGasUsed: result.receipt.cumulativeBlockGasUsed,
      logs: result.receipt.logs,
      depositNonce: nonce,
    }
  }

  /**
   * A signed transaction. On an OP-Stack chain, its L1 data fee and its operator fee on its gas limit are
   * taken from the sender before it runs; after it, the unused operator fee is given back, and the L1 fee,
   * the base fee and the operator fee are paid to their vaults.
   */
  async function runSigned(current: BlockRun, transaction: PendingTransaction) {
    const tx = createTxFromRLP(hexToBytes(transaction.raw), { common })
    // The sender was recovered when the frame was decoded; ethereumjs keeps the key on the (shallowly) frozen tx.
    if (transaction.senderPublicKey !== undefined) tx.cache.senderPubKey = transaction.senderPublicKey
    const op = current.opStack
    const parameters = op === null ? null : await l1Parameters(current.state, op.jovian)
    const sizeScaled = parameters === null ? 0n : estimatedSizeScaled(transaction.raw)
    const l1Fee = parameters === null ? 0n : l1DataFee(sizeScaled, parameters)
    const operatorCharge = parameters === null ? 0n : operatorFee(tx.gasLimit, parameters)
    if (parameters !== null) await credit(current.state, transaction.from, -(l1Fee + operatorCharge))
    const result = await runTx(current.vm, { tx, block: current.header, blockGasUsed: current.gasUsed, skipHardForkValidation: true })
    const { receipt } = result
    let extra: Record<string, Hex> = {}
    if (parameters !== null) {
      const gasUsed = receipt.cumulativeBlockGasUsed - current.gasUsed
      const operatorPaid = operatorFee(gasUsed, parameters)
      await credit(current.state, transaction.from, operatorCharge - operatorPaid)
      await credit(current.state, L1_FEE_VAULT, l1Fee)
      await credit(current.state, BASE_FEE_VAULT, current.block.header.baseFeePerGas * gasUsed)
      await credit(current.state, OPERATOR_FEE_VAULT, operatorPaid)
      extra = opReceiptFields(sizeScaled, l1Fee, parameters)
    }
    return {
      status: 'status' in receipt && receipt.status === 1 ? (1 as const) : (0 as const),
      cumulativeGasUsed: receipt.cumulativeBlockGasUsed,
      logs: receipt.logs,
      extra,
    }
  }

  async function executeOne(current: BlockRun, transaction: PendingTransaction): Promise<UpstreamReceipt> {
    const deposit = transaction.type === DEPOSIT_TRANSACTION_TYPE
    // An OP-Stack block opens with the L1-attributes deposit; its call says which upgrade's rules apply.
    if (deposit && transaction.index === 0) current.opStack = { jovian: isJovianL1Info(transaction.fields.input as Hex) }
    let ran: { status: 0 | 1; cumulativeGasUsed: bigint; logs: [Uint8Array, Uint8Array[], Uint8Array][]; extra?: Record<string, Hex> }
    if (deposit) {
      const { depositNonce, ...rest } = await runDeposit(current, transaction)
      const parameters = current.opStack === null ? null : await l1Parameters(current.state, current.opStack.jovian)
      ran = {
        ...rest,
        extra: {
          ...(parameters === null ? {} : opReceiptFields(estimatedSizeScaled(transaction.raw), 0n, parameters)),
          depositNonce: toQuantity(depositNonce),
          depositReceiptVersion: toQuantity(DEPOSIT_RECEIPT_VERSION),
        },
      }
      status.executedDeposits++
    } else ran = await runSigned(current, transaction)
    const cumulativeGasUsed = ran.cumulativeGasUsed
    const feedReceipt: FeedReceipt = {
      type: transaction.type,
      status: ran.status,
      cumulativeGasUsed,
      logs: ran.logs.map(([address, topics, data]) => ({
        address: bytesToHex(address) as Hex,
        topics: topics.map((topic) => bytesToHex(topic) as Hash),
        data: bytesToHex(data) as Hex,
      })),
      extra: ran.extra ?? {},
    }
    const built = buildPendingReceipt({
      transaction,
      receipt: feedReceipt,
      firstLogIndex: current.logCount,
      previousCumulativeGasUsed: current.gasUsed,
      block: { number: current.block.number, timestamp: current.block.header.timestamp, baseFeePerGas: current.block.header.baseFeePerGas },
    })
    current.gasUsed = cumulativeGasUsed
    current.logCount += feedReceipt.logs.length
    const balances: Record<string, Hex> = {}
    for (const [address, account] of current.state.takeTouched()) balances[address] = toQuantity(account.balance)
    return { ...built, [EXECUTED_BALANCES_KEY]: balances }
  }

  async function executeFlashblock(block: PendingBlock, transactions: PendingTransaction[]): Promise<void> {
    // A block sealed, replaced or dropped while this waited its turn (execution fell behind, say while the
    // upstream was failing): nothing to pre-confirm any more, so the queue drains instead of growing.
    if (!state.building(block)) {
      for (const transaction of transactions) deferred(transaction.hash).resolve(null)
      // Its execution stops short of the block's end: its state is not the next block's parent state.
      if (run !== null && run.block === block) run.failed = true
      return
    }
    const started = performance.now()
    if (run === null || run.block !== block) run = await startRun(block)
    const current = run
    if (!current.failed) await prefetch(current, transactions)
    for (const transaction of transactions) {
      const entry = deferred(transaction.hash)
      if (!current.failed && transaction.index !== current.next) {
        current.failed = true
        logger.warn(
          { block: block.number, expected: current.next, got: transaction.index },
          'a transaction of the block is missing (undecodable): the rest of the block is not executed',
        )
      }
      if (current.failed) {
        entry.resolve(null)
        continue
      }
      try {
        entry.resolve(await executeOne(current, transaction))
        current.next++
        status.executedTransactions++
      } catch (error) {
        current.failed = true
        status.failedBlocks++
        logger.warn(
          { block: block.number, transaction: transaction.hash, err: error instanceof Error ? error.message : String(error) },
          'could not execute a pre-confirmed transaction: the rest of its block has no executed receipts',
        )
        entry.resolve(null)
      }
    }
    status.lastFlashblockMs = performance.now() - started
  }

  const onTransactions = (block: PendingBlock, transactions: PendingTransaction[]) => {
    for (const transaction of transactions) deferred(transaction.hash)
    chain = chain
      .then(() => executeFlashblock(block, transactions))
      .catch((error: unknown) => {
        // An upstream read that failed (or anything else): the block stops here, and its answers are given up
        // now rather than when they expire, which would hold up the receipts published after them.
        if (run !== null && run.block === block) run.failed = true
        status.failedBlocks++
        for (const transaction of transactions) deferred(transaction.hash).resolve(null)
        logger.warn(
          { block: block.number, err: error instanceof Error ? error.message : String(error) },
          'flashblock execution failed: the rest of its block has no executed receipts',
        )
      })
  }
  /**
   * A pre-confirmation that turned out wrong: a block being executed on top of it (its state carried from the
   * wrong one) has its receipts withdrawn and executes no further; the next block starts afresh either way.
   */
  const onDivergence = ({ number }: Divergence) => {
    // A cache holding the diverged block's executed writes is wrong from there on.
    if (parentBlock !== null && parentBlock.number >= number) parentBlock = null
    if (run === null || run.block.number < number) return
    // Its state is not carried to the next block (the diverged block's own run, not yet followed by another).
    run.failed = true
    if (run.block.number === number) return
    status.withdrawnBlocks++
    state.withdraw(run.block.number)
  }
  state.events.on('transactions', onTransactions)
  state.events.on('divergence', onDivergence)

  const hydrate: Hydrate = Object.assign((hashes: Hash[]) => Promise.all(hashes.map((hash) => deferred(hash).promise)), { providesBalances: true })

  /**
   * `eth_call`, `eth_estimateGas` or `eth_createAccessList` on the state `block`'s executed transactions left;
   * `null` when this executor has no such state (another block is being executed, or this one's execution
   * stopped), or when the EVM refuses to run the call (the node words those errors): the caller forwards it.
   * The state is copied on `chain`, between two flashblocks and so never halfway through a transaction, and
   * the call runs on the copy off `chain`: a call reading cold state from the upstream, or an estimate's dozen
   * runs, never holds up the next flashblock, and nothing it does reaches the pending state. State the copy
   * lacks is read through the parent state like the block's own: should the block seal meanwhile, from the
   * sealed block.
   */
  async function call(block: PendingBlock, kind: CallKind, request: CallRequest): Promise<Hex | AccessListResult | null> {
    const copying = chain.then(() => (run !== null && run.block === block && !run.failed ? run.state.shallowCopy() : null))
    chain = copying
    const copy = await copying
    if (copy === null) return null
    const paysFees = (request.gasPrice ?? request.maxFeePerGas ?? request.maxPriorityFeePerGas ?? 0n) > 0n
    const header = headerOf(block, paysFees ? block.header.baseFeePerGas : 0n)
    try {
      const answer = await runPendingCall(kind, { vm: await createVM({ common, stateManager: copy, blockchain }), state: copy, header, request })
      status.pendingCalls++
      return answer
    } catch (error) {
      if (isFlashgateError(error)) {
        status.pendingCalls++
        throw error
      }
      logger.debug({ method: kind, err: error instanceof Error ? error.message : String(error) }, 'the EVM refused a pending call: forwarded')
      return null
    }
  }

  return {
    hydrate,
    call,
    sealed,
    /** Waits for every flashblock heard so far to be executed. */
    idle: () => chain,
    status(): ExecutorStatus {
      return { ...status, upstreamReads, cachedEntries: parent.size }
    },
    stop() {
      state.events.off('transactions', onTransactions)
      state.events.off('divergence', onDivergence)
    },
  }
}

export type FlashblockExecutor = ReturnType<typeof createFlashblockExecutor>
