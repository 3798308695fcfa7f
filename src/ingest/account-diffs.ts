import type { Address, Hex } from 'viem'

/**
 * One transaction's result of `prestateTracer` with `diffMode: true`: `pre` holds the touched accounts
 * before the transaction, `post` only the fields that changed. Missing fields are zero (geth omits them).
 * Balances and nonces are folded into `account_changes` here; code and storage serve the flashblock
 * executor's cache (pending/execute/state.ts `applyDiffs`).
 * https://geth.ethereum.org/docs/developers/evm-tracing/built-in-tracers#prestate-tracer
 */
export type PrestateAccount = { balance?: Hex; nonce?: number | Hex; code?: Hex; storage?: Record<Hex, Hex> }
export type PrestateDiff = { pre: Record<string, PrestateAccount>; post: Record<string, PrestateAccount> }

export type AccountState = { balance: bigint; nonce: bigint }
export type AccountChange = { address: Address; before: AccountState; after: AccountState }

/** A block's withdrawals (EIP-4895), as the node lists them: `amount` in Gwei. */
export type RawWithdrawal = { address: Hex; amount: Hex }

/**
 * What a block's withdrawals pay each recipient, in wei. They are paid after the block's transactions and
 * outside them, so no transaction's trace shows them: a recipient's balance after the block is what the traces
 * leave it plus this.
 */
export type WithdrawalCredits = {
  credits: Map<Address, bigint>
  /** The state before the block of each recipient no transaction of the block touched (the traces have it for the others). */
  before: Map<Address, AccountState>
}

const GWEI = 1_000_000_000n

/** A block's withdrawals summed by recipient, in wei; those paying nothing left out. */
export function withdrawalCredits(withdrawals: readonly RawWithdrawal[] | undefined): Map<Address, bigint> {
  const credits = new Map<Address, bigint>()
  for (const { address, amount } of withdrawals ?? []) {
    const wei = BigInt(amount) * GWEI
    if (wei === 0n) continue
    const key = address.toLowerCase() as Address
    credits.set(key, (credits.get(key) ?? 0n) + wei)
  }
  return credits
}

/** The recipients whose state before the block none of its transactions' traces holds. */
export function untracedRecipients(diffs: readonly PrestateDiff[], credits: Map<Address, bigint>): Address[] {
  const traced = new Set<string>()
  for (const { pre, post } of diffs) for (const address of [...Object.keys(pre), ...Object.keys(post)]) traced.add(address.toLowerCase())
  return [...credits.keys()].filter((address) => !traced.has(address))
}

const readBalance = (account: PrestateAccount | undefined, fallback: bigint) => (account?.balance === undefined ? fallback : BigInt(account.balance))
const readNonce = (account: PrestateAccount | undefined, fallback: bigint) => (account?.nonce === undefined ? fallback : BigInt(account.nonce))

/**
 * Folds a block's per-transaction diffs, then what its withdrawals paid, into one change per account whose
 * balance or nonce moved.
 */
export function foldPrestateDiffs(diffs: readonly PrestateDiff[], withdrawals?: WithdrawalCredits): AccountChange[] {
  const accounts = new Map<string, { before: AccountState; after: AccountState }>()
  for (const { pre, post } of diffs) {
    for (const [key, account] of Object.entries(pre)) {
      const address = key.toLowerCase()
      if (accounts.has(address)) continue
      const state = { balance: readBalance(account, 0n), nonce: readNonce(account, 0n) }
      accounts.set(address, { before: state, after: state })
    }
    for (const [key, account] of Object.entries(post)) {
      const address = key.toLowerCase()
      // An account created by this transaction is absent from `pre`: it started empty.
      const entry = accounts.get(address) ?? { before: { balance: 0n, nonce: 0n }, after: { balance: 0n, nonce: 0n } }
      entry.after = { balance: readBalance(account, entry.after.balance), nonce: readNonce(account, entry.after.nonce) }
      accounts.set(address, entry)
    }
  }
  for (const [address, wei] of withdrawals?.credits ?? []) {
    const traced = accounts.get(address)
    const before = traced?.before ?? withdrawals!.before.get(address)
    if (before === undefined) throw new Error(`no state before the block for withdrawal recipient ${address}`)
    const after = traced?.after ?? before
    accounts.set(address, { before, after: { balance: after.balance + wei, nonce: after.nonce } })
  }
  const changes: AccountChange[] = []
  for (const [address, { before, after }] of accounts) {
    if (before.balance === after.balance && before.nonce === after.nonce) continue
    changes.push({ address: address as Address, before, after })
  }
  return changes
}
