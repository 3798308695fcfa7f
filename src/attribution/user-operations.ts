import { type Address, decodeEventLog, decodeFunctionData, getAbiItem, type Hex, toEventSelector } from 'viem'
import { entryPoint06Abi, entryPoint06Address, entryPoint07Abi, entryPoint07Address, entryPoint08Abi, entryPoint08Address } from 'viem/account-abstraction'
import { type DecodedAttribution, decodeAttribution } from './decode.js'
import type { EntryPointSetting, EntryPointVersion } from './entry-point-setting.js'

/**
 * ERC-4337 user operations, for attribution: ERC-8021 says a smart account's suffix goes at the end of the
 * user operation's `callData`, not of the bundler's transaction. The EntryPoint versions in use, at their
 * canonical addresses (viem's ABIs and addresses; the decoding is viem's, never hand-written).
 */
export const ENTRY_POINTS = [
  { version: '0.6', address: entryPoint06Address, abi: entryPoint06Abi },
  { version: '0.7', address: entryPoint07Address, abi: entryPoint07Abi },
  { version: '0.8', address: entryPoint08Address, abi: entryPoint08Abi },
] as const satisfies readonly { version: EntryPointVersion; address: Address; abi: unknown }[]

export type EntryPoint = (typeof ENTRY_POINTS)[number]

/** The EntryPoints `--entry-points` names, each with its version's ABI. */
export function entryPointsFor(setting: EntryPointSetting): EntryPoint[] {
  if (setting === 'canonical') return [...ENTRY_POINTS]
  return setting.map(({ version, address }) => {
    const known = ENTRY_POINTS.find((entryPoint) => entryPoint.version === version)
    if (known === undefined) throw new RangeError(`no ABI for EntryPoint version ${version}`)
    return { ...known, address } as EntryPoint
  })
}

/** Bundles with more operations than this are read up to it: a hostile bundle cannot make ingest loop long. */
const MAX_OPERATIONS_PER_BUNDLE = 256

/** A user operation of a bundle: its position in the bundle, its smart account and nonce, and its calldata. */
export type UserOperationCall = { index: number; sender: Address; nonce: bigint; callData: Hex }

/** What the EntryPoint reported of an operation (`UserOperationEvent`). */
export type UserOperationOutcome = { sender: Address; nonce: bigint; success: boolean; actualGasUsed: bigint; actualGasCost: bigint }

/** The topic of `UserOperationEvent` (the same event in 0.6, 0.7 and 0.8). */
const USER_OPERATION_EVENT = toEventSelector(getAbiItem({ abi: entryPoint07Abi, name: 'UserOperationEvent' }))

/** Failures to read a call to an EntryPoint, by kind: hostile or malformed calldata is ignored, never fatal. */
export const userOperationDecodeFailures = { calldata: 0, events: 0 }

/** The EntryPoint at `address`, among `entryPoints` (lower-cased comparison); `null` for any other contract. */
export function entryPointAt(address: string | null | undefined, entryPoints: readonly EntryPoint[] = ENTRY_POINTS): EntryPoint | null {
  if (typeof address !== 'string') return null
  const lower = address.toLowerCase()
  return entryPoints.find((entryPoint) => entryPoint.address.toLowerCase() === lower) ?? null
}

/**
 * The user operations of a call to an EntryPoint (`handleOps` or `handleAggregatedOps`), in bundle order;
 * `[]` for any other call or for calldata that does not decode (counted in userOperationDecodeFailures).
 */
export function decodeUserOperations(entryPoint: EntryPoint, input: Hex | string | null | undefined): UserOperationCall[] {
  if (typeof input !== 'string' || input.length < 10) return []
  let decoded: { functionName: string; args?: readonly unknown[] }
  try {
    decoded = decodeFunctionData({ abi: entryPoint.abi, data: input as Hex }) as { functionName: string; args?: readonly unknown[] }
  } catch {
    userOperationDecodeFailures.calldata++
    return []
  }
  type Operation = { sender: Address; nonce: bigint; callData: Hex }
  let operations: readonly Operation[]
  if (decoded.functionName === 'handleOps') operations = (decoded.args?.[0] ?? []) as readonly Operation[]
  else if (decoded.functionName === 'handleAggregatedOps')
    operations = ((decoded.args?.[0] ?? []) as readonly { userOps: readonly Operation[] }[]).flatMap((group) => group.userOps)
  else return []
  return operations.slice(0, MAX_OPERATIONS_PER_BUNDLE).map((operation, index) => ({
    index,
    sender: operation.sender.toLowerCase() as Address,
    nonce: operation.nonce,
    callData: operation.callData,
  }))
}

/** The `UserOperationEvent`s the EntryPoint emitted in a receipt's logs, in log order. */
export function userOperationOutcomes(entryPoint: EntryPoint, logs: readonly { address: string; topics: readonly Hex[]; data: Hex }[]): UserOperationOutcome[] {
  const outcomes: UserOperationOutcome[] = []
  const address = entryPoint.address.toLowerCase()
  for (const log of logs) {
    if (log.address.toLowerCase() !== address || log.topics.length === 0) continue
    let event: { eventName: string; args: Record<string, unknown> }
    try {
      event = decodeEventLog({ abi: entryPoint.abi, topics: log.topics as [Hex, ...Hex[]], data: log.data }) as unknown as typeof event
    } catch {
      // Another event of the EntryPoint; a UserOperationEvent that does not decode is counted.
      if (log.topics[0]?.toLowerCase() === USER_OPERATION_EVENT) userOperationDecodeFailures.events++
      continue
    }
    if (event.eventName !== 'UserOperationEvent') continue
    const { sender, nonce, success, actualGasUsed, actualGasCost } = event.args as {
      sender: Address
      nonce: bigint
      success: boolean
      actualGasUsed: bigint
      actualGasCost: bigint
    }
    outcomes.push({ sender: sender.toLowerCase() as Address, nonce, success, actualGasUsed, actualGasCost })
  }
  return outcomes
}

/** One attributed action of a transaction: the transaction itself, or one of the user operations it bundles. */
export type AttributedAction = {
  kind: 'transaction' | 'userOperation'
  /** The operation's position in its bundle; -1 for the transaction itself. */
  operationIndex: number
  /** The transaction's sender, or the operation's smart account (never the bundler). */
  sender: Address
  /** The transaction's `to`; `null` for a contract creation and for an operation (its call is the account's). */
  target: Address | null
  attribution: DecodedAttribution
  /** The transaction's gas (its receipt) or the operation's (`actualGasUsed`); `null` while no receipt is known. */
  gasUsed: bigint | null
  /** Wei the transaction sent; 0 for an operation (its value moves inside the account's own call). */
  value: bigint
  /** The operation's `success`; `true` for a transaction (a reverted one is still attributed, as now). */
  success: boolean
}

export type TransactionForAttribution = { from: string; to?: string | null; input?: string | null; value?: string | bigint | null }
export type ReceiptForAttribution = { gasUsed?: string | bigint | null; logs: readonly { address: string; topics: readonly Hex[]; data: Hex }[] } | null

/**
 * Everything a transaction attributes: its own calldata's suffix, and, for a bundle sent to an EntryPoint,
 * each user operation whose `callData` ends in a suffix, with the gas the EntryPoint reported for it
 * (matched by sender and nonce). Never throws.
 */
export function attributedActions(
  transaction: TransactionForAttribution,
  receipt: ReceiptForAttribution,
  entryPoints: readonly EntryPoint[] = ENTRY_POINTS,
): AttributedAction[] {
  const actions: AttributedAction[] = []
  const own = decodeAttribution(transaction.input)
  if (own !== null && own.codes.length > 0)
    actions.push({
      kind: 'transaction',
      operationIndex: -1,
      sender: transaction.from.toLowerCase() as Address,
      target: transaction.to ? (transaction.to.toLowerCase() as Address) : null,
      attribution: own,
      gasUsed: receipt?.gasUsed === undefined || receipt?.gasUsed === null ? null : BigInt(receipt.gasUsed),
      value: BigInt(transaction.value ?? 0),
      success: true,
    })
  const entryPoint = entryPointAt(transaction.to, entryPoints)
  if (entryPoint === null) return actions
  const operations = decodeUserOperations(entryPoint, transaction.input)
  if (operations.length === 0) return actions
  const outcomes = receipt === null ? [] : userOperationOutcomes(entryPoint, receipt.logs)
  for (const operation of operations) {
    const attribution = decodeAttribution(operation.callData)
    if (attribution === null || attribution.codes.length === 0) continue
    const outcome = outcomes.find((candidate) => candidate.sender === operation.sender && candidate.nonce === operation.nonce)
    // With the receipt known, an operation the EntryPoint did not report never ran (the bundle reverted).
    if (receipt !== null && outcome === undefined) continue
    actions.push({
      kind: 'userOperation',
      operationIndex: operation.index,
      sender: operation.sender,
      target: null,
      attribution,
      gasUsed: outcome?.actualGasUsed ?? null,
      value: 0n,
      success: outcome?.success ?? true,
    })
  }
  return actions
}
