import { pino } from 'pino'
import type { Address, Hash, RpcLog, RpcTransactionReceipt } from 'viem'
import { beforeAll, describe, expect, test } from 'vitest'
import { hex, loadFixedChain, withPendingBlockHash } from '../../test/fixtures/fixed-chain.js'
import { fixedChainFlashblocks } from '../../test/fixtures/fixed-chain-flashblocks.js'
import { pendingQueries } from '../../test/fixtures/fixed-chain-queries.js'
import { useSeededChain } from '../../test/fixtures/seeded-db.js'
import { address, blockArgument, logFilter } from '../codecs/index.js'
import type { FeedFormat } from '../devnet/flashblock-message.js'
import { createPendingSource, createPendingState, createReceiptFetcher, FLASHBLOCK_STALE_MS, type PendingState } from '../pending/index.js'
import { LimitExceededError, UpstreamError } from '../errors.js'
import { DEFAULT_LOG_LIMITS, type LogLimits, type Resolvers } from './index.js'
import { LOG_JSON_FIXED_BYTES } from './logs.js'

const chain = loadFixedChain()
const seeded = useSeededChain()
const logger = pino({ level: 'silent' })
/**
 * Where the pending resolvers read what the index lacks (accounts it never saw change): the node as recorded.
 * It answers the state at the indexed head, and fails every `pending` read (it was never asked one), so that
 * the pending answers below are flashgate's own, from the frames.
 */
const upstream = chain.upstream()

const queries = pendingQueries(chain)
/** A range from a pre-confirmed block's own number to `pending` (a client polling from the head + 1). */
const FROM_INSIDE_PENDING = 'the newest pre-confirmed block alone, by its number'
const logQueries = queries.filter((query) => query.method === 'eth_getLogs' && query.name !== FROM_INSIDE_PENDING)
const fromInsidePending = queries.find((query) => query.name === FROM_INSIDE_PENDING)!
const pendingBlocks = chain.pendingNumbers.map((number) => chain.blocks[number]!)
const sealedHashes = pendingBlocks.map((block) => block.hash)
const pendingTransactions = pendingBlocks.flatMap((block) => block.transactions)
const newest = chain.head
/** One who sends in both pre-confirmed blocks: its pending nonce is not its latest one. */
const sender = pendingTransactions.find((transaction) =>
  pendingBlocks.every((block) => block.transactions.some((item) => item.from === transaction.from)),
)!.from
/** The accounts whose state the pending tests read: those the pre-confirmed transactions touched, and one they did not. */
const accounts = [...new Set(queries.filter((query) => query.method === 'eth_getBalance').map((query) => query.params[0] as Address))]
/** Contracts the pre-confirmed transactions created: their nonce is not a sender's (EIP-161 starts them at 1). */
const created = chain.pendingNumbers.flatMap((number) =>
  chain.receipts[number]!.flatMap((receipt) => (receipt.contractAddress ? [receipt.contractAddress] : [])),
)
const nonceAccounts = accounts.filter((account) => !created.includes(account))

/** The node's answer, as a pre-confirmed block answers it: the pending block hash in place of the sealed one. */
const asPending = <value>(answer: value): value => withPendingBlockHash(answer, sealedHashes)

/**
 * anvil writes a receipt's `blockTimestamp` as a JSON number, flashgate's pre-confirmed receipts as a hex quantity
 * (test/devnet-pending.test.ts keeps it apart too): compared as numbers, every other field as it is.
 */
function comparableReceipt(receipt: RpcTransactionReceipt | null): unknown {
  if (receipt === null) return null
  const { blockTimestamp, ...fields } = receipt as RpcTransactionReceipt & { blockTimestamp: unknown }
  return { ...fields, blockTimestamp: Number(blockTimestamp) }
}

/** A pending state fed the pre-confirmed blocks' flashblocks, on a clock that stands still (never stale). */
async function fedPendingState(format: FeedFormat, { hydrated = false } = {}): Promise<{ state: PendingState; advance(ms: number): void }> {
  let clock = 1_000_000
  const state = createPendingState({ logger, now: () => clock })
  if (hydrated)
    createPendingSource({
      mode: 'hydrate',
      state,
      fetchReceipts: createReceiptFetcher({ rpcUrl: upstream.rpcUrl, request: (method, params) => upstream.request(method, params) }),
      logger,
    })
  const outcomes = []
  for (const message of fixedChainFlashblocks(chain, { format })) outcomes.push(await state.apply(message))
  await state.settled()
  // Each pre-confirmed block started at index 0 and took every later index in order.
  expect(outcomes.filter((outcome) => outcome === 'started')).toHaveLength(chain.pendingNumbers.length)
  expect(outcomes.every((outcome) => outcome === 'started' || outcome === 'appended')).toBe(true)
  return { state, advance: (ms) => (clock += ms) }
}

const read = (resolvers: Resolvers) => ({
  logs: (filter: unknown) => resolvers.getLogs({ filter: logFilter.parse(filter), limits: DEFAULT_LOG_LIMITS }),
  blockReceipts: async (block: unknown) => (await resolvers.getBlockReceipts({ block: blockArgument.parse(block) }))?.parse<RpcTransactionReceipt[]>() ?? null,
  receipt: async (hash: Hash) => (await resolvers.getTransactionReceipt({ hash }))?.parse<RpcTransactionReceipt>() ?? null,
  balance: (account: Address, block: unknown) => resolvers.getBalance({ address: address.parse(account), block: blockArgument.parse(block) }),
  nonce: (account: Address, block: unknown) => resolvers.getTransactionCount({ address: address.parse(account), block: blockArgument.parse(block) }),
})

describe('a feed that sends receipts and balances (the older format): pending answers as the sealed blocks do', () => {
  let resolvers: Resolvers
  beforeAll(async () => {
    const { state } = await fedPendingState('legacy')
    resolvers = seeded().createResolvers({ pending: state, upstream })
  })

  test.each(logQueries)('logs: $name', async ({ method, params, reference }) => {
    expect(await read(resolvers).logs(params[0])).toStrictEqual(asPending(chain.answer(method, reference)))
  })

  // BUG (src/resolvers/logs.ts getLogs, with pending.ts split): `{fromBlock: <a pre-confirmed block's number>,
  // toBlock: "pending"}` is refused with BlockRangeBeyondHeadError, because the range's confirmed part (fromBlock
  // to latest) is resolved first and starts past the indexed head; a node answers that block's logs. (The
  // pre-confirmed part ignores fromBlock too: every pending block's logs would come back.)
  test(`logs: ${fromInsidePending.name}`, async () => {
    const { method, params, reference } = fromInsidePending
    expect(await read(resolvers).logs(params[0])).toStrictEqual(asPending(chain.answer(method, reference)))
  })

  test('logs from pending, as reth and Base\u2019s node take them: no end or a number past the pre-confirmed blocks is theirs, another tag or a number below them none', async () => {
    const pendingLogs = await read(resolvers).logs({ fromBlock: 'pending', toBlock: 'pending' })
    expect(pendingLogs.length).toBeGreaterThan(0)
    expect(await read(resolvers).logs({ fromBlock: 'pending' })).toStrictEqual(pendingLogs)
    expect(await read(resolvers).logs({ fromBlock: 'pending', toBlock: hex(newest) })).toStrictEqual(pendingLogs)
    for (const toBlock of ['latest', 'safe', 'finalized', 'earliest', hex(chain.indexedHead)])
      expect(await read(resolvers).logs({ fromBlock: 'pending', toBlock })).toEqual([])
  })

  test('to pending: the result cap holds for the confirmed part alone, as on Base\u2019s node; the byte bound for the whole, naming the confirmed range', async () => {
    const from = chain.indexedHead - 3
    const whole = asPending(chain.answer('eth_getLogs', [{ fromBlock: hex(from), toBlock: hex(newest) }])) as RpcLog[]
    const confirmed = whole.filter((log) => Number(log.blockNumber) <= chain.indexedHead)
    expect(confirmed.length).toBeGreaterThan(0)
    expect(whole.length).toBeGreaterThan(confirmed.length)
    const logs = (limits: Partial<LogLimits>) =>
      resolvers.getLogs({ filter: logFilter.parse({ fromBlock: hex(from), toBlock: 'pending' }), limits: { ...DEFAULT_LOG_LIMITS, ...limits } })
    // Base's node asks reth's capped filter for the blocks up to latest, then adds the pre-confirmed logs.
    expect(await logs({ maxLogs: confirmed.length })).toStrictEqual(whole)
    await expect(logs({ maxLogs: confirmed.length - 1 })).rejects.toThrow(LimitExceededError)
    // The byte bound: the confirmed logs fit exactly, the first pre-confirmed one takes the answer past it.
    const confirmedBytes = confirmed.reduce((total, log) => total + LOG_JSON_FIXED_BYTES + (log.data.length - 2), 0)
    const refusal = await logs({ maxBytes: confirmedBytes }).catch((error: unknown) => error)
    expect(refusal).toBeInstanceOf(LimitExceededError)
    expect((refusal as LimitExceededError).message).toContain(`Try with this block range [${hex(from)}, ${hex(chain.indexedHead)}].`)
    expect((refusal as LimitExceededError).data).toEqual({ from: hex(from), to: hex(chain.indexedHead), limit: confirmedBytes })
  })

  test('receipts of the pending block: those of the newest pre-confirmed block', async () => {
    const receipts = await read(resolvers).blockReceipts('pending')
    expect(receipts?.map(comparableReceipt)).toStrictEqual(asPending(chain.receipts[newest]!).map(comparableReceipt))
  })

  test.each(pendingTransactions.map((transaction) => ({ hash: transaction.hash, block: Number(transaction.blockNumber) })))(
    'the receipt of $hash (block $block)',
    async ({ hash }) => {
      const sealed = chain.answer('eth_getTransactionReceipt', [hash]) as RpcTransactionReceipt
      expect(comparableReceipt(await read(resolvers).receipt(hash))).toStrictEqual(comparableReceipt(asPending(sealed)))
    },
  )

  test('each pre-confirmed transaction, as its sealed block shows it', async () => {
    const answers = await Promise.all(pendingTransactions.map((transaction) => resolvers.getTransaction({ hash: transaction.hash })))
    expect(answers).toStrictEqual(asPending(pendingTransactions))
  })

  test.each(nonceAccounts)('the pending nonce of %s is the one the sealed blocks leave', async (account) => {
    expect(await read(resolvers).nonce(account, 'pending')).toBe(chain.answer('eth_getTransactionCount', [account, hex(newest)]))
  })

  // Frames tell the nonces of senders only: a contract a pre-confirmed transaction created starts at nonce 1
  // (EIP-161), which the pending view (src/resolvers/accounts.ts pendingAccount) does not know unless the
  // upstream's own pending nonce says so; here it counts 0, where the node says 1.
  test.each(created)('the pending nonce of %s, a contract created in a pre-confirmed block', async (account) => {
    expect(await read(resolvers).nonce(account, 'pending')).toBe(chain.answer('eth_getTransactionCount', [account, hex(newest)]))
  })

  test.each(accounts)('the pending balance of %s is the one the sealed blocks leave', async (account) => {
    expect(await read(resolvers).balance(account, 'pending')).toBe(chain.answer('eth_getBalance', [account, hex(newest)]))
  })

  test('the pending block is the newest pre-confirmed one, with its transactions (its size as geth counts it)', async () => {
    const { size, ...block } = (await resolvers.getBlock({ block: { kind: 'tag', tag: 'pending' }, includeTransactions: true })) as Record<string, unknown>
    const { size: sealedSize, ...sealed } = chain.blocks[newest]!
    expect(block).toStrictEqual(asPending(sealed))
    // geth and reth count the (empty) withdrawals list in a block's size, anvil does not: one byte, until a sealed block tells.
    expect(Number(size)).toBe(Number(sealedSize) + 1)
  })

  test('latest still answers the indexed head', async () => {
    const latest = chain.indexedHead
    expect(await read(resolvers).blockReceipts('latest')).toStrictEqual(chain.receipts[latest])
    expect(await read(resolvers).logs({ fromBlock: 'latest', toBlock: 'latest' })).toStrictEqual(
      chain.answer('eth_getLogs', [{ fromBlock: hex(latest), toBlock: hex(latest) }]),
    )
    expect(await read(resolvers).nonce(sender, 'latest')).toBe(chain.answer('eth_getTransactionCount', [sender, hex(latest)]))
  })
})

describe('frames only (Base since Azul, receipts not hydrated): transactions and nonces, no receipts made up', () => {
  let resolvers: Resolvers
  beforeAll(async () => {
    const { state } = await fedPendingState('current')
    resolvers = seeded().createResolvers({ pending: state, upstream })
  })

  test.each(nonceAccounts)('the pending nonce of %s counts its pre-confirmed transactions', async (account) => {
    expect(await read(resolvers).nonce(account, 'pending')).toBe(chain.answer('eth_getTransactionCount', [account, hex(newest)]))
  })

  test('no pending logs, and no receipts, for transactions whose receipts nobody sent', async () => {
    expect(await read(resolvers).logs({ fromBlock: 'pending', toBlock: 'pending' })).toEqual([])
    expect(await read(resolvers).blockReceipts('pending')).toEqual([])
    for (const transaction of pendingTransactions) expect(await read(resolvers).receipt(transaction.hash)).toBeNull()
  })

  test('the pre-confirmed transactions themselves are known', async () => {
    const answers = await Promise.all(pendingTransactions.map((transaction) => resolvers.getTransaction({ hash: transaction.hash })))
    expect(answers).toStrictEqual(asPending(pendingTransactions))
  })

  test('the pending balance, which no frame carries, is the upstream’s: when it cannot say, UpstreamError, never a made-up one', async () => {
    for (const account of accounts) await expect(read(resolvers).balance(account, 'pending')).rejects.toThrow(UpstreamError)
  })
})

describe('receipts hydrated from a flashblocks-aware upstream: pending logs and receipts as the sealed blocks have them', () => {
  let resolvers: Resolvers
  beforeAll(async () => {
    const { state } = await fedPendingState('current', { hydrated: true })
    resolvers = seeded().createResolvers({ pending: state, upstream })
  })

  test.each(logQueries)('logs: $name', async ({ method, params, reference }) => {
    expect(await read(resolvers).logs(params[0])).toStrictEqual(asPending(chain.answer(method, reference)))
  })

  test('receipts of the pending block, and of each pre-confirmed transaction', async () => {
    expect(await read(resolvers).blockReceipts('pending')).toStrictEqual(asPending(chain.receipts[newest]!))
    for (const transaction of pendingTransactions)
      expect(await read(resolvers).receipt(transaction.hash)).toStrictEqual(asPending(chain.answer('eth_getTransactionReceipt', [transaction.hash])))
  })
})

describe('without fresh pre-confirmed state, pending answers as latest', () => {
  test(`a feed silent for more than ${FLASHBLOCK_STALE_MS} ms: the block it was building leaves the view, the block the builder finished before it (sealed, not yet indexed) stays`, async () => {
    const { state, advance } = await fedPendingState('legacy')
    const resolvers = seeded().createResolvers({ pending: state, upstream })
    const finished = newest - 1
    expect(chain.pendingNumbers).toEqual([finished, newest])
    const [pendingNonce, finishedNonce] = [newest, finished].map((number) => chain.answer('eth_getTransactionCount', [sender, hex(number)]))
    expect(pendingNonce).not.toBe(finishedNonce)
    expect(await read(resolvers).nonce(sender, 'pending')).toBe(pendingNonce)
    advance(FLASHBLOCK_STALE_MS + 1)
    expect(await read(resolvers).nonce(sender, 'pending')).toBe(finishedNonce)
    const receipts = await read(resolvers).blockReceipts('pending')
    expect(receipts?.map(comparableReceipt)).toStrictEqual(asPending(chain.receipts[finished]!).map(comparableReceipt))
    const logs = await read(resolvers).logs({ fromBlock: 'pending', toBlock: 'pending' })
    expect(logs.length).toBeGreaterThan(0)
    expect(logs).toStrictEqual(receipts!.flatMap((receipt) => receipt.logs))
    // A receipt of the finished block is still answered; one of the block being built is not, until it seals.
    const [kept] = chain.blocks[finished]!.transactions
    const [unfinished] = chain.blocks[newest]!.transactions
    expect(comparableReceipt(await read(resolvers).receipt(kept!.hash))).toStrictEqual(
      comparableReceipt(asPending(chain.answer('eth_getTransactionReceipt', [kept!.hash]) as RpcTransactionReceipt)),
    )
    expect(await read(resolvers).receipt(unfinished!.hash)).toBeNull()
  })

  test(`a feed silent for more than ${FLASHBLOCK_STALE_MS} ms, with the index up to the block it finished: pending answers as latest`, async () => {
    const { state, advance } = await fedPendingState('legacy')
    const resolvers = seeded().createResolvers({ pending: state, upstream })
    advance(FLASHBLOCK_STALE_MS + 1)
    // The index at the finished block: nothing pre-confirmed is above it but the block being built.
    const head = newest - 1
    expect(state.blocks(head)).toEqual([])
    expect(state.blocks(chain.indexedHead).map((block) => block.number)).toEqual([head])
    expect(await read(resolvers).blockReceipts('latest')).toStrictEqual(chain.receipts[chain.indexedHead])
  })

  test('no feed at all', async () => {
    const resolvers = seeded().createResolvers({ upstream })
    expect(await read(resolvers).blockReceipts('pending')).toStrictEqual(chain.receipts[chain.indexedHead])
    for (const account of accounts)
      expect(await read(resolvers).balance(account, 'pending')).toBe(chain.answer('eth_getBalance', [account, hex(chain.indexedHead)]))
  })
})

describe('a pre-confirmed block sealed and indexed', () => {
  test('leaves the pending view: the index answers it with its real hash, and the next block stays pending', async () => {
    const { state } = await fedPendingState('legacy')
    const resolvers = seeded().createResolvers({ pending: state, upstream })
    const sealed = chain.indexedHead + 1
    // As the gateway does on the ingester's `blocks` event (src/app.ts), then on its `head` event.
    for (const block of await seeded().ingest({ from: sealed, to: sealed })) {
      resolvers.pendingView.observeSealed(block.block)
      state.confirm(block)
    }
    resolvers.notify({ reorg: false, head: sealed })
    const stillPending = (answer: unknown) => withPendingBlockHash(answer, [chain.blocks[newest]!.hash])
    expect(await read(resolvers).blockReceipts(hex(sealed))).toStrictEqual(chain.receipts[sealed])
    expect(await read(resolvers).blockReceipts('latest')).toStrictEqual(chain.receipts[sealed])
    expect(await read(resolvers).logs({ fromBlock: 'pending', toBlock: 'pending' })).toStrictEqual(
      stillPending(chain.answer('eth_getLogs', [{ fromBlock: hex(newest), toBlock: hex(newest) }])),
    )
    expect(await read(resolvers).logs({ fromBlock: hex(chain.indexedHead - 3), toBlock: 'pending' })).toStrictEqual(
      stillPending(chain.answer('eth_getLogs', [{ fromBlock: hex(chain.indexedHead - 3), toBlock: hex(newest) }])),
    )
    // The sealed block taught the pending view how this node counts a block's size.
    expect(await resolvers.getBlock({ block: { kind: 'tag', tag: 'pending' }, includeTransactions: true })).toStrictEqual(stillPending(chain.blocks[newest]))
    expect(state.status().divergences).toEqual({ transactions: 0, parent: 0, receipt: 0 })
  })
})
