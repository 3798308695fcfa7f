import { type Hash, type Hex, keccak256 } from 'viem'
import { InvalidParamsError, TransactionTimeoutError, UpstreamError } from '../errors.js'
import { canonicalTransaction, decodePendingTransaction, type ForwardedTransactions, type PendingReceipt, type PendingState } from '../pending/index.js'
import { SYNC_SEND_MAX_TIMEOUT_MS, syncSendTimeoutTooLong } from '../pending/sync-send.js'
import type { ChainState } from './chain.js'
import type { PendingView } from './pending.js'

/** Forwards one call to the upstream node as it is (src/upstream/pass-through.ts). */
export type Forward = (method: string, params: unknown[]) => Promise<unknown> | null

export type SendRawTransactionParameters = { raw: Hex }
export type SendRawTransactionSyncParameters = { raw: Hex; timeoutMs?: number | undefined }

type Waiter = (receipt: unknown) => void

/**
 * `eth_sendRawTransaction` and `eth_sendRawTransactionSync` (EIP-7966), forwarded to the upstream once.
 * Each accepted transaction is remembered by sender and nonce until a flashblock shows it, so the pending
 * nonce counts it at once. The sync form answers with the receipt as soon as one is known: pre-confirmed
 * (a flashblock with receipts, or hydrated) or indexed. It starts listening before it forwards, so a
 * receipt that arrives first is not missed, and it never polls.
 */
export function createSendResolvers({
  forward,
  pending,
  pendingView,
  forwarded,
  chain,
  confirmedReceipt,
}: {
  forward: Forward | null
  pending: PendingState | null
  pendingView: PendingView
  forwarded: ForwardedTransactions | null
  chain: ChainState
  confirmedReceipt: (hash: Hash) => Promise<unknown>
}) {
  const waiters = new Map<Hash, Set<Waiter>>()
  let lastCheckedHead = -1

  function settle(hash: Hash, receipt: unknown) {
    const waiting = waiters.get(hash)
    if (waiting === undefined) return
    waiters.delete(hash)
    for (const waiter of waiting) waiter(receipt)
  }

  pending?.events.on('receipts', (_block, receipts: PendingReceipt[]) => {
    if (waiters.size === 0) return
    for (const receipt of receipts) if (waiters.has(receipt.transactionHash)) settle(receipt.transactionHash, receipt)
  })
  // A process that does not ingest learns of new blocks through the head it reads: look again once per
  // flashblock, and only when the head moved.
  pending?.events.on('update', () => {
    if (waiters.size > 0) void checkIndexedIfHeadMoved()
  })

  async function checkIndexedIfHeadMoved() {
    const head = (await chain.view().catch(() => null))?.head?.number ?? -1
    if (head === lastCheckedHead) return
    lastCheckedHead = head
    await checkIndexed([...waiters.keys()])
  }

  async function checkIndexed(hashes: Hash[]) {
    await Promise.all(
      hashes.map(async (hash) => {
        const receipt = await confirmedReceipt(hash).catch(() => null)
        if (receipt !== null) settle(hash, receipt)
      }),
    )
  }

  async function send(raw: Hex): Promise<Hash> {
    const forwarding = forward?.('eth_sendRawTransaction', [raw]) ?? null
    if (forwarding === null) throw new UpstreamError('no upstream to send transactions to')
    const hash = (await forwarding) as Hash
    // The sender and nonce are read only for transactions the upstream accepted (a blob transaction's without its blobs).
    const decoded = await decodePendingTransaction(canonicalTransaction(raw)).catch(() => null)
    if (decoded !== null && forwarded !== null) await forwarded.record({ from: decoded.from, nonce: decoded.nonce, hash, transaction: decoded })
    return hash
  }

  /** https://ethereum.org/en/developers/docs/apis/json-rpc/#eth_sendrawtransaction */
  async function sendRawTransaction({ raw }: SendRawTransactionParameters): Promise<Hash> {
    return send(raw)
  }

  /** https://eips.ethereum.org/EIPS/eip-7966 */
  async function sendRawTransactionSync({ raw, timeoutMs }: SendRawTransactionSyncParameters): Promise<unknown> {
    // Refused before anything is sent, as Base's node refuses it (not shortened: a client that retries on the
    // error must not find its transaction sent through flashgate only).
    if (timeoutMs !== undefined && timeoutMs > SYNC_SEND_MAX_TIMEOUT_MS) throw new InvalidParamsError(syncSendTimeoutTooLong(timeoutMs))
    const wait = timeoutMs ?? SYNC_SEND_MAX_TIMEOUT_MS
    const hash = keccak256(canonicalTransaction(raw))
    let resolve!: Waiter
    const arrived = new Promise<unknown>((settled) => {
      resolve = settled
    })
    let waiting = waiters.get(hash)
    if (waiting === undefined) waiters.set(hash, (waiting = new Set()))
    waiting.add(resolve)
    let timer: NodeJS.Timeout | undefined
    try {
      await send(raw)
      // Already known (a re-sent transaction, or one pre-confirmed while the send was answered).
      const known = await pendingView.receipt(hash)
      if (known !== null) return known
      void checkIndexed([hash])
      const timedOut = new Promise<null>((done) => {
        timer = setTimeout(() => done(null), wait)
      })
      const receipt = await Promise.race([arrived, timedOut])
      if (receipt === null) throw new TransactionTimeoutError(hash, wait)
      return receipt
    } finally {
      clearTimeout(timer)
      waiting.delete(resolve)
      if (waiting.size === 0 && waiters.get(hash) === waiting) waiters.delete(hash)
    }
  }

  return {
    sendRawTransaction,
    sendRawTransactionSync,
    /** The index has a new head (this process's ingester, or another's announced): look for waiting sends in it. */
    onHead() {
      if (waiters.size > 0) void checkIndexedIfHeadMoved()
    },
    /** The ingester committed blocks: a waiting sync send whose transaction is among them has its receipt. */
    onBlocks(blocks: { transactionHashes: Hash[] }[]) {
      if (waiters.size === 0) return
      const included = blocks.flatMap((block) => block.transactionHashes.filter((hash) => waiters.has(hash)))
      if (included.length > 0) void checkIndexed(included)
    },
  }
}
