import { EventEmitter } from 'node:events'
import type { Logger } from 'pino'
import { type Address, type Hash, type Hex, keccak256 } from 'viem'
import type { FeedReceipt, FlashblockMessage } from './message.js'
import {
  buildPendingReceipt,
  normaliseUpstreamReceipt,
  type PendingReceipt,
  learnForm,
  type NodeForm,
  receiptInNodeForm,
  sealedForm,
  unknownNodeForm,
} from '../objects/receipt.js'
import { type Decoded, decodeInline } from './decode-pool.js'
import type { PendingTransaction } from './transactions.js'

/** A feed silent for this long is stale: `pending` then answers as `latest` (DESIGN.md §5). */
export const FLASHBLOCK_STALE_MS = 2_000
/**
 * Pre-confirmed blocks kept at most: if the index stops advancing (upstream down) while the feed goes on,
 * the oldest go first; 32 blocks is a minute of Base.
 */
const MAX_PENDING_BLOCKS = 32
/** Pre-confirmed blocks the index already holds are kept this many blocks more, for `confirm` to reconcile. */
const KEEP_CONFIRMED_BLOCKS = 2
/**
 * How long an index 0 built on a parent the index does not hold yet (a reorg of the sealed head it has not
 * ingested) is kept out of view waiting for that parent: one Base block, the feed's own staleness bound.
 */
export const AWAIT_PARENT_MS = FLASHBLOCK_STALE_MS
/** Index-0 frames remembered to tell a late repeat from a new start (`started` in createPendingState). */
const REMEMBERED_STARTS = 64
/** Hydration lag samples kept for `status()` (the newest ones). */
const LAG_SAMPLES = 256

/** The header of the block being built: `base` fields from index 0, roots and gas from the latest diff. */
export type PendingHeader = {
  parentHash: Hash
  feeRecipient: Address
  timestamp: bigint
  baseFeePerGas: bigint
  gasLimit: bigint
  extraData: Hex
  prevRandao: Hash | null
  parentBeaconBlockRoot: Hash | null
  stateRoot: Hash | null
  receiptsRoot: Hash | null
  logsBloom: Hex | null
  gasUsed: bigint | null
  blockHash: Hash | null
  withdrawals: Record<string, unknown>[]
  withdrawalsRoot: Hash | null
  blobGasUsed: bigint | null
}

export type PendingBlock = {
  number: number
  payloadId: string
  /** Index of the last flashblock applied. */
  lastIndex: number
  /**
   * The flashblock its index 0 says it follows (`prev_flashblock_id`: the last one the builder sent of the block
   * before); `null` where the feed names none (a legacy feed, or the builder's first after a restart).
   */
  follows: { blockNumber: number; index: number } | null
  /** Grows with every change a reader can see (a flashblock applied, receipts arrived): a cache key. */
  version: number
  header: PendingHeader
  /** The decoded transactions, in block order; `transaction.index` is the position in the block. */
  transactions: PendingTransaction[]
  /** Aligned with `transactions`; `null` while no receipt is known (not hydrated yet, or frames only). */
  receipts: (PendingReceipt | null)[]
  /** Positions taken in the block, undecodable transactions included. */
  transactionCount: number
  /** Latest balance of each account the feed reported for this block (legacy feeds only). */
  balances: Map<Address, bigint>
  /** Whether the feed sent balances for every flashblock of this block (legacy feeds). */
  reportsBalances: boolean
  /** Cumulative gas and log count after the feed receipts so far (to derive gas used and log indexes). */
  cumulativeGasUsed: bigint
  logCount: number
  /**
   * Whether those counts hold: false from the first transaction a receipt-carrying feed sent without a usable
   * receipt, after which the feed's receipts of the block can give neither gas used nor log indexes.
   */
  countsKnown: boolean
  /** How the node writes its objects, as known now (the view's one form, shared by its blocks); absent: as built. */
  form?: NodeForm
}

/**
 * What a message did to the pending view. An index 0 built on a parent the index does not hold yet is
 * `dropped` (the view goes) and kept aside with its later flashblocks (`ignored`: nothing shown) until the
 * index holds that parent (`awaitingParent`).
 */
export type ApplyOutcome = 'started' | 'appended' | 'duplicate' | 'ignored' | 'dropped'

export type PendingStateEvents = {
  /** The pending view changed (a flashblock applied, receipts arrived, a block confirmed or the state dropped). */
  update: []
  /** Transactions newly pre-confirmed, in order, as soon as their flashblock arrives (receipts may follow). */
  transactions: [block: PendingBlock, transactions: PendingTransaction[]]
  /** Receipts that became known, per block in transaction order; never reordered. */
  receipts: [block: PendingBlock, receipts: PendingReceipt[]]
  /**
   * A flashblock's receipts came from the upstream: the round trips took `upstreamMs`, and they were visible
   * `visibleMs` after the flashblock was applied (the difference is flashgate's own work and the wait for
   * earlier flashblocks' answers).
   */
  hydrated: [timing: { upstreamMs: number; visibleMs: number }]
  /** A canonical block differed from its pre-confirmation (reconciliation by content). */
  divergence: [divergence: Divergence]
  /**
   * Receipts taken back: they differed from the sealed block's, or were built on a pre-confirmation that did
   * (flashgate's own execution). Their logs are announced again with `removed: true`.
   */
  withdrawn: [block: PendingBlock, receipts: PendingReceipt[]]
  /**
   * An index 0 of block `number` names a parent the index does not hold (yet): it is kept out of view until
   * the index holds `parentHash` at `number - 1`; asking the upstream for its head now shortens the wait.
   */
  awaitingParent: [number: number, parentHash: Hash]
}

export type Divergence = { number: number; kind: 'transactions' | 'parent' | 'receipt'; detail: string }

/** A receipt as the upstream answers `eth_getTransactionReceipt`, or `null` when it has none. */
export type UpstreamReceipt = Record<string, unknown> | null

/**
 * Fetches the receipts of a flashblock's transactions from a flashblocks-aware upstream, in one round trip;
 * aligned with `hashes`, `null` where the upstream has none.
 */
/**
 * Receipts of pre-confirmed transactions, `null` where the upstream has none (yet). `live` says whether the
 * flashblock still matters: once its block is sealed or dropped, waiting for more receipts is pointless.
 */
export type Hydrate = ((hashes: Hash[], options?: { live?: () => boolean }) => Promise<UpstreamReceipt[]>) & {
  /**
   * Whether its receipts carry their transaction's balance changes under `EXECUTED_BALANCES_KEY` (flashgate's
   * own execution does; a node's receipts do not): then the pending balances are known without the feed's.
   */
  providesBalances?: boolean
}

/** The key under which an executed receipt carries the balances its transaction left (never served). */
export const EXECUTED_BALANCES_KEY = 'flashgateBalances'

/** What the canonical block looked like, for reconciliation by content. */
export type CanonicalBlock = {
  number: number
  hash: Hash
  transactionHashes: Hash[]
  /** The node's receipts (every field it reports is compared with the pre-confirmed one's, where that has it). */
  receipts?: (Record<string, unknown> & { logs: { address: string; topics: readonly string[]; data: string; logIndex?: unknown }[] })[]
  /** How the node writes its receipts and transactions, from this block's (its receipts alone tell some when absent). */
  form?: Partial<NodeForm>
}

export type PendingStateConfig = {
  logger: Logger
  /** Receipts for flashblocks whose frames carry none; without it they stay unknown (frames only). */
  hydrate?: Hydrate | null
  staleAfterMs?: number
  now?: () => number
  /** Decodes a flashblock's transactions with their senders (a pool of threads: decode-pool.ts); inline by default. */
  decode?: (raws: Hex[]) => Promise<Decoded[]>
}

/**
 * The pre-confirmed blocks above the indexed head, built from Flashblocks messages under Base's sequence
 * rules: index 0 starts a block, the next index appends, a duplicate is ignored, a gap or an out-of-order
 * index drops everything until the next index 0; blocks go as their canonical blocks are indexed. A late
 * frame of a payload the view has moved past (another builder's block at its height, or the next block) is
 * ignored rather than taken for a new start or a gap, which would take the newer payload's block down.
 *
 * What the frames give (transactions, senders, nonces) is visible as soon as a frame is applied. Receipts
 * come from the frame where a feed still sends them, otherwise from `hydrate`: its round trips run
 * concurrently, one per flashblock, so a slow upstream never holds up the feed, and their answers are
 * published in flashblock order.
 */
export function createPendingState(config: PendingStateConfig) {
  const { logger } = config
  const staleAfterMs = config.staleAfterMs ?? FLASHBLOCK_STALE_MS
  const now = config.now ?? Date.now
  const decode = config.decode ?? decodeInline
  const events = new EventEmitter<PendingStateEvents>()
  let hydrate: Hydrate | null = config.hydrate ?? null
  let blocks: PendingBlock[] = []
  let awaitingStart = true
  let confirmedHead = -1
  /** The hash of the block at `confirmedHead`, while it is known (not after a rewind below it). */
  let confirmedHash: Hash | null = null
  let lastMessageAt = Number.NEGATIVE_INFINITY
  // Messages are applied one at a time, in arrival order (sender recovery is asynchronous).
  let queue: Promise<unknown> = Promise.resolve()
  // Receipts are published in flashblock order: each publication waits for the one before it.
  let published: Promise<unknown> = Promise.resolve()
  /** Dropping the state starts a new epoch: answers for an older one are ignored. */
  let epoch = 0
  const hydration = { inFlight: 0, failures: 0, missing: 0, completed: 0, lagsMs: [] as number[], lastError: null as string | null }
  const divergences = { transactions: 0, parent: 0, receipt: 0 }
  let reconciled = 0
  /** How the node writes its receipts and transactions (learnt from the sealed ones; as built until then); each block has it. */
  const form = unknownNodeForm()
  /** Whether the latest flashblock with transactions carried their receipts (a legacy feed). */
  let feedSendsReceipts = false
  /**
   * The flashblocks so far of a block whose index 0 named a parent other than the indexed head: the sealed head
   * may have been replaced (a reorg) before the index ingested it. Shown once the index holds that parent, if
   * within `AWAIT_PARENT_MS` of its index 0; forgotten when the index holds another block at the parent's
   * height or any block above it, another index 0 or payload comes, or the feed is reset. Nothing of it is
   * shown before: never a pre-confirmed block on a parent the chain may not have.
   */
  let awaiting: { number: number; parentHash: Hash; payloadId: string; messages: FlashblockMessage[]; since: number } | null = null
  /**
   * The index-0 frames that started blocks since the state was last dropped, by payload id (the newest
   * `REMEMBERED_STARTS`), as `startOf` sums them up. A payload here that is not the newest block's is one the
   * view moved past: its frames come late (a replaced builder's, a proxy's replay) and change nothing. Its
   * index 0 again with other content is a new start (the same payload id rebuilt), and is taken as one.
   * Forgotten when the state is dropped: after that, any index 0 is welcome (a feed that reconnects may send the
   * block in progress from its start again).
   */
  const started = new Map<string, string>()

  function drop(reason: string) {
    if (blocks.length > 0) logger.warn({ reason }, 'dropping pre-confirmed state until the next index 0')
    blocks = []
    started.clear()
    awaitingStart = true
    epoch++
    events.emit('update')
  }

  function live(block: PendingBlock, blockEpoch: number): boolean {
    return blockEpoch === epoch && blocks.includes(block)
  }

  /** Makes receipts known and announces them, in order after every earlier publication. */
  function publish(
    block: PendingBlock,
    blockEpoch: number,
    produce: () => Promise<(PendingReceipt | null)[]> | (PendingReceipt | null)[],
    positions: number[],
    onVisible?: () => void,
    onAccepted?: (offset: number) => void,
  ) {
    const produced = Promise.resolve().then(produce)
    // Its failure (logged by `produce`) is taken below, in turn; it may come while an earlier publication is
    // still waiting for its own answer, and must not count as unhandled meanwhile.
    produced.catch(() => {})
    // The answer is awaited in order, but fetched at once: the round trips overlap.
    published = published.then(async () => {
      let receipts: (PendingReceipt | null)[]
      try {
        receipts = await produced
      } catch {
        return
      }
      if (!live(block, blockEpoch)) return
      const announced: PendingReceipt[] = []
      receipts.forEach((receipt, offset) => {
        const position = positions[offset]!
        if (receipt === null || block.receipts[position] !== null) return
        const written = receiptInNodeForm(receipt, form)
        block.receipts[position] = written
        onAccepted?.(offset)
        announced.push(written)
      })
      if (announced.length === 0) return
      block.version++
      events.emit('update')
      events.emit('receipts', block, announced)
      onVisible?.()
    })
    // A publication that throws (a listener) is logged; the ones after it still run.
    published = published.catch((error: unknown) => logger.error({ err: error, block: block.number }, 'could not publish pre-confirmed receipts'))
  }

  function hydrateReceipts(block: PendingBlock, transactions: PendingTransaction[], positions: number[]) {
    if (hydrate === null || transactions.length === 0) return
    const fetchReceipts = hydrate
    const started = performance.now()
    let upstreamMs = 0
    const blockEpoch = epoch
    const balanceChanges: (Record<string, Hex> | undefined)[] = []
    hydration.inFlight++
    publish(
      block,
      blockEpoch,
      async () => {
        try {
          const answers = await fetchReceipts(
            transactions.map((transaction) => transaction.hash),
            { live: () => live(block, blockEpoch) },
          )
          const receipts = answers.map((answer, offset) => {
            const transaction = transactions[offset]!
            let receipt: PendingReceipt | null = null
            if (answer !== null && answer !== undefined) {
              const { [EXECUTED_BALANCES_KEY]: balances, ...fields } = answer
              if (fetchReceipts.providesBalances === true) balanceChanges[offset] = balances as Record<string, Hex> | undefined
              receipt = normaliseUpstreamReceipt(fields, transaction, block.number)
            }
            if (receipt === null) hydration.missing++
            return receipt
          })
          hydration.completed++
          upstreamMs = performance.now() - started
          hydration.lagsMs.push(upstreamMs)
          if (hydration.lagsMs.length > LAG_SAMPLES) hydration.lagsMs.shift()
          return receipts
        } catch (error) {
          hydration.failures++
          hydration.lastError = error instanceof Error ? error.message : String(error)
          if (live(block, blockEpoch)) logger.warn({ err: error, block: block.number }, 'could not hydrate pre-confirmed receipts')
          throw error
        } finally {
          hydration.inFlight--
        }
      },
      positions,
      () => events.emit('hydrated', { upstreamMs, visibleMs: performance.now() - started }),
      (offset) => {
        for (const [address, balance] of Object.entries(balanceChanges[offset] ?? {})) block.balances.set(address as Address, BigInt(balance))
      },
    )
  }

  async function decodeAll(raws: Hex[]): Promise<(PendingTransaction | null)[]> {
    const decoded = await decode(raws)
    return decoded.map((transaction, offset) => {
      if (!(transaction instanceof Error)) return transaction
      logger.warn({ err: transaction.message, raw: raws[offset]!.slice(0, 10) }, 'skipping a flashblock transaction that cannot be decoded')
      return null
    })
  }

  async function appendTransactions(block: PendingBlock, message: FlashblockMessage): Promise<PendingTransaction[]> {
    const decoded = await decodeAll(message.diff.transactions as Hex[])
    const feedReceipts = message.metadata?.receipts ?? null
    if (decoded.length > 0) feedSendsReceipts = feedReceipts !== null
    const added: PendingTransaction[] = []
    const fromFeed: PendingReceipt[] = []
    const toHydrate: PendingTransaction[] = []
    const hydratePositions: number[] = []
    const feedPositions: number[] = []
    decoded.forEach((transaction, offset) => {
      const index = block.transactionCount + offset
      const raw = message.diff.transactions[offset] as Hex
      const feedReceipt: FeedReceipt | null | undefined = feedReceipts?.[transaction?.hash ?? keccak256(raw)]
      // A receipt-carrying feed that sent none (or one that did not parse) for a transaction leaves the gas and
      // logs before the next ones unknown: their receipts come from `hydrate` instead, or stay unknown.
      if (feedReceipts !== null && !feedReceipt) block.countsKnown = false
      if (transaction === null) {
        // Its position and, where the feed says, its gas and logs still count for the ones after it.
        if (feedReceipt) {
          block.cumulativeGasUsed = feedReceipt.cumulativeGasUsed
          block.logCount += feedReceipt.logs.length
        }
        return
      }
      transaction.index = index
      const position = block.transactions.length
      block.transactions.push(transaction)
      block.receipts.push(null)
      added.push(transaction)
      if (feedReceipt && block.countsKnown) {
        fromFeed.push(
          buildPendingReceipt({
            transaction,
            receipt: feedReceipt,
            firstLogIndex: block.logCount,
            previousCumulativeGasUsed: block.cumulativeGasUsed,
            block: { number: block.number, timestamp: block.header.timestamp, baseFeePerGas: block.header.baseFeePerGas },
          }),
        )
        feedPositions.push(position)
        block.cumulativeGasUsed = feedReceipt.cumulativeGasUsed
        block.logCount += feedReceipt.logs.length
      } else {
        toHydrate.push(transaction)
        hydratePositions.push(position)
      }
    })
    block.transactionCount += decoded.length
    const balances = message.metadata?.new_account_balances
    // Without the feed's balances they are known only where the receipt source brings them (flashgate's execution).
    if (balances === undefined || balances === null) {
      if (hydrate?.providesBalances !== true) block.reportsBalances = false
    } else for (const [address, balance] of Object.entries(balances)) block.balances.set(address.toLowerCase() as Address, balance)
    updateHeader(block.header, message)
    block.lastIndex = message.index
    block.version++
    if (fromFeed.length > 0) publish(block, epoch, () => fromFeed, feedPositions)
    hydrateReceipts(block, toHydrate, hydratePositions)
    return added
  }

  async function applyNow(message: FlashblockMessage): Promise<ApplyOutcome> {
    lastMessageAt = now()
    if (awaiting !== null) {
      if (message.payload_id === awaiting.payloadId) {
        const last = awaiting.messages.at(-1)!.index
        if (message.index <= last) return 'duplicate'
        if (message.index === last + 1) {
          awaiting.messages.push(message)
          return 'ignored'
        }
      }
      // Another block, or a gap in the one kept aside: that one cannot be shown any more.
      awaiting = null
    }
    return applyFrame(message)
  }

  /** Shows the block kept aside once the index holds its parent, or forgets it once it cannot (`awaiting`). */
  async function settleAwaiting(): Promise<void> {
    if (awaiting === null || confirmedHead < awaiting.number - 1) return
    const kept = awaiting
    awaiting = null
    if (confirmedHead !== kept.number - 1 || confirmedHash !== kept.parentHash) return
    if (now() - kept.since > AWAIT_PARENT_MS) {
      logger.warn({ block: kept.number, parentHash: kept.parentHash }, 'the parent of a pre-confirmed block was indexed too late to show it')
      return
    }
    for (const message of kept.messages) await applyFrame(message)
  }

  async function applyFrame(message: FlashblockMessage): Promise<ApplyOutcome> {
    const current = blocks.at(-1)
    if (message.index === 0) {
      if (message.base === undefined) {
        drop('index 0 without base')
        return 'dropped'
      }
      const number = Number(message.base.block_number)
      if (number <= confirmedHead) return 'ignored'
      // A repeat of any block's index 0 (not only the newest's: a frame replayed late, or one of a payload
      // another replaced at its height) changes nothing.
      if (blocks.some((block) => block.payloadId === message.payload_id && block.number === number)) return 'duplicate'
      if (started.get(message.payload_id) === startOf(message)) return 'duplicate'
      // A block that cannot follow the index (yet): built on another parent than the indexed head. The head may
      // have been replaced before the index ingested it, so the block is kept aside, not shown, until the index
      // holds that parent (`awaiting`); what was pending at its height and above goes.
      const parentHash = message.base.parent_hash.toLowerCase() as Hash
      if (number === confirmedHead + 1 && confirmedHash !== null && parentHash !== confirmedHash) {
        drop(`index 0 of block ${number} is built on ${parentHash}, not on the indexed block ${confirmedHead} (${confirmedHash})`)
        awaiting = { number, parentHash, payloadId: message.payload_id, messages: [message], since: now() }
        events.emit('awaitingParent', number, parentHash)
        return 'dropped'
      }
      // A block so far above the index that the view could not hold the blocks between (a misnumbered or
      // replayed frame): nothing of it is shown.
      if (confirmedHead >= 0 && number > confirmedHead + MAX_PENDING_BLOCKS) {
        drop(`index 0 of block ${number} is more than ${MAX_PENDING_BLOCKS} blocks above the indexed head ${confirmedHead}`)
        return 'dropped'
      }
      // The link names another flashblock of the block before than the view's newest. A later one: the view lost
      // that block's tail, but what it has is the sealed block's first flashblocks, so it stays (its receipts stay
      // found until the index has the block). Any other: the builder sealed something else, and the view goes.
      const link = message.metadata?.prev_flashblock_id
      const before = !awaitingStart && current !== undefined && current.number === number - 1 && current.number > confirmedHead ? current : null
      const lostTail = link !== undefined && before !== null && link.blockNumber === before.number && link.index > before.lastIndex
      if (link !== undefined && before !== null && !links(link, before) && !lostTail) {
        drop(`index 0 of block ${number} follows flashblock ${link.blockNumber}-${link.index}, not ${before.number}-${before.lastIndex}`)
      }
      // Blocks were missed between the newest in view and this one (the feed was away): the view cannot show
      // what they did, so the older blocks go and this one starts afresh.
      const newest = blocks.at(-1)
      if (!awaitingStart && newest !== undefined && newest.number > confirmedHead && newest.number < number - 1) {
        drop(`index 0 of block ${number} comes after block ${newest.number}: the blocks between were never seen`)
      }
      // A block replaces any pending block at its height or above (the builder restarted it).
      blocks = blocks.filter((block) => block.number < number)
      const base = message.base
      const block: PendingBlock = {
        number,
        payloadId: message.payload_id,
        lastIndex: -1,
        follows: link ?? null,
        version: 0,
        header: {
          parentHash: base.parent_hash,
          feeRecipient: base.fee_recipient.toLowerCase() as Address,
          timestamp: base.timestamp,
          baseFeePerGas: base.base_fee_per_gas,
          gasLimit: base.gas_limit,
          extraData: base.extra_data ?? '0x',
          prevRandao: base.prev_randao ?? null,
          parentBeaconBlockRoot: base.parent_beacon_block_root ?? null,
          stateRoot: null,
          receiptsRoot: null,
          logsBloom: null,
          gasUsed: null,
          blockHash: null,
          withdrawals: [],
          withdrawalsRoot: null,
          blobGasUsed: null,
        },
        transactions: [],
        receipts: [],
        transactionCount: 0,
        balances: new Map(),
        reportsBalances: true,
        cumulativeGasUsed: 0n,
        logCount: 0,
        countsKnown: true,
        form,
      }
      blocks.push(block)
      if (blocks.length > MAX_PENDING_BLOCKS) blocks = blocks.slice(-MAX_PENDING_BLOCKS)
      started.delete(message.payload_id)
      started.set(message.payload_id, startOf(message))
      if (started.size > REMEMBERED_STARTS) started.delete(started.keys().next().value!)
      awaitingStart = false
      const added = await appendTransactions(block, message)
      events.emit('update')
      events.emit('transactions', block, added)
      return 'started'
    }
    // Nothing more is added to a block the index holds (kept a little for readers a block behind).
    if (awaitingStart || current === undefined || current.number <= confirmedHead) return 'ignored'
    if (message.payload_id === current.payloadId && message.index <= current.lastIndex) return 'duplicate'
    // A frame of a payload the view moved past: its block was replaced, or the next one has started.
    if (message.payload_id !== current.payloadId && started.has(message.payload_id)) return 'ignored'
    if (message.payload_id !== current.payloadId || message.index !== current.lastIndex + 1) {
      drop(`expected index ${current.lastIndex + 1} of ${current.payloadId}, got ${message.index} of ${message.payload_id}`)
      return 'dropped'
    }
    // The next index, but linked to another flashblock than the one this view applied last (Base's node drops too).
    const link = message.metadata?.prev_flashblock_id
    if (link !== undefined && !links(link, current)) {
      drop(`flashblock ${current.number}-${message.index} follows ${link.blockNumber}-${link.index}, not ${current.number}-${current.lastIndex}`)
      return 'dropped'
    }
    const added = await appendTransactions(current, message)
    events.emit('update')
    events.emit('transactions', current, added)
    return 'appended'
  }

  /** Whether a frame's link to the flashblock before it names the one the view applied last, `block`'s newest. */
  function links(link: { blockNumber: number; index: number }, block: PendingBlock): boolean {
    return link.blockNumber === block.number && link.index === block.lastIndex
  }

  /** Runs after the messages applied so far, as they do. */
  function enqueue<value>(task: () => Promise<value>): Promise<value> {
    const result = queue.then(task)
    queue = result.catch((error: unknown) => {
      logger.error({ err: error }, 'failed to apply a flashblock')
      drop('failed to apply a flashblock')
    })
    return result
  }

  function diverged(divergence: Divergence) {
    divergences[divergence.kind]++
    logger.warn(divergence, 'canonical block differs from its pre-confirmation')
    events.emit('divergence', divergence)
  }

  /** Compares what was pre-confirmed with the canonical block: transactions first, then each known receipt. */
  function reconcile(pendingBlock: PendingBlock, canonical: CanonicalBlock): 'same' | 'transactions' | 'receipts' {
    const hashes = canonical.transactionHashes
    const mismatch = pendingBlock.transactions.find((transaction) => hashes[transaction.index] !== transaction.hash)
    if (mismatch !== undefined || pendingBlock.transactionCount > hashes.length) {
      diverged({ number: canonical.number, kind: 'transactions', detail: `transaction ${mismatch?.index ?? hashes.length} differs` })
      return 'transactions'
    }
    const wrong: PendingReceipt[] = []
    if (canonical.receipts !== undefined)
      pendingBlock.transactions.forEach((transaction, position) => {
        const pendingReceipt = pendingBlock.receipts[position]
        const sealed = canonical.receipts![transaction.index]
        if (pendingReceipt === null || pendingReceipt === undefined || sealed === undefined) return
        const difference = receiptDifference(pendingReceipt, sealed)
        if (difference === null) return
        wrong.push(pendingReceipt)
        diverged({ number: canonical.number, kind: 'receipt', detail: `${transaction.hash}: ${difference}` })
      })
    if (wrong.length > 0) events.emit('withdrawn', pendingBlock, wrong)
    return wrong.length === 0 ? 'same' : 'receipts'
  }

  return {
    events,
    /** Applies one message after those before it; resolves with what the sequence rules made of it. */
    apply(message: FlashblockMessage): Promise<ApplyOutcome> {
      return enqueue(() => applyNow(message))
    },
    /**
     * A receipt and a transaction the index already holds (the newest, at start): how the node writes them, until
     * a sealed block says (after a restart on an idle chain, the first pre-confirmed ones followed no form).
     */
    learnForm(sealed: { receipt: Record<string, unknown> | null; transaction: Record<string, unknown> | null }) {
      learnForm(form, sealedForm({ receipts: sealed.receipt === null ? [] : [sealed.receipt], transactions: [sealed.transaction] }), true)
    },
    /**
     * The canonical block was indexed: its pre-confirmation goes, after a comparison by content (which
     * transactions, then each receipt's status, gas and logs) that counts what differed. If the canonical
     * transactions do not start with the pre-confirmed ones, that pre-confirmation goes at once; if the next
     * pending block was built on another parent, all of the view goes. A block kept aside for this parent is
     * shown now (after the messages already applied), one for another parent at this height forgotten.
     */
    confirm(canonical: CanonicalBlock) {
      const { number, hash } = canonical
      learnForm(form, canonical.form ?? sealedForm({ receipts: canonical.receipts }))
      if (number >= confirmedHead) {
        confirmedHead = number
        confirmedHash = hash.toLowerCase() as Hash
      }
      // A failure is logged (and the view dropped) by the queue.
      if (awaiting !== null) enqueue(settleAwaiting).catch(() => {})
      const confirmed = blocks.find((block) => block.number === number)
      const outcome = confirmed === undefined ? 'same' : reconcile(confirmed, canonical)
      if (confirmed !== undefined) reconciled++
      const child = blocks.find((block) => block.number === number + 1)
      const orphaned = child !== undefined && child.header.parentHash !== hash
      if (orphaned) diverged({ number: number + 1, kind: 'parent', detail: `built on ${child.header.parentHash}, canonical parent ${hash}` })
      // The block being built on another parent is wrong, and so is all of the view: it goes until the next index 0.
      if (orphaned) {
        drop(`pending block ${number + 1} is not built on the canonical block ${number}`)
        return
      }
      // A pre-confirmation the canonical block does not bear out goes at once; what the builder built on the
      // canonical block since (the next block, whose index 0 came before this one was indexed) stays, as on
      // Base's node, which keeps the flashblocks above the canonical block when it finds a reorg.
      if (outcome === 'transactions') {
        blocks = blocks.filter((block) => block.number > number)
        events.emit('update')
        return
      }
      // The confirmed blocks stay a little (see `blocks`): a reader whose view of the head is still the one
      // before (a view loaded as the block was committed, or a worker told of the seal before the database's
      // notification) must see them pre-confirmed, or it would see the sealed transactions nowhere, and a
      // wallet would be handed a nonce it already used.
      blocks = blocks.filter((block) => block.number > number - KEEP_CONFIRMED_BLOCKS)
      if (blocks.some((block) => block.number <= number)) events.emit('update')
    },
    /**
     * The index was rewound to `ancestor` (a reorg, or a chain reset to a lower height): the blocks above it
     * are no longer canonical, nor is anything pre-confirmed since (built on them, or not yet known to be
     * built on the new branch), so it all goes until the next index 0; that and every block after it are new
     * again, though their numbers may not be above the old head.
     */
    rewind(ancestor: number) {
      if (ancestor < confirmedHead) {
        confirmedHead = ancestor
        confirmedHash = null
      }
      if (blocks.some((block) => block.number > ancestor)) drop(`the chain was rewound to block ${ancestor}`)
    },
    /**
     * The pending blocks above the indexed head, oldest first. When the feed is stale, the block it was
     * building is left out (it may never seal as pre-confirmed), but not the ones before it: the builder went
     * on from those, so they are sealed on the chain, and they stay in view until the index has them (an
     * index a block or two behind would otherwise take their receipts back for seconds).
     */
    blocks(headNumber: number): PendingBlock[] {
      // Blocks the index already holds are not pending. They are forgotten a little later (a process without
      // the ingester learns of canonical blocks only through the head it reads), so that the ingester's
      // `confirm` still finds the block it reconciles, even when a reader saw the new head first, and a reader
      // whose head is a block behind still sees them (see `confirm`).
      if (blocks.length > 0 && blocks[0]!.number <= headNumber - KEEP_CONFIRMED_BLOCKS)
        blocks = blocks.filter((block) => block.number > headNumber - KEEP_CONFIRMED_BLOCKS)
      const building = blocks.at(-1)
      const visible = now() - lastMessageAt > staleAfterMs && building !== undefined && building.number > confirmedHead ? blocks.slice(0, -1) : blocks
      return visible[0] !== undefined && visible[0].number <= headNumber ? visible.filter((block) => block.number > headNumber) : visible
    },
    /** Whether a block is still being built: in view, not replaced or dropped, and not sealed yet. */
    building(block: PendingBlock): boolean {
      return blocks.includes(block) && block.number > confirmedHead
    },
    /**
     * Whether the feed is being followed: a block was opened (index 0) and nothing dropped since, and the
     * feed is not silent. Between a block sealing and the next block's first flashblock, `blocks` is empty
     * while following: the block being built has nothing pre-confirmed yet (not "no pending state").
     */
    following(): boolean {
      return !awaitingStart && now() - lastMessageAt <= staleAfterMs
    },
    /**
     * Takes back every receipt known for the pending block `number` (and the balances its source brought),
     * for a source that learned they were built on something wrong; receipts still to come are unaffected.
     */
    withdraw(number: number): void {
      const block = blocks.find((candidate) => candidate.number === number)
      if (block === undefined) return
      const receipts = block.receipts.filter((receipt): receipt is PendingReceipt => receipt !== null)
      if (receipts.length === 0) return
      block.receipts = block.receipts.map(() => null)
      if (hydrate?.providesBalances === true) {
        block.balances.clear()
        block.reportsBalances = false
      }
      block.version++
      events.emit('update')
      events.emit('withdrawn', block, receipts)
    },
    /** Resolves once every message applied so far has its receipts published (or given up): for tests and benchmarks. */
    async settled(): Promise<void> {
      await queue
      await published
    },
    /** Switches the receipt source for later flashblocks (the upstream turned out not to be flashblocks-aware). */
    setHydrate(next: Hydrate | null) {
      hydrate = next
    },
    get feedSendsReceipts() {
      return feedSendsReceipts
    },
    /** Whether the flashblocks' receipts will become known: the feed sends them, or a source hydrates or executes them. */
    get receiptsComing(): boolean {
      return feedSendsReceipts || hydrate !== null
    },
    get lastMessageAt() {
      return lastMessageAt
    },
    /** Hydration and reconciliation figures, for `/readyz` and `/metrics`. */
    status() {
      const lags = [...hydration.lagsMs].sort((a, b) => a - b)
      const percentile = (p: number) => (lags.length === 0 ? null : lags[Math.min(lags.length - 1, Math.floor(p * lags.length))]!)
      return {
        hydration: {
          inFlight: hydration.inFlight,
          completed: hydration.completed,
          failures: hydration.failures,
          missingReceipts: hydration.missing,
          lagMsP50: percentile(0.5),
          lagMsP99: percentile(0.99),
          lastError: hydration.lastError,
        },
        reconciledBlocks: reconciled,
        divergences: { ...divergences },
      }
    },
  }
}

export type PendingState = ReturnType<typeof createPendingState>

/** Fields a pre-confirmed receipt cannot know (the block hash: zeros before the seal) or that are compared apart (logs). */
const NOT_COMPARED = new Set(['blockHash', 'logs'])

/** A field's value in one form, whichever way a node writes it: quantities as numbers or hex, addresses in any case. */
function comparable(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'bigint') return BigInt(value).toString(16)
  if (typeof value === 'string') return /^0x[0-9a-fA-F]+$/.test(value) ? BigInt(value).toString(16) : value.toLowerCase()
  return JSON.stringify(value ?? null)
}

/**
 * How a pre-confirmed receipt differs from the sealed one, field by field: every field the node reports that
 * the pre-confirmed receipt has too (status, gas, effective gas price, created contract, bloom, OP-Stack fees…),
 * then each log's address, topics, data and index; `null` when it does not differ.
 */
function receiptDifference(pending: PendingReceipt, sealed: NonNullable<CanonicalBlock['receipts']>[number]): string | null {
  for (const [field, theirs] of Object.entries(sealed)) {
    if (NOT_COMPARED.has(field) || !(field in pending)) continue
    const ours = pending[field]
    if (comparable(ours) !== comparable(theirs)) return `${field} ${String(ours)} != ${String(theirs)}`
  }
  const sealedLogs = sealed.logs
  if (pending.logs.length !== sealedLogs.length) return `${pending.logs.length} logs != ${sealedLogs.length}`
  for (let index = 0; index < sealedLogs.length; index++) {
    const ours = pending.logs[index]!
    const theirs = sealedLogs[index]!
    if (
      ours.address.toLowerCase() !== theirs.address.toLowerCase() ||
      ours.data.toLowerCase() !== theirs.data.toLowerCase() ||
      ours.topics.length !== theirs.topics.length ||
      ours.topics.some((topic, position) => topic.toLowerCase() !== theirs.topics[position]!.toLowerCase()) ||
      (theirs.logIndex !== undefined && comparable(ours.logIndex) !== comparable(theirs.logIndex))
    )
      return `log ${index} differs`
  }
  return null
}

function updateHeader(header: PendingHeader, message: FlashblockMessage) {
  const { diff } = message
  if (diff.state_root !== undefined) header.stateRoot = diff.state_root
  if (diff.receipts_root !== undefined) header.receiptsRoot = diff.receipts_root
  if (diff.logs_bloom !== undefined) header.logsBloom = diff.logs_bloom
  if (diff.gas_used !== undefined) header.gasUsed = diff.gas_used
  if (diff.block_hash !== undefined) header.blockHash = diff.block_hash
  if (diff.withdrawals_root !== undefined && diff.withdrawals_root !== null) header.withdrawalsRoot = diff.withdrawals_root
  if (diff.blob_gas_used !== undefined && diff.blob_gas_used !== null) header.blobGasUsed = diff.blob_gas_used
  if (diff.withdrawals !== undefined && diff.withdrawals !== null) header.withdrawals = [...header.withdrawals, ...diff.withdrawals]
}

/**
 * What tells two index-0 frames of one payload apart: the block they start and what it holds so far (the
 * partial block's hash where the builder sends it; the number and the last transaction's tail in any case).
 */
function startOf(message: FlashblockMessage): string {
  const { transactions } = message.diff
  return `${message.base?.block_number}:${message.diff.block_hash ?? ''}:${transactions.length}:${String(transactions.at(-1) ?? '').slice(-64)}`
}
