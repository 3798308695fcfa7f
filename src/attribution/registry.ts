import { type Address, decodeEventLog, getAddress, type Hex, hexToBigInt, numberToHex, parseAbi, stringToHex, toEventSelector } from 'viem'

/**
 * Base's on-chain Builder Codes registry (base/builder-codes): an ERC-721 whose token id is the code itself,
 * left-aligned in 32 bytes. A code earns only once it is registered there; flashgate indexes the registry's
 * events and folds them into each code's state (owner, payout address, since when).
 */
export const REGISTRY_ADDRESSES: Readonly<Record<number, Address>> = {
  8453: '0x000000bc7e6457e610fe52dcc0ca5b3ce59c8e80',
  84532: '0xf20b8a32c39f3c56bbd27fe8438090b5a03b6381',
}

export const registryAbi = parseAbi([
  'event Transfer(address indexed from, address indexed to, uint256 indexed tokenId)',
  'event CodeRegistered(uint256 indexed tokenId, string code)',
  'event PayoutAddressUpdated(uint256 indexed tokenId, address payoutAddress)',
  'function register(string code, address initialOwner, address payoutAddress)',
  'function transferFrom(address from, address to, uint256 tokenId)',
  'function updatePayoutAddress(string code, address payoutAddress)',
  'function ownerOf(uint256 tokenId) view returns (address)',
  'function payoutAddress(uint256 tokenId) view returns (address)',
])

/** The registry's events flashgate reads, by topic0. */
export const REGISTRY_TOPICS = {
  transfer: toEventSelector('Transfer(address,address,uint256)'),
  registered: toEventSelector('CodeRegistered(uint256,string)'),
  payout: toEventSelector('PayoutAddressUpdated(uint256,address)'),
} as const

/** The registry's own rule: 1 to 32 of `[0-9a-z_]`. */
const REGISTRY_CODE = /^[0-9a-z_]{1,32}$/

export function isRegistryCode(code: string): boolean {
  return REGISTRY_CODE.test(code)
}

/** The token id of a registry code: its ASCII bytes left-aligned in 32 bytes (solady's small string). */
export function registryTokenId(code: string): bigint {
  if (!isRegistryCode(code)) throw new RangeError(`${JSON.stringify(code)} is not a registry code`)
  return hexToBigInt(stringToHex(code, { size: 32 }))
}

/**
 * What `builder_code_registry_events` holds: the events of `address` from the indexed blocks, and of the
 * blocks below `below` (the lowest block indexed when the registry was set) up to `next`, read from the
 * upstream. Complete when `next === below`.
 */
export type RegistryProgress = { address: Address; below: number; next: number }

export type RegistryEventKind = 'transfer' | 'registered' | 'payout'

/** One event of the registry, as the ingester stores it (`builder_code_registry_events`). */
export type RegistryEvent = {
  blockNumber: number
  logIndex: number
  blockTimestamp: number
  /** 32 bytes, hex. */
  tokenId: Hex
  kind: RegistryEventKind
  /** `registered`: the code. */
  code: string | null
  /** `transfer`: the new owner (zero when burnt); `payout`: the payout address. */
  account: Address | null
}

type RawLog = { address: string; topics: readonly Hex[]; data: Hex; logIndex: Hex | number | null }

/** Events of the registry that do not decode (a contract at the address that is not the registry): skipped. */
export const registryDecodeFailures = { events: 0 }

/**
 * The registry events among a block's logs, in log order; logs of other contracts and other events of the
 * registry (approvals, roles, metadata) are skipped, and a log that does not decode is counted and skipped.
 */
export function registryEvents(registry: Address, block: { number: number; timestamp: number }, logs: readonly RawLog[]): RegistryEvent[] {
  const address = registry.toLowerCase()
  const events: RegistryEvent[] = []
  for (const log of logs) {
    if (log.address.toLowerCase() !== address) continue
    const topic0 = log.topics[0]
    if (topic0 !== REGISTRY_TOPICS.transfer && topic0 !== REGISTRY_TOPICS.registered && topic0 !== REGISTRY_TOPICS.payout) continue
    let decoded: { eventName: string; args: Record<string, unknown> }
    try {
      decoded = decodeEventLog({ abi: registryAbi, topics: log.topics as [Hex, ...Hex[]], data: log.data, strict: true }) as unknown as typeof decoded
    } catch {
      registryDecodeFailures.events++
      continue
    }
    const tokenId = numberToHex(decoded.args.tokenId as bigint, { size: 32 })
    const base = {
      blockNumber: block.number,
      logIndex: typeof log.logIndex === 'number' ? log.logIndex : Number(log.logIndex ?? 0),
      blockTimestamp: block.timestamp,
      tokenId,
    }
    if (decoded.eventName === 'Transfer') events.push({ ...base, kind: 'transfer', code: null, account: getAddress(decoded.args.to as Address) })
    else if (decoded.eventName === 'CodeRegistered') {
      const code = decoded.args.code as string
      // A code the registry could not have minted (a look-alike contract): not a registration.
      if (!isRegistryCode(code) || registryTokenId(code) !== (decoded.args.tokenId as bigint)) {
        registryDecodeFailures.events++
        continue
      }
      events.push({ ...base, kind: 'registered', code, account: null })
    } else events.push({ ...base, kind: 'payout', code: null, account: getAddress(decoded.args.payoutAddress as Address) })
  }
  return events
}

/** A code's state in the registry. */
export type RegistryEntry = {
  tokenId: Hex
  /** Block and time of the `CodeRegistered` event. */
  registeredBlock: number
  registeredAt: number
  /** The token's owner; `null` once burnt. */
  owner: Address | null
  payoutAddress: Address | null
}

const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000'

/**
 * Folds registry events, in chain order, into the state of each code. A token seen before its
 * `CodeRegistered` (its mint `Transfer` comes first in the same transaction) is held by id until then.
 */
export function createRegistryFold() {
  const byToken = new Map<Hex, { code: string | null; registeredBlock: number; registeredAt: number; owner: Address | null; payoutAddress: Address | null }>()
  const byCode = new Map<string, RegistryEntry>()

  function apply(event: RegistryEvent) {
    let token = byToken.get(event.tokenId)
    if (token === undefined)
      byToken.set(
        event.tokenId,
        (token = { code: null, registeredBlock: event.blockNumber, registeredAt: event.blockTimestamp, owner: null, payoutAddress: null }),
      )
    if (event.kind === 'transfer') token.owner = event.account === null || event.account === ZERO_ADDRESS ? null : event.account
    else if (event.kind === 'payout') token.payoutAddress = event.account
    else {
      token.code = event.code
      token.registeredBlock = event.blockNumber
      token.registeredAt = event.blockTimestamp
    }
    if (token.code !== null) {
      if (token.owner === null && event.kind === 'transfer') byCode.delete(token.code)
      else
        byCode.set(token.code, {
          tokenId: event.tokenId,
          registeredBlock: token.registeredBlock,
          registeredAt: token.registeredAt,
          owner: token.owner,
          payoutAddress: token.payoutAddress,
        })
    }
  }

  return { apply, entries: byCode as ReadonlyMap<string, RegistryEntry> }
}
