import { isDeepStrictEqual } from 'node:util'
import { createRpcClient, type RpcAnswer, type RpcCall } from './rpc.js'

/** Calls per batch while comparing (anvil answers a batch one call after another). */
const VERIFY_BATCH = 25
/** Differences kept in the report, in full. */
const KEPT_DIFFERENCES = 3

export type VerifyResult = {
  compared: number
  /** Answers that were not empty (an empty answer proves little). */
  nonEmpty: number
  /** Sum of array lengths (logs or receipts) across the compared answers. */
  items: number
  differences: { call: RpcCall; flashgate: unknown; anvil: unknown }[]
  differenceCount: number
}

export class VerifyError extends Error {
  override readonly name = 'VerifyError'
}

/**
 * Sends the same calls to flashgate and anvil and compares the results. Any JSON-RPC error on either side
 * aborts the run (a benchmark of errors would be meaningless); unequal results are counted and kept.
 * `blockTimestamp` is ignored where anvil's log lacks it.
 */
export async function verifySample(flashgateUrl: string, anvilUrl: string, calls: RpcCall[]): Promise<VerifyResult> {
  const flashgate = createRpcClient(flashgateUrl)
  const anvil = createRpcClient(anvilUrl)
  const result: VerifyResult = { compared: 0, nonEmpty: 0, items: 0, differences: [], differenceCount: 0 }
  for (let start = 0; start < calls.length; start += VERIFY_BATCH) {
    const slice = calls.slice(start, start + VERIFY_BATCH)
    const [ours, theirs] = await Promise.all([flashgate.batchAnswers(slice), anvil.batchAnswers(slice)])
    slice.forEach((call, index) => {
      const mine = ours[index]
      const reference = theirs[index]
      const failed = describeError('flashgate', mine) ?? describeError('anvil', reference)
      if (failed !== null) throw new VerifyError(`${call.method} ${JSON.stringify(call.params)}: ${failed}`)
      const expected = reference!.result
      const actual = withoutExtraTimestamps(mine!.result, expected)
      result.compared++
      if (Array.isArray(expected)) result.items += expected.length
      if (Array.isArray(expected) ? expected.length > 0 : expected !== null && expected !== '0x0') result.nonEmpty++
      if (!isDeepStrictEqual(actual, expected)) {
        result.differenceCount++
        if (result.differences.length < KEPT_DIFFERENCES) result.differences.push({ call, flashgate: mine!.result, anvil: expected })
      }
    })
  }
  return result
}

function describeError(side: string, answer: RpcAnswer | undefined): string | null {
  if (answer === undefined) return `${side} gave no answer`
  if (answer.error !== undefined) return `${side} answered error ${answer.error.code} ${answer.error.message}`
  return null
}

/** Drops `blockTimestamp` from our logs (top level or inside receipts) where the reference has none. */
function withoutExtraTimestamps(value: unknown, reference: unknown): unknown {
  if (Array.isArray(value) && Array.isArray(reference)) return value.map((item, index) => withoutExtraTimestamps(item, reference[index]))
  if (isObject(value) && isObject(reference)) {
    const copy: Record<string, unknown> = {}
    for (const [key, item] of Object.entries(value)) {
      if (key === 'blockTimestamp' && !('blockTimestamp' in reference)) continue
      copy[key] = withoutExtraTimestamps(item, reference[key])
    }
    return copy
  }
  return value
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
