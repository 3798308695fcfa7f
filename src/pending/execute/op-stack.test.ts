import { readFileSync } from 'node:fs'
import { concat, type Hex, hexToBytes, keccak256, numberToHex, pad } from 'viem'
import { describe, expect, test } from 'vitest'
import { estimatedSizeScaled, isJovianL1Info, type L1FeeParameters, l1DataFee, opReceiptFields, operatorFee, readL1FeeParameters } from './op-stack.js'

// The OP-Stack fee rules on figures a chain published (test/pending-execute-op-stack.test.ts checks them
// against a real OP-Stack EVM, op-revm in anvil, under Isthmus rules).

const mainnet = JSON.parse(readFileSync(new URL('../../../test/fixtures/op-stack/op-mainnet-fjord-transaction.json', import.meta.url), 'utf8')) as Record<
  string,
  string
>

const parameters = (overrides: Partial<L1FeeParameters> = {}): L1FeeParameters => ({
  l1BaseFee: 0n,
  l1BlobBaseFee: 0n,
  baseFeeScalar: 0n,
  blobBaseFeeScalar: 0n,
  operatorFeeScalar: 0n,
  operatorFeeConstant: 0n,
  daFootprintGasScalar: 0n,
  jovian: false,
  ...overrides,
})

describe('OP-Stack fees', () => {
  test("an OP Mainnet transaction's L1 gas and L1 fee are what its receipt reports (Fjord, FastLZ size)", () => {
    const raw = mainnet.raw as Hex
    expect(keccak256(raw)).toBe('0x1059e8004daff32caa1f1b1ef97fe3a07a8cf40508f5b835b66d9420d87c4a4a')
    const fee = parameters({
      l1BaseFee: BigInt(mainnet.l1BaseFee!),
      baseFeeScalar: BigInt(mainnet.baseFeeScalar!),
      l1BlobBaseFee: BigInt(mainnet.l1BlobBaseFee!),
      blobBaseFeeScalar: BigInt(mainnet.blobBaseFeeScalar!),
    })
    const size = estimatedSizeScaled(raw)
    expect(opReceiptFields(size, l1DataFee(size, fee), fee)).toMatchObject({ l1GasUsed: numberToHex(BigInt(mainnet.l1GasUsed!)), l1Fee: mainnet.l1Fee })
  })

  test('a small transaction is charged for the minimum size (100 bytes)', () => {
    expect(estimatedSizeScaled('0xfacade')).toBe(100_000_000n)
    const fee = parameters({ l1BaseFee: 1_000n, baseFeeScalar: 1_000n, l1BlobBaseFee: 1_000n, blobBaseFeeScalar: 1_000n })
    expect(l1DataFee(estimatedSizeScaled('0xfacade'), fee)).toBe(1_700n)
  })

  test('operator fee: Isthmus divides the scalar by 1e6, Jovian multiplies it by 100', () => {
    const fee = { operatorFeeScalar: 1_000n, operatorFeeConstant: 10n }
    expect(operatorFee(1_000n, parameters(fee))).toBe(11n)
    expect(operatorFee(1_000n, parameters({ ...fee, jovian: true }))).toBe(100_000_010n)
  })

  test('receipt fields: operator fee fields only when set; Jovian adds the DA footprint scalar and blobGasUsed', () => {
    const size = 126_387_400n
    expect(Object.keys(opReceiptFields(size, 5n, parameters()))).toEqual([
      'l1GasPrice',
      'l1GasUsed',
      'l1Fee',
      'l1BaseFeeScalar',
      'l1BlobBaseFee',
      'l1BlobBaseFeeScalar',
    ])
    expect(opReceiptFields(size, 5n, parameters({ operatorFeeConstant: 1n }))).toMatchObject({ operatorFeeScalar: '0x0', operatorFeeConstant: '0x1' })
    expect(opReceiptFields(size, 5n, parameters({ jovian: true, daFootprintGasScalar: 400n }))).toMatchObject({
      daFootprintGasScalar: numberToHex(400),
      blobGasUsed: numberToHex(126n * 400n),
    })
  })

  test("parameters are read from the L1Block predeploy's slots at their offsets", async () => {
    const words: Record<string, Hex> = {
      '1': numberToHex(7_000_000_000n, { size: 32 }),
      '3': concat([pad('0x', { size: 16 }), numberToHex(2_269, { size: 4 }), numberToHex(1_055_762, { size: 4 }), numberToHex(9, { size: 8 })]),
      '7': numberToHex(3n, { size: 32 }),
      '8': concat([pad('0x', { size: 18 }), numberToHex(400, { size: 2 }), numberToHex(1_500, { size: 4 }), numberToHex(7_000, { size: 8 })]),
    }
    const read = async (slot: bigint) => hexToBytes(words[slot.toString()] ?? pad('0x', { size: 32 }))
    expect(await readL1FeeParameters(read, true)).toEqual({
      l1BaseFee: 7_000_000_000n,
      l1BlobBaseFee: 3n,
      baseFeeScalar: 2_269n,
      blobBaseFeeScalar: 1_055_762n,
      operatorFeeScalar: 1_500n,
      operatorFeeConstant: 7_000n,
      daFootprintGasScalar: 400n,
      jovian: true,
    })
    expect((await readL1FeeParameters(read, false)).daFootprintGasScalar).toBe(0n)
  })

  test("Jovian is known by the L1-attributes deposit's call", () => {
    expect(isJovianL1Info('0x3db6be2b00000000')).toBe(true)
    expect(isJovianL1Info('0x098999be00000000')).toBe(false)
    expect(isJovianL1Info('0x440a5e2000000000')).toBe(false)
  })
})
