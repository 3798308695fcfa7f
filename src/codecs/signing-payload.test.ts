import { hexToBytes, parseTransaction, serializeTransaction, type TransactionSerializable } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { describe, expect, test } from 'vitest'
import { createRandom } from '../devnet/base-mix.js'
import { signingPayload } from './signing-payload.js'

const account = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: 3 })
const random = createRandom(2718)
/** Uniform in [0, n). */
const below = (n: number) => random.int(0, n - 1)
/** Random bytes as hex; past 1 KB, one random byte repeated (the length is what matters there). */
const hex = (bytes: number) =>
  bytes > 1024
    ? (`0x${below(256).toString(16).padStart(2, '0').repeat(bytes)}` as const)
    : (`0x${Array.from({ length: bytes }, () => below(256).toString(16).padStart(2, '0')).join('')}` as const)
/** Integers across the RLP encodings: zero (0x80), a single byte below 0x80, and multi-byte values. */
const integer = () => [0n, 1n, 0x7fn, 0x80n, 0xffn, 0x100n, 10n ** 18n, 2n ** 255n][below(8)]!
/** Calldata from empty to past 55 bytes (a long string header) and past 64 KB (a three-byte length). */
const data = () => hex([0, 1, 4, 55, 56, 300, 70_000][below(7)]!)
const recipient = () => (below(5) === 0 ? undefined : hex(20))

/** Every kind of signed transaction a Base block holds, with field values that change the RLP headers. */
function generated(): TransactionSerializable[] {
  const list: TransactionSerializable[] = []
  for (let index = 0; index < 25; index++) {
    const common = { nonce: Number(integer() % 2n ** 52n), gas: integer(), value: integer(), data: data(), to: recipient() }
    const accessList = Array.from({ length: below(3) }, () => ({ address: hex(20), storageKeys: Array.from({ length: below(3) }, () => hex(32)) }))
    const chainId = [1, 8453, 84532, 2 ** 31][below(4)]!
    list.push({ ...common, type: 'legacy', gasPrice: integer() })
    list.push({ ...common, type: 'legacy', chainId, gasPrice: integer() })
    list.push({ ...common, type: 'eip2930', chainId, gasPrice: integer(), accessList })
    // viem refuses a tip above the fee cap.
    const [tip, cap] = [integer(), integer()].sort((left, right) => (left < right ? -1 : left > right ? 1 : 0)) as [bigint, bigint]
    list.push({ ...common, type: 'eip1559', chainId, maxFeePerGas: cap, maxPriorityFeePerGas: tip, accessList })
    list.push({
      ...common,
      to: hex(20),
      type: 'eip7702',
      chainId,
      maxFeePerGas: cap,
      maxPriorityFeePerGas: tip,
      authorizationList: [{ address: hex(20), chainId, nonce: below(1000), r: hex(32), s: hex(32), yParity: below(2) }],
    })
  }
  return list
}

describe('signingPayload', () => {
  test('cuts from each signed transaction the payload its sender signed, byte for byte as re-encoding gives it', async () => {
    const transactions = generated()
    for (const transaction of transactions) {
      const signed = await account.signTransaction(transaction)
      const { v } = parseTransaction(signed)
      const expected = hexToBytes(serializeTransaction(transaction))
      expect(signingPayload(hexToBytes(signed), v), `${transaction.type}: ${signed.slice(0, 80)}…`).toEqual(expected)
    }
  })

  test('declines what is not a signed transaction list, so that the caller re-encodes', async () => {
    const signed = hexToBytes(await account.signTransaction({ type: 'eip1559', chainId: 1, nonce: 1, gas: 21_000n, maxFeePerGas: 1n, to: hex(20) }))
    expect(signingPayload(signed.subarray(0, signed.length - 1))).toBeNull()
    expect(signingPayload(Uint8Array.from([...signed, 0]))).toBeNull()
    expect(signingPayload(new Uint8Array(0))).toBeNull()
    // A list of three items has no fields before its signature.
    expect(signingPayload(Uint8Array.of(0x02, 0xc3, 0x01, 0x02, 0x03))).toBeNull()
    // A string, not a list.
    expect(signingPayload(Uint8Array.of(0x02, 0x83, 0x01, 0x02, 0x03))).toBeNull()
    // A length that claims more than there is.
    expect(signingPayload(Uint8Array.of(0x02, 0xf9, 0xff, 0xff, 0x01))).toBeNull()
    // Legacy: without v, or with a v that is neither 27/28 nor EIP-155's.
    const legacy = hexToBytes(await account.signTransaction({ type: 'legacy', nonce: 1, gas: 21_000n, gasPrice: 1n, to: hex(20) }))
    expect(signingPayload(legacy)).toBeNull()
    expect(signingPayload(legacy, 30n)).toBeNull()
  })
})
