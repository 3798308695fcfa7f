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

type State = { balance: bigint; nonce: bigint }
export type AccountChange = { address: Address; before: State; after: State }

const readBalance = (account: PrestateAccount | undefined, fallback: bigint) => (account?.balance === undefined ? fallback : BigInt(account.balance))
const readNonce = (account: PrestateAccount | undefined, fallback: bigint) => (account?.nonce === undefined ? fallback : BigInt(account.nonce))

/** Folds a block's per-transaction diffs into one change per account whose balance or nonce moved. */
export function foldPrestateDiffs(diffs: PrestateDiff[]): AccountChange[] {
  const accounts = new Map<string, { before: State; after: State }>()
  for (const { pre, post } of diffs) {
    for (const [address, account] of Object.entries(pre)) {
      if (accounts.has(address)) continue
      const state = { balance: readBalance(account, 0n), nonce: readNonce(account, 0n) }
      accounts.set(address, { before: state, after: state })
    }
    for (const [address, account] of Object.entries(post)) {
      // An account created by this transaction is absent from `pre`: it started empty.
      const entry = accounts.get(address) ?? { before: { balance: 0n, nonce: 0n }, after: { balance: 0n, nonce: 0n } }
      entry.after = { balance: readBalance(account, entry.after.balance), nonce: readNonce(account, entry.after.nonce) }
      accounts.set(address, entry)
    }
  }
  const changes: AccountChange[] = []
  for (const [address, { before, after }] of accounts) {
    if (before.balance === after.balance && before.nonce === after.nonce) continue
    changes.push({ address: address.toLowerCase() as Address, before, after })
  }
  return changes
}
