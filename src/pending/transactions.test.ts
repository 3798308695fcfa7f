import { type Address, parseGwei, parseTransaction, size } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { describe, expect, test } from 'vitest'
import { effectiveGasPrice } from '../objects/receipt.js'
import { decodePendingTransaction, nonceAfter } from './transactions.js'

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

  test.each([
    ['legacy', { type: 'legacy' as const, chainId: 8453, gasPrice: 0n }, { gasPrice: '0x0' }],
    ['EIP-2930', { type: 'eip2930' as const, chainId: 8453, gasPrice: 0n }, { gasPrice: '0x0' }],
    [
      'EIP-1559, no tip',
      { type: 'eip1559' as const, chainId: 8453, maxFeePerGas: parseGwei('3'), maxPriorityFeePerGas: 0n },
      { maxFeePerGas: '0xb2d05e00', maxPriorityFeePerGas: '0x0' },
    ],
    [
      'EIP-1559, no fees',
      { type: 'eip1559' as const, chainId: 8453, maxFeePerGas: 0n, maxPriorityFeePerGas: 0n },
      { maxFeePerGas: '0x0', maxPriorityFeePerGas: '0x0' },
    ],
    [
      'EIP-7702, no tip',
      {
        type: 'eip7702' as const,
        chainId: 8453,
        maxFeePerGas: 7n,
        maxPriorityFeePerGas: 0n,
        authorizationList: [{ chainId: 8453, address: base.to, nonce: 1, yParity: 0, r: `0x${'11'.repeat(32)}`, s: `0x${'22'.repeat(32)}` }],
      },
      { maxFeePerGas: '0x7', maxPriorityFeePerGas: '0x0' },
    ],
  ])('a %s transaction writes a fee of zero as "0x0", and its price is worked out from it', async (_name, transaction, fees) => {
    const raw = await account.signTransaction({ ...base, ...transaction } as never)
    const decoded = await decodePendingTransaction(raw)
    expect(decoded.fields).toMatchObject(fees)
    const cap = BigInt((fees as { maxFeePerGas?: string }).maxFeePerGas ?? (fees as { gasPrice: string }).gasPrice)
    // Paid: the base fee plus no tip, within the cap.
    expect(effectiveGasPrice(decoded.fields, 2n)).toBe('maxFeePerGas' in fees && cap > 2n ? 2n : cap)
  })

  test('a legacy transaction whose r or s starts with a zero byte is its signer\u2019s (the parse cuts those bytes)', async () => {
    const found = { r: 0, s: 0 }
    // About one signature in 128 has an r or s below 2^248; the nonce walks until both kinds were seen.
    for (let nonce = 0; found.r === 0 || found.s === 0; nonce++) {
      const raw = await account.signTransaction({
        type: 'legacy',
        chainId: 8453,
        nonce,
        to: account.address,
        value: 1n,
        gas: 21_000n,
        gasPrice: parseGwei('1'),
      })
      const { r, s } = parseTransaction(raw)
      const short = { r: size(r!) < 32, s: size(s!) < 32 }
      if (!short.r && !short.s) continue
      if (short.r) found.r++
      if (short.s) found.s++
      expect((await decodePendingTransaction(raw)).from, `nonce ${nonce}`).toBe(account.address.toLowerCase())
    }
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

  test('an account\u2019s nonce after a transaction: its own send, then each authorization it signed for this chain that names its nonce then', async () => {
    const other = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: 7 })
    const sign = (signer: typeof account, nonce: number, chainId = 8453) => signer.signAuthorization!({ contractAddress: base.to, chainId, nonce })
    const fees = { type: 'eip7702' as const, chainId: 8453, maxFeePerGas: parseGwei('3'), maxPriorityFeePerGas: parseGwei('1') }
    const raw = await account.signTransaction({
      ...base,
      ...fees,
      // The sender's own for nonce 10 (after the send's 9), one for another chain, one for any chain (0) at 11,
      // one whose nonce is already past, and another account's.
      authorizationList: [await sign(account, 10), await sign(account, 11, 1), await sign(account, 11, 0), await sign(account, 5), await sign(other, 0)],
    })
    const decoded = await decodePendingTransaction(raw)
    const me = account.address.toLowerCase() as Address
    expect(decoded.authorities).toEqual([
      { address: me, chainId: 8453, nonce: 10 },
      { address: me, chainId: 1, nonce: 11 },
      { address: me, chainId: 0, nonce: 11 },
      { address: me, chainId: 8453, nonce: 5 },
      { address: other.address.toLowerCase(), chainId: 8453, nonce: 0 },
    ])
    expect(nonceAfter(me, 9n, decoded)).toBe(12n)
    expect(nonceAfter(other.address.toLowerCase() as Address, 0n, decoded)).toBe(1n)
    expect(nonceAfter(other.address.toLowerCase() as Address, 1n, decoded)).toBe(1n)
    // Without authorizations, a send moves its sender's nonce alone.
    const plain = await decodePendingTransaction(await account.signTransaction({ ...base, ...fees, type: 'eip1559' }))
    expect(plain.authorities).toBeUndefined()
    expect(nonceAfter(me, 9n, plain)).toBe(10n)
    expect(nonceAfter(other.address.toLowerCase() as Address, 0n, plain)).toBe(0n)
  })
})
