import type { Address, Hash } from 'viem'
import type { ClusterLink } from '../cluster/link.js'
import type { SharedRedis } from '../redis/index.js'
import { nonceAfter, type PendingTransaction } from './transactions.js'

/**
 * A forwarded transaction not seen in a flashblock or block for this long is taken as dropped by the
 * sequencer: its nonce stops counting, so that a wallet is not told to leave a gap forever. Base
 * pre-confirms within a flashblock or two; a minute is generous.
 */
export const FORWARDED_DROP_AFTER_MS = 60_000
/** Transactions remembered at most, over all senders (oldest forgotten first). */
const MAX_FORWARDED = 100_000
/** In Redis, forwarded nonces kept per sender at most (the highest): far more than any wallet has in flight. */
const MAX_SHARED_PER_SENDER = 1_000

/** `through`: the last nonce of its sender it takes (its own, or more with EIP-7702 authorizations the sender signed). */
type Forwarded = { hash: Hash; at: number; transaction: PendingTransaction | null; through: number }

/**
 * The last nonce of `sender` a send takes: its own, or more when it carries EIP-7702 authorizations the sender
 * signed for the nonces after it (a self-sponsored delegation takes two).
 */
function lastNonceTaken(sender: Address, nonce: number, transaction: PendingTransaction | null): number {
  return transaction === null ? nonce : Number(nonceAfter(sender, BigInt(nonce), { ...transaction, from: sender, nonce })) - 1
}

/**
 * How far below the nonce it counts from a shared store still reads sends: a send at a lower nonce may take
 * nonces up to there with its authorizations (a sender signs a few for itself at most).
 */
const AUTHORIZED_SPAN = 64

/**
 * Forwarded nonces shared through Redis, so that a wallet sending through one process and asking another
 * for its pending nonce gets the same answer: a sorted set per sender, scored by nonce, each member
 * `hash:forwardedAt`, expiring `dropAfterMs` after the sender's last send.
 */
function createSharedNonces({ redis, dropAfterMs, now }: { redis: SharedRedis; dropAfterMs: number; now: () => number }) {
  const keyOf = (sender: Address) => redis.key(`forwarded:${sender}`)
  const transactionKeyOf = (hash: Hash) => redis.key(`forwarded-transaction:${hash}`)

  async function exec(transaction: ReturnType<SharedRedis['client']['multi']>): Promise<unknown[]> {
    const replies = await transaction.exec()
    if (replies === null) throw new Error('Redis discarded the transaction')
    return replies.map(([error, reply]) => {
      if (error !== null) throw error
      return reply
    })
  }

  return {
    /**
     * Records a send, with the transaction for look-ups by hash; a replacement (same nonce) takes the place of
     * the first. Each member is `hash:forwardedAt:lastNonceTaken`. One round trip.
     */
    record(sender: Address, nonce: number, hash: Hash, transaction: PendingTransaction | null): Promise<void> {
      const key = keyOf(sender)
      return redis.attempt(
        'forwarded-record',
        async () => {
          const multi = redis.client
            .multi()
            .zremrangebyscore(key, nonce, nonce)
            .zadd(key, nonce, `${hash}:${now()}:${lastNonceTaken(sender, nonce, transaction)}`)
            .zremrangebyrank(key, 0, -(MAX_SHARED_PER_SENDER + 1))
            .pexpire(key, dropAfterMs)
          if (transaction !== null) multi.set(transactionKeyOf(hash), JSON.stringify(shareable(transaction)), 'PX', dropAfterMs)
          await exec(multi)
        },
        () => undefined,
      )
    },
    /**
     * A transaction any process forwarded, by hash, while its send still counts: not replaced, not passed by
     * its sender's nonce, not dropped. Two round trips when the hash is known, one when not.
     */
    transaction(hash: Hash, own: () => PendingTransaction | null): Promise<PendingTransaction | null> {
      return redis.attempt(
        'forwarded-transaction',
        async () => {
          const stored = await redis.client.get(transactionKeyOf(hash))
          if (stored === null) return null
          // Its sender and nonce say where its send is counted.
          const transaction = JSON.parse(stored) as PendingTransaction
          const members = await redis.client.zrangebyscore(keyOf(transaction.from.toLowerCase() as Address), transaction.nonce, transaction.nonce)
          const cutoff = now() - dropAfterMs
          const counts = members.some((member) => member.startsWith(`${hash}:`) && Number(member.split(':')[1]) >= cutoff)
          return counts ? transaction : null
        },
        own,
      )
    },
    /**
     * The sender's forwarded nonces from `known` on (each send's, and those its authorizations take), not yet
     * dropped; forgets those far below it. One round trip.
     */
    from(sender: Address, known: bigint): Promise<number[]> {
      const key = keyOf(sender)
      const lowest = known - BigInt(AUTHORIZED_SPAN)
      return redis.attempt(
        'forwarded-read',
        async () => {
          const [, members] = await exec(
            redis.client.multi().zremrangebyscore(key, '-inf', `(${lowest}`).zrangebyscore(key, String(lowest), '+inf', 'WITHSCORES'),
          )
          const list = members as string[]
          const cutoff = now() - dropAfterMs
          const nonces: number[] = []
          const passed: string[] = []
          for (let i = 0; i + 1 < list.length; i += 2) {
            const [, at, through] = list[i]!.split(':')
            // A member written before sends counted their authorizations has no third part: its own nonce only.
            const nonce = Number(list[i + 1])
            const last = Number(through ?? nonce)
            if (BigInt(last) < known) passed.push(list[i]!)
            else if (Number(at) >= cutoff) for (let taken = nonce; taken <= last; taken++) if (BigInt(taken) >= known) nonces.push(taken)
          }
          // Passed by the sender's nonce: no longer found by hash either (a second round trip, only then).
          if (passed.length > 0) await redis.client.zrem(key, ...passed)
          return nonces
        },
        () => [],
      )
    },
  }
}

/** Where forwarded sends are shared between processes: Redis, or the primary of `serve --workers N`. */
type SharedNonces = {
  record(sender: Address, nonce: number, hash: Hash, transaction: PendingTransaction | null): Promise<void>
  from(sender: Address, known: bigint): Promise<number[]>
  /** `own`: this process's answer, given while the shared store fails. */
  transaction(hash: Hash, own: () => PendingTransaction | null): Promise<PendingTransaction | null>
}

/**
 * A transaction as another process needs it to answer a look-up by hash: what a pool transaction's RPC
 * object is made of (objects/transaction.ts), without the sender's public key, which only this process's
 * executor uses and JSON cannot write.
 */
export function shareable(transaction: PendingTransaction): PendingTransaction {
  const { senderPublicKey: _key, ...rest } = transaction
  return rest
}

/**
 * Sends by sender and nonce, found by hash too, kept in the order they were made (Map keeps insertion order):
 * a later send of the same sender and nonce takes the place of the first, which is found by hash no more.
 * Those past the drop time go from the front at each send, and the oldest beyond `MAX_FORWARDED`, so that
 * memory follows the send rate, not the number of senders who never ask again.
 */
function createSendBook<sent extends { hash: Hash; at: number }>({ dropAfterMs, now }: { dropAfterMs: number; now: () => number }) {
  const bySender = new Map<Address, Map<number, sent>>()
  const byHash = new Map<Hash, { sender: Address; nonce: number }>()

  function forget(sender: Address, nonce: number) {
    const nonces = bySender.get(sender)
    const found = nonces?.get(nonce)
    if (found === undefined) return
    nonces!.delete(nonce)
    byHash.delete(found.hash)
    if (nonces!.size === 0) bySender.delete(sender)
  }

  return {
    forget,
    put(sender: Address, nonce: number, entry: sent) {
      forget(sender, nonce)
      let nonces = bySender.get(sender)
      if (nonces === undefined) bySender.set(sender, (nonces = new Map()))
      nonces.set(nonce, entry)
      byHash.set(entry.hash, { sender, nonce })
      const cutoff = now() - dropAfterMs
      for (const [, key] of byHash) {
        if (bySender.get(key.sender)!.get(key.nonce)!.at >= cutoff) break
        forget(key.sender, key.nonce)
      }
      while (byHash.size > MAX_FORWARDED) {
        const [, oldest] = byHash.entries().next().value!
        forget(oldest.sender, oldest.nonce)
      }
    },
    /** A sender's sends by nonce (the caller may `forget` some while it goes through them). */
    of(sender: Address): ReadonlyMap<number, sent> | undefined {
      return bySender.get(sender)
    },
    /** A send not past the drop time, by hash. */
    byHash(hash: Hash): sent | undefined {
      const key = byHash.get(hash)
      const found = key === undefined ? undefined : bySender.get(key.sender)?.get(key.nonce)
      return found === undefined || found.at < now() - dropAfterMs ? undefined : found
    },
    get size() {
      return byHash.size
    },
    get senders() {
      return bySender.size
    },
  }
}

/**
 * The forwarded sends of every worker of `serve --workers N`, kept by the primary (src/cluster): the same
 * answers as the Redis store, in memory, per sender, dropped `dropAfterMs` after they were sent, and found by
 * hash on every worker while they count.
 */
export function createNonceRegistry({ dropAfterMs = FORWARDED_DROP_AFTER_MS, now = Date.now }: { dropAfterMs?: number; now?: () => number } = {}) {
  const book = createSendBook<Forwarded>({ dropAfterMs, now })

  return {
    record(sender: Address, nonce: number, hash: Hash, transaction: PendingTransaction | null = null) {
      book.put(sender, nonce, { hash, at: now(), transaction, through: lastNonceTaken(sender, nonce, transaction) })
      const nonces = book.of(sender)!
      if (nonces.size > MAX_SHARED_PER_SENDER) book.forget(sender, Math.min(...nonces.keys()))
    },
    /** The sender's forwarded nonces from `known` on (each send's, and those its authorizations take). */
    from(sender: Address, known: bigint): number[] {
      const cutoff = now() - dropAfterMs
      const found: number[] = []
      for (const [nonce, sent] of book.of(sender) ?? []) {
        if (BigInt(sent.through) < known) book.forget(sender, nonce)
        else if (sent.at >= cutoff) for (let taken = nonce; taken <= sent.through; taken++) if (BigInt(taken) >= known) found.push(taken)
      }
      return found
    },
    /** A send that still counts, by hash: not replaced, not passed by its sender's nonce, not dropped. */
    transaction(hash: Hash): PendingTransaction | null {
      return book.byHash(hash)?.transaction ?? null
    },
    get senders() {
      return book.senders
    },
  }
}

/** A worker's view of the primary's registry; while the primary does not answer, the worker counts its own sends. */
function createClusterNonces(link: ClusterLink): SharedNonces {
  return {
    async record(sender, nonce, hash, transaction) {
      await link.request('forwardedRecord', sender, nonce, hash, transaction === null ? null : shareable(transaction)).catch(() => null)
    },
    from: (sender, known) => link.request('forwardedFrom', sender, known).catch(() => []),
    transaction: (hash, own) => link.request('forwardedTransaction', hash).catch(own),
  }
}

/**
 * The transactions this process forwarded (`eth_sendRawTransaction`, `eth_sendRawTransactionSync`) that no
 * flashblock or block has shown yet, by sender and nonce: `eth_getTransactionCount(a, "pending")` counts
 * them, so a wallet that sends back-to-back gets the next nonce at once, not the one it just used
 * (the 85–120 ms between a send and its flashblock), and `eth_getTransactionByHash` finds them as a node
 * finds a transaction in its pool. A transaction stops counting once the sender's nonce passes it
 * (pre-confirmed, mined or replaced) or it is evidently dropped (FORWARDED_DROP_AFTER_MS).
 * A self-sponsored EIP-7702 delegation (an authorization the sender signed for its next nonce) counts for
 * both nonces it takes, in this process (the shared stores below hold one nonce per send).
 * With `redis` (`--redis-url`), each send is shared too, so that the pending nonce on every process counts
 * what any of them forwarded (one Redis round trip per send and per pending-nonce read), and a look-up by hash
 * on any of them finds it (after a miss of its own sends); while Redis fails, each process counts and finds
 * its own sends, as without it. The workers of `serve --workers N` without Redis share them through their
 * primary the same way (`cluster`).
 */
export function createForwardedTransactions({
  now = Date.now,
  dropAfterMs = FORWARDED_DROP_AFTER_MS,
  redis = null,
  cluster = null,
}: {
  now?: () => number
  dropAfterMs?: number
  redis?: SharedRedis | null
  cluster?: ClusterLink | null
} = {}) {
  const shared: SharedNonces | null = redis !== null ? createSharedNonces({ redis, dropAfterMs, now }) : cluster !== null ? createClusterNonces(cluster) : null
  const book = createSendBook<Forwarded>({ dropAfterMs, now })

  return {
    /** A transaction the upstream accepted. A later one with the same sender and nonce replaces it. */
    async record({ from, nonce, hash, transaction = null }: { from: Address; nonce: number; hash: Hash; transaction?: PendingTransaction | null }) {
      const sender = from.toLowerCase() as Address
      // A self-sponsored EIP-7702 delegation takes the next nonce too: the wallet's next send must not reuse it.
      const through = lastNonceTaken(sender, nonce, transaction)
      book.put(sender, nonce, { hash, at: now(), transaction, through })
      await shared?.record(sender, nonce, hash, transaction)
    },
    /**
     * The sender's next nonce given `known`, the next one from the chain and the pre-confirmed blocks:
     * forwarded transactions that continue it without a gap are counted, as a node counts its pool.
     */
    async nextNonce(address: Address, known: bigint): Promise<bigint> {
      const sender = address.toLowerCase() as Address
      const nonces = new Set<number>(shared === null ? [] : await shared.from(sender, known))
      const cutoff = now() - dropAfterMs
      for (const [nonce, forwarded] of book.of(sender) ?? []) {
        if (BigInt(forwarded.through) < known || forwarded.at < cutoff) book.forget(sender, nonce)
        else for (let taken = nonce; taken <= forwarded.through; taken++) nonces.add(taken)
      }
      let next = known
      while (next <= BigInt(Number.MAX_SAFE_INTEGER) && nonces.has(Number(next))) next++
      return next
    },
    /**
     * A forwarded transaction not yet dropped, by hash; `null` if unknown (the caller looks elsewhere first).
     * Shared, the store shared is asked (another process may have replaced one of this process's sends), and
     * this process's own sends answer while it fails.
     */
    async transaction(hash: Hash): Promise<PendingTransaction | null> {
      const own = (): PendingTransaction | null => book.byHash(hash)?.transaction ?? null
      return shared === null ? own() : shared.transaction(hash, own)
    },
    get size() {
      return book.size
    },
  }
}

export type ForwardedTransactions = ReturnType<typeof createForwardedTransactions>
