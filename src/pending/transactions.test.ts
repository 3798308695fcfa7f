import { parseGwei } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { describe, expect, test } from 'vitest'
import { decodePendingTransaction } from './transactions.js'

const account = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: 6 })
const base = { to: `0x${'42'.repeat(20)}` as const, value: 5n, gas: 30_000n, nonce: 9 }

describe('decodePendingTransaction', () => {
  test.each([
    ['legacy (EIP-155)', { ...base, type: 'legacy' as const, chainId: 8453, gasPrice: parseGwei('1') }],
    ['legacy (pre-EIP-155)', { ...base, type: 'legacy' as const, gasPrice: parseGwei('1') }],
    ['EIP-2930', { ...base, type: 'eip2930' as const, chainId: 8453, gasPrice: parseGwei('1'), accessList: [{ address: base.to, storageKeys: [] }] }],
    [
      'EIP-1559',
      { ...base, type: 'eip1559' as const, chainId: 8453, maxFeePerGas: parseGwei('3'), maxPriorityFeePerGas: parseGwei('1'), data: '0x1234' as const },
    ],
  ])('recovers the sender of a %s transaction', async (_name, transaction) => {
    const raw = await account.signTransaction(transaction as never)
    const decoded = await decodePendingTransaction(raw)
    expect(decoded.from).toBe(account.address.toLowerCase())
    expect(decoded.nonce).toBe(9)
    expect(decoded.to).toBe(base.to)
  })

  test('a contract creation has no recipient', async () => {
    const raw = await account.signTransaction({
      type: 'eip1559',
      chainId: 1,
      nonce: 0,
      gas: 100_000n,
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n,
      data: '0x6000',
    })
    expect((await decodePendingTransaction(raw)).to).toBeNull()
  })

  test('an EIP-7702 transaction writes its authorizations as nodes do: quantities, in their key order', async () => {
    // r with a leading zero byte: a quantity drops it, as geth's hexutil.U256 and alloy's U256 write it.
    const authorization = {
      chainId: 8453,
      address: `0x${'ab'.repeat(20)}` as const,
      nonce: 3,
      yParity: 1,
      r: `0x00${'11'.repeat(31)}` as const,
      s: `0x${'22'.repeat(32)}` as const,
    }
    const raw = await account.signTransaction({
      ...base,
      type: 'eip7702',
      chainId: 8453,
      maxFeePerGas: parseGwei('3'),
      maxPriorityFeePerGas: parseGwei('1'),
      authorizationList: [authorization],
    })
    const decoded = await decodePendingTransaction(raw)
    expect(decoded.from).toBe(account.address.toLowerCase())
    expect(decoded.fields.type).toBe('0x4')
    // JSON that round-trips: no bigint, no JS number left among its fields.
    expect(JSON.parse(JSON.stringify(decoded.fields)).authorizationList).toEqual([
      { chainId: '0x2105', address: authorization.address, nonce: '0x3', yParity: '0x1', r: `0x${'11'.repeat(31)}`, s: authorization.s },
    ])
    expect(Object.keys((decoded.fields.authorizationList as object[])[0]!)).toEqual(['chainId', 'address', 'nonce', 'yParity', 'r', 's'])
  })
})
