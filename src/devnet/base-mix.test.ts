import { type Address, decodeFunctionData } from 'viem'
import { describe, expect, test } from 'vitest'
import { decodeAttribution } from '../attribution/index.js'
import { ATTRIBUTED_SHARE, BASE_MIX, PROFILE_BUILDER_CODES, createBaseMix, createRandom, createZipf, expectedLogsPerTransaction } from './base-mix.js'
import { tokenAbi } from './contracts.js'
import { poolAbi } from './pool.js'
import { BASE_TRANSACTIONS_PER_BLOCK } from './profile.js'

const CONTRACTS = {
  tokens: [
    '0x00000000000000000000000000000000000000a1',
    '0x00000000000000000000000000000000000000a2',
    '0x00000000000000000000000000000000000000a3',
  ] as Address[],
  pools: ['0x00000000000000000000000000000000000000b1', '0x00000000000000000000000000000000000000b2'] as Address[],
}
const SENDER: Address = '0x00000000000000000000000000000000000000c1'
const SAMPLES = 20_000

function plans(seed: number, count = SAMPLES) {
  const mix = createBaseMix({ seed, contracts: CONTRACTS, senderCount: 400 })
  return Array.from({ length: count }, () => mix.plan(SENDER))
}

describe('the base mix', () => {
  test('its shares add up to one and give about 1,500 logs for a block of 250 transactions', () => {
    expect(Object.values(BASE_MIX).reduce((sum, share) => sum + share, 0)).toBeCloseTo(1, 10)
    expect(expectedLogsPerTransaction() * BASE_TRANSACTIONS_PER_BLOCK).toBeGreaterThan(1_425)
    expect(expectedLogsPerTransaction() * BASE_TRANSACTIONS_PER_BLOCK).toBeLessThan(1_575)
  })

  test('planned transactions average the expected logs, each kind with its share', () => {
    const planned = plans(1)
    const meanLogs = planned.reduce((sum, plan) => sum + plan.logs, 0) / planned.length
    expect(Math.abs(meanLogs / expectedLogsPerTransaction() - 1)).toBeLessThan(0.03)
    for (const [kind, share] of Object.entries(BASE_MIX)) {
      const seen = planned.filter((plan) => plan.kind === kind).length / planned.length
      expect(Math.abs(seen - share), kind).toBeLessThan(0.015)
    }
  })

  test('calls are what they claim: swaps through a pool with 1–3 hops, transfers and batches on a token, reverts of 0', () => {
    for (const plan of plans(2, 2_000)) {
      if (plan.kind === 'eth') {
        expect(plan.value).toBeGreaterThan(0n)
        continue
      }
      const abi = plan.kind === 'swap' ? poolAbi : tokenAbi
      const { functionName, args } = decodeFunctionData({ abi, data: plan.data })
      if (plan.kind === 'swap') {
        expect(CONTRACTS.pools).toContain(plan.to)
        expect(functionName).toBe('swap')
        expect(plan.logs).toBe(4 * Number(args[5]))
      } else {
        expect(CONTRACTS.tokens).toContain(plan.to)
        expect(functionName).toBe(plan.kind === 'batch' ? 'multi' : 'transfer')
        if (plan.kind === 'revert') expect(args[1]).toBe(0n)
      }
    }
  })

  test('about a tenth carry ERC-8021 suffixes that decode to the planned codes', () => {
    const planned = plans(3)
    const attributed = planned.filter((plan) => plan.codes.length > 0)
    expect(Math.abs(attributed.length / planned.length - ATTRIBUTED_SHARE)).toBeLessThan(0.01)
    for (const plan of attributed.slice(0, 500)) expect(decodeAttribution(plan.data)?.codes).toEqual(plan.codes)
    for (const plan of planned.filter((candidate) => candidate.codes.length === 0).slice(0, 500)) expect(decodeAttribution(plan.data)).toBeNull()
    expect(new Set(attributed.map((plan) => plan.codes.at(-1)))).toEqual(new Set(PROFILE_BUILDER_CODES))
  })

  test('recipients form a long tail: a hot head and thousands of distinct addresses', () => {
    const recipients = plans(4)
      .filter((plan) => plan.kind === 'eth')
      .map((plan) => plan.to)
    const counts = new Map<Address, number>()
    for (const recipient of recipients) counts.set(recipient, (counts.get(recipient) ?? 0) + 1)
    const sorted = [...counts.values()].sort((a, b) => b - a)
    expect(sorted[0]! / recipients.length).toBeGreaterThan(0.05)
    expect(counts.size).toBeGreaterThan(recipients.length / 3)
  })

  test('the same seed plans the same transactions', () => {
    expect(plans(5, 200)).toStrictEqual(plans(5, 200))
    expect(plans(5, 200)).not.toStrictEqual(plans(6, 200))
  })

  test('Zipf ranks favour the head by 1/k^s', () => {
    const random = createRandom(7)
    const zipf = createZipf(100, 1)
    const counts = new Array<number>(100).fill(0)
    for (let draw = 0; draw < 50_000; draw++) counts[zipf(random)]!++
    expect(counts[0]! / counts[1]!).toBeGreaterThan(1.8)
    expect(counts[0]! / counts[1]!).toBeLessThan(2.2)
    expect(counts[99]).toBeGreaterThan(0)
  })
})
