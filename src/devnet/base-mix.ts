import { Attribution } from 'ox/erc8021'
import { type Address, type Hex, concat, encodeFunctionData, getAddress, keccak256, numberToHex, slice } from 'viem'
import { attributionSuffix } from '../attribution/index.js'
import { tokenAbi } from './contracts.js'
import { LOGS_PER_HOP, poolAbi } from './pool.js'

// What one transaction of the `base` load profile is (profile.ts sends them). The shares follow what a
// Base block is made of: token transfers, DEX swaps (most of the logs, several per transaction), batch
// transfers and airdrops, plain ETH transfers and a few reverts, against a few hot contracts, paid to a
// long tail of addresses. About 6 logs per transaction, so 250 transactions make about 1,500 logs.

/** Kinds and their share of transactions (they add up to 1). */
export const BASE_MIX = {
  /** ERC-20 transfer: one Transfer log. */
  transfer: 0.3,
  /** A swap through 1–3 pools: LOGS_PER_HOP logs per hop. */
  swap: 0.45,
  /** Token.multi(to, n), an airdrop or batch payout: n Transfer logs. */
  batch: 0.15,
  /** Plain ETH transfer: no logs. */
  eth: 0.08,
  /** ERC-20 transfer of 0, which the token refuses: status 0, no logs. */
  revert: 0.02,
} as const
export type TransactionKind = keyof typeof BASE_MIX

/** Hops of a swap and their odds: most swaps hit one pool, routed ones two or three. */
const SWAP_HOPS: readonly (readonly [hops: number, weight: number])[] = [
  [1, 0.5],
  [2, 0.3],
  [3, 0.2],
]
const BATCH_MIN_TRANSFERS = 10
const BATCH_MAX_TRANSFERS = 25
/** Share of transactions carrying an ERC-8021 builder-code suffix, and of those a wallet's code stacked after. */
export const ATTRIBUTED_SHARE = 0.1
const STACKED_SHARE = 0.15
/** Apps' builder codes (bc_ + 8 characters, as flashgate generates them), the first the busiest. */
export const PROFILE_BUILDER_CODES = ['bc_baseapp1', 'bc_swapbot1', 'bc_wallet01', 'bc_agent001', 'bc_mintbot1'] as const
const PROFILE_WALLET_CODE = 'profile_wallet'
/** Distinct recipients of the long tail; a few are paid very often, most rarely (Zipf). */
export const RECIPIENTS = 20_000
export const RECIPIENT_ZIPF_EXPONENT = 1.1
/** Share of payments to an address never seen before (new accounts keep appearing). */
const NEW_ADDRESS_SHARE = 0.05
const SENDER_ZIPF_EXPONENT = 0.9
/** The first pool takes this share of swaps (hot contracts are uneven too). */
const HOT_POOL_SHARE = 0.7
/** Swaps pay out to the swapper; the rest to someone else (a router's `to`). */
const SWAP_TO_SELF_SHARE = 0.8
const MAX_TOKEN_AMOUNT = 10n ** 18n
const MAX_ETH_VALUE_WEI = 10n ** 15n
// Gas limits: the measured use plus a margin (a swap hop ~25k after the first, a batched Transfer ~2k).
const TRANSFER_GAS = 60_000n
const ETH_GAS = 30_000n
const SWAP_BASE_GAS = 60_000n
const SWAP_GAS_PER_HOP = 50_000n
const BATCH_BASE_GAS = 40_000n
const BATCH_GAS_PER_TRANSFER = 4_000n

export type BaseContracts = { tokens: Address[]; pools: Address[] }

export type PlannedTransaction = {
  kind: TransactionKind
  to: Address
  data: Hex
  value: bigint
  gas: bigint
  /** Logs it will leave when included. */
  logs: number
  /** The builder codes in its ERC-8021 suffixes, outermost first (as decodeAttribution lists them); none without. */
  codes: string[]
}

export type Random = {
  /** Uniform in [0, 1). */
  next: () => number
  int: (min: number, max: number) => number
  bigint: (max: bigint) => bigint
}

/** mulberry32: small, fast and seeded, so a profile run can be repeated transaction for transaction. */
export function createRandom(seed: number): Random {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    // Two 32-bit draws: enough spread for amounts.
    bigint: (max) => ((BigInt(Math.floor(next() * 2 ** 32)) << 32n) | BigInt(Math.floor(next() * 2 ** 32))) % max,
  }
}

/** Draws ranks 0..n-1 with P(k) ∝ 1/(k+1)^exponent, by binary search in the cumulative weights. */
export function createZipf(n: number, exponent: number): (random: Random) => number {
  const cumulative = new Float64Array(n)
  let total = 0
  for (let rank = 0; rank < n; rank++) cumulative[rank] = total += 1 / (rank + 1) ** exponent
  return (random) => {
    const target = random.next() * total
    let low = 0
    let high = n - 1
    while (low < high) {
      const middle = (low + high) >> 1
      if (cumulative[middle]! < target) low = middle + 1
      else high = middle
    }
    return low
  }
}

function pickWeighted<T>(random: Random, entries: readonly (readonly [T, number])[]): T {
  let roll = random.next() * entries.reduce((sum, [, weight]) => sum + weight, 0)
  for (const [value, weight] of entries) if ((roll -= weight) < 0) return value
  return entries.at(-1)![0]
}

/** Logs per transaction the mix gives on average (for sizing and for its test). */
export function expectedLogsPerTransaction(): number {
  const hops = SWAP_HOPS.reduce((sum, [count, weight]) => sum + count * weight, 0) / SWAP_HOPS.reduce((sum, [, weight]) => sum + weight, 0)
  return BASE_MIX.transfer + BASE_MIX.swap * hops * LOGS_PER_HOP + BASE_MIX.batch * ((BATCH_MIN_TRANSFERS + BATCH_MAX_TRANSFERS) / 2)
}

export type BaseMix = {
  /** Index of the next transaction's sender among `senderCount`, hot senders first. */
  pickSender: () => number
  /** The next transaction from `sender`. */
  plan: (sender: Address) => PlannedTransaction
}

export function createBaseMix(options: { seed: number; contracts: BaseContracts; senderCount: number }): BaseMix {
  const { contracts } = options
  const random = createRandom(options.seed)
  const recipientRank = createZipf(RECIPIENTS, RECIPIENT_ZIPF_EXPONENT)
  const senderRank = createZipf(options.senderCount, SENDER_ZIPF_EXPONENT)
  const codeRank = createZipf(PROFILE_BUILDER_CODES.length, 1)
  const recipients = new Map<number, Address>()
  let newAddresses = 0
  const kinds = Object.entries(BASE_MIX) as [TransactionKind, number][]

  /** The long tail's k-th address, the same for a seed on every run. */
  function recipient(): Address {
    if (random.next() < NEW_ADDRESS_SHARE) return derivedAddress(options.seed, NEW_ADDRESS_DOMAIN, newAddresses++)
    const rank = recipientRank(random)
    let address = recipients.get(rank)
    if (address === undefined) {
      address = tailRecipient(options.seed, rank)
      recipients.set(rank, address)
    }
    return address
  }

  const amount = () => 1n + random.bigint(MAX_TOKEN_AMOUNT)
  const pick = <T>(items: readonly T[]) => items[Math.floor(random.next() * items.length)]!

  function call(kind: TransactionKind, sender: Address): Omit<PlannedTransaction, 'codes'> {
    switch (kind) {
      case 'transfer':
      case 'revert': {
        const value = kind === 'revert' ? 0n : amount()
        const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [recipient(), value] })
        return { kind, to: pick(contracts.tokens), data, value: 0n, gas: TRANSFER_GAS, logs: kind === 'revert' ? 0 : 1 }
      }
      case 'swap': {
        const hops = pickWeighted(random, SWAP_HOPS)
        const pool = random.next() < HOT_POOL_SHARE ? contracts.pools[0]! : pick(contracts.pools.slice(1))
        const tokenIn = pick(contracts.tokens)
        const tokenOut = pick(contracts.tokens.filter((token) => token !== tokenIn))
        const to = random.next() < SWAP_TO_SELF_SHARE ? sender : recipient()
        const data = encodeFunctionData({ abi: poolAbi, functionName: 'swap', args: [tokenIn, tokenOut, to, amount(), amount(), BigInt(hops)] })
        return { kind, to: pool, data, value: 0n, gas: SWAP_BASE_GAS + SWAP_GAS_PER_HOP * BigInt(hops), logs: hops * LOGS_PER_HOP }
      }
      case 'batch': {
        const transfers = random.int(BATCH_MIN_TRANSFERS, BATCH_MAX_TRANSFERS)
        const data = encodeFunctionData({ abi: tokenAbi, functionName: 'multi', args: [recipient(), BigInt(transfers)] })
        return { kind, to: pick(contracts.tokens), data, value: 0n, gas: BATCH_BASE_GAS + BATCH_GAS_PER_TRANSFER * BigInt(transfers), logs: transfers }
      }
      case 'eth':
        return { kind, to: recipient(), data: '0x', value: 1n + random.bigint(MAX_ETH_VALUE_WEI), gas: ETH_GAS, logs: 0 }
    }
  }

  return {
    pickSender: () => senderRank(random),
    plan(sender) {
      const planned = call(pickWeighted(random, kinds), sender)
      if (random.next() >= ATTRIBUTED_SHARE) return { ...planned, codes: [] }
      const code = PROFILE_BUILDER_CODES[codeRank(random)]!
      // A wallet may stack its own code after the app's (ERC-8021 allows several suffixes).
      if (random.next() < STACKED_SHARE) {
        const data = concat([planned.data, attributionSuffix([code]), Attribution.toDataSuffix({ codes: [PROFILE_WALLET_CODE] })])
        return { ...planned, data, codes: [PROFILE_WALLET_CODE, code] }
      }
      return { ...planned, data: concat([planned.data, attributionSuffix([code])]), codes: [code] }
    },
  }
}

const TAIL_DOMAIN = 0
const NEW_ADDRESS_DOMAIN = 1

/** The long tail's address of `rank` (0 the most paid) for a seed: what a read load asks about. */
export function tailRecipient(seed: number, rank: number): Address {
  return derivedAddress(seed, TAIL_DOMAIN, rank)
}

/** An address derived from the seed: the tail's `index`-th, or the `index`-th new one. */
function derivedAddress(seed: number, domain: number, index: number): Address {
  return getAddress(slice(keccak256(concat([numberToHex(seed, { size: 8 }), numberToHex(domain, { size: 1 }), numberToHex(index, { size: 8 })])), 12))
}
