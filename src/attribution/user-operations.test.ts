import { type Address, concat, encodeAbiParameters, encodeEventTopics, encodeFunctionData, type Hex, pad, toHex } from 'viem'
import { entryPoint06Abi, entryPoint06Address, entryPoint07Abi, entryPoint07Address, entryPoint08Abi, entryPoint08Address } from 'viem/account-abstraction'
import { describe, expect, test } from 'vitest'
import { createMetrics } from '../server/metrics.js'
import { attributionSuffix } from './decode.js'
import { attributedActions, decodeUserOperations, ENTRY_POINTS, entryPointsFor, userOperationDecodeFailures } from './user-operations.js'
import { ENTRY_POINT_VERSIONS, parseEntryPointSetting } from './entry-point-setting.js'

const BUNDLER = '0x00000000000000000000000000000000000b0b00' as Address
const ACCOUNT_A = '0x000000000000000000000000000000000000aaaa' as Address
const ACCOUNT_B = '0x000000000000000000000000000000000000bbbb' as Address
/** An account's own call (SimpleAccount `execute(dest, value, func)`), to which the suffix is appended. */
const EXECUTE =
  '0xb61d27f6000000000000000000000000000000000000000000000000000000000000dead00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000060' as Hex
const withSuffix = (codes: string[]) => concat([EXECUTE, attributionSuffix(codes)])

function packed(sender: Address, nonce: bigint, callData: Hex) {
  return {
    sender,
    nonce,
    initCode: '0x' as Hex,
    callData,
    accountGasLimits: pad(toHex((100_000n << 128n) | 200_000n), { size: 32 }),
    preVerificationGas: 50_000n,
    gasFees: pad(toHex((1_000_000_000n << 128n) | 2_000_000_000n), { size: 32 }),
    paymasterAndData: '0x' as Hex,
    signature: '0x1234' as Hex,
  }
}

function unpacked(sender: Address, nonce: bigint, callData: Hex) {
  return {
    sender,
    nonce,
    initCode: '0x' as Hex,
    callData,
    callGasLimit: 100_000n,
    verificationGasLimit: 200_000n,
    preVerificationGas: 50_000n,
    maxFeePerGas: 2_000_000_000n,
    maxPriorityFeePerGas: 1_000_000_000n,
    paymasterAndData: '0x' as Hex,
    signature: '0x1234' as Hex,
  }
}

/** A `UserOperationEvent` log as the EntryPoint emits it (the event is the same in 0.6, 0.7 and 0.8). */
function operationEvent(entryPoint: Address, sender: Address, nonce: bigint, success: boolean, actualGasUsed: bigint) {
  const topics = encodeEventTopics({
    abi: entryPoint07Abi,
    eventName: 'UserOperationEvent',
    args: { userOpHash: pad('0x01', { size: 32 }), sender, paymaster: '0x0000000000000000000000000000000000000000' },
  }) as Hex[]
  const data = encodeAbiParameters(
    [{ type: 'uint256' }, { type: 'bool' }, { type: 'uint256' }, { type: 'uint256' }],
    [nonce, success, actualGasUsed * 2_000_000_000n, actualGasUsed],
  )
  return { address: entryPoint, topics, data }
}

describe('user operations (ERC-4337)', () => {
  test('handleOps on EntryPoint v0.7: each operation whose callData ends in a suffix is attributed to its account, with its own gas', () => {
    const input = encodeFunctionData({
      abi: entryPoint07Abi,
      functionName: 'handleOps',
      args: [
        [packed(ACCOUNT_A, 1n, withSuffix(['agent_a'])), packed(ACCOUNT_B, 7n, EXECUTE), packed(ACCOUNT_B, 8n, withSuffix(['agent_b', 'wallet_x']))],
        BUNDLER,
      ],
    })
    const receipt = {
      gasUsed: '0x30d40',
      logs: [
        operationEvent(entryPoint07Address, ACCOUNT_A, 1n, true, 90_000n),
        operationEvent(entryPoint07Address, ACCOUNT_B, 7n, true, 40_000n),
        operationEvent(entryPoint07Address, ACCOUNT_B, 8n, false, 60_000n),
      ],
    }
    const actions = attributedActions({ from: BUNDLER, to: entryPoint07Address, input, value: '0x0' }, receipt)
    expect(
      actions.map(({ kind, operationIndex, sender, gasUsed, success, attribution }) => ({
        kind,
        operationIndex,
        sender,
        gasUsed,
        success,
        codes: attribution.codes,
      })),
    ).toEqual([
      { kind: 'userOperation', operationIndex: 0, sender: ACCOUNT_A, gasUsed: 90_000n, success: true, codes: ['agent_a'] },
      // An operation whose call reverted still spent its gas under its code.
      { kind: 'userOperation', operationIndex: 2, sender: ACCOUNT_B, gasUsed: 60_000n, success: false, codes: ['agent_b', 'wallet_x'] },
    ])
  })

  test('a bundle with a suffix of its own: the bundler is attributed too, and the operations apart', () => {
    const calldata = encodeFunctionData({ abi: entryPoint07Abi, functionName: 'handleOps', args: [[packed(ACCOUNT_A, 1n, withSuffix(['agent_a']))], BUNDLER] })
    const input = concat([calldata, attributionSuffix(['bundler_co'])])
    const actions = attributedActions(
      { from: BUNDLER, to: entryPoint07Address, input },
      { gasUsed: 100_000n, logs: [operationEvent(entryPoint07Address, ACCOUNT_A, 1n, true, 80_000n)] },
    )
    expect(actions.map(({ kind, sender, gasUsed, attribution }) => [kind, sender, gasUsed, attribution.codes])).toEqual([
      ['transaction', BUNDLER, 100_000n, ['bundler_co']],
      ['userOperation', ACCOUNT_A, 80_000n, ['agent_a']],
    ])
  })

  test('EntryPoint v0.6 (unpacked operations) and v0.8 handleAggregatedOps decode the same way', () => {
    const v06 = encodeFunctionData({ abi: entryPoint06Abi, functionName: 'handleOps', args: [[unpacked(ACCOUNT_A, 3n, withSuffix(['six']))], BUNDLER] })
    expect(
      attributedActions({ from: BUNDLER, to: entryPoint06Address, input: v06 }, { logs: [operationEvent(entryPoint06Address, ACCOUNT_A, 3n, true, 1n)] }).map(
        (action) => action.attribution.codes,
      ),
    ).toEqual([['six']])
    const v08 = encodeFunctionData({
      abi: entryPoint08Abi,
      functionName: 'handleAggregatedOps',
      args: [
        [{ userOps: [packed(ACCOUNT_A, 1n, withSuffix(['eight'])), packed(ACCOUNT_B, 2n, withSuffix(['eight']))], aggregator: ACCOUNT_B, signature: '0x' }],
        BUNDLER,
      ],
    })
    expect(decodeUserOperations(ENTRY_POINTS[2], v08).map((operation) => [operation.index, operation.sender, operation.nonce])).toEqual([
      [0, ACCOUNT_A, 1n],
      [1, ACCOUNT_B, 2n],
    ])
    // Pending: no receipt yet, so no gas, but the operations are attributed already.
    expect(attributedActions({ from: BUNDLER, to: entryPoint08Address, input: v08 }, null).map((action) => [action.sender, action.gasUsed])).toEqual([
      [ACCOUNT_A, null],
      [ACCOUNT_B, null],
    ])
  })

  test('an operation the EntryPoint did not report (the bundle reverted) is not attributed', () => {
    const input = encodeFunctionData({ abi: entryPoint07Abi, functionName: 'handleOps', args: [[packed(ACCOUNT_A, 1n, withSuffix(['agent_a']))], BUNDLER] })
    expect(attributedActions({ from: BUNDLER, to: entryPoint07Address, input }, { gasUsed: 50_000n, logs: [] })).toEqual([])
  })

  test('hostile calldata is ignored, never fatal, and counted in /metrics', async () => {
    const before = userOperationDecodeFailures.calldata
    const valid = encodeFunctionData({ abi: entryPoint07Abi, functionName: 'handleOps', args: [[packed(ACCOUNT_A, 1n, withSuffix(['agent_a']))], BUNDLER] })
    const hostile: Hex[] = [
      valid.slice(0, valid.length - 200) as Hex, // truncated operation
      `${valid.slice(0, 10)}${'ff'.repeat(64)}` as Hex, // an offset pointing far past the data
      `${valid.slice(0, 74)}${'00'.repeat(31)}ff${'00'.repeat(32)}` as Hex, // an absurd array length
    ]
    for (const input of hostile) expect(() => attributedActions({ from: BUNDLER, to: entryPoint07Address, input }, null)).not.toThrow()
    for (const input of hostile) expect(attributedActions({ from: BUNDLER, to: entryPoint07Address, input }, null)).toEqual([])
    expect(userOperationDecodeFailures.calldata).toBeGreaterThanOrEqual(before + hostile.length)
    const { body } = await createMetrics().scrape()
    expect(Number(body.match(/^flashgate_attribution_user_operation_decode_failures_total\{part="calldata"\} (\d+)$/m)?.[1])).toBeGreaterThanOrEqual(
      before + hostile.length,
    )
    // A bogus suffix inside an operation (a marker with impossible lengths) attributes nothing.
    const bogus = concat([EXECUTE, '0xff01', '0x00', '0x80218021802180218021802180218021'])
    const input = encodeFunctionData({ abi: entryPoint07Abi, functionName: 'handleOps', args: [[packed(ACCOUNT_A, 1n, bogus)], BUNDLER] })
    expect(
      attributedActions({ from: BUNDLER, to: entryPoint07Address, input }, { logs: [operationEvent(entryPoint07Address, ACCOUNT_A, 1n, true, 1n)] }),
    ).toEqual([])
    // A UserOperationEvent whose data does not decode: the operation has no outcome (not attributed), and it is counted.
    const events = userOperationDecodeFailures.events
    const truncated = { ...operationEvent(entryPoint07Address, ACCOUNT_A, 1n, true, 1n), data: '0x01' as Hex }
    expect(attributedActions({ from: BUNDLER, to: entryPoint07Address, input: valid }, { logs: [truncated] })).toEqual([])
    expect(userOperationDecodeFailures.events).toBe(events + 1)
  })

  test('a call to any other contract is read for its own suffix only', () => {
    const input = encodeFunctionData({ abi: entryPoint07Abi, functionName: 'handleOps', args: [[packed(ACCOUNT_A, 1n, withSuffix(['agent_a']))], BUNDLER] })
    expect(attributedActions({ from: BUNDLER, to: ACCOUNT_B, input }, { logs: [] })).toEqual([])
  })

  test('--entry-points: EntryPoints elsewhere than the canonical addresses are read, and the canonical ones then are not', () => {
    const elsewhere = '0x0000000000000000000000000000000000e0e0e0' as Address
    const entryPoints = entryPointsFor(parseEntryPointSetting(`0.7=${elsewhere}`))
    expect(entryPoints.map(({ version, address }) => [version, address])).toEqual([['0.7', elsewhere]])
    const input = encodeFunctionData({ abi: entryPoint07Abi, functionName: 'handleOps', args: [[packed(ACCOUNT_A, 1n, withSuffix(['agent_a']))], BUNDLER] })
    const at = (to: Address) =>
      attributedActions({ from: BUNDLER, to, input }, { gasUsed: 100_000n, logs: [operationEvent(to, ACCOUNT_A, 1n, true, 80_000n)] }, entryPoints)
    expect(at(elsewhere).map(({ kind, sender, gasUsed }) => [kind, sender, gasUsed])).toEqual([['userOperation', ACCOUNT_A, 80_000n]])
    expect(at(entryPoint07Address)).toEqual([])
    expect(entryPointsFor(parseEntryPointSetting('canonical'))).toEqual([...ENTRY_POINTS])
    const listed = entryPointsFor(parseEntryPointSetting(` 0.6=${elsewhere} , 0.8=${entryPoint08Address}`))
    expect(listed.map(({ version, address, abi }) => [version, address, abi])).toEqual([
      ['0.6', elsewhere, ENTRY_POINTS[0].abi],
      ['0.8', entryPoint08Address, ENTRY_POINTS[2].abi],
    ])
    for (const bad of ['0.9=0x0000000000000000000000000000000000e0e0e0', '0.7', '0.7=0x1234', `0.7=${elsewhere}=x`, ''])
      expect(() => parseEntryPointSetting(bad), bad).toThrow(RangeError)
    // Every version the setting accepts has an ABI to read it with.
    expect(ENTRY_POINTS.map(({ version }) => version)).toEqual([...ENTRY_POINT_VERSIONS])
  })
})
