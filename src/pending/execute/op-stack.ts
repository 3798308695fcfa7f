import { type Hex, bytesToHex, hexToBigInt } from 'viem'
import { LibZip } from 'solady'
import { toQuantity } from '../../codecs/index.js'

// What an OP-Stack chain (Base) adds to executing a transaction, as its execution layer does (base/base's
// revm handler and receipt builder; the OP specs' Fjord, Isthmus and Jovian exec-engine pages):
// - every block opens with the L1-attributes deposit, which writes the L1 fee parameters into the L1Block
//   predeploy's storage; they are read back from there for each transaction after it;
// - a non-deposit transaction pays, besides gas, an L1 data fee (from its FastLZ-compressed size) and an
//   operator fee, taken from its sender up front (the operator fee on its gas limit, the unused part given
//   back); the L1 fee, the base fee and the operator fee go to their vaults instead of being burned;
// - its receipt reports the L1 fee and the parameters it came from.

/** The L1Block predeploy, whose storage holds the L1 fee parameters the L1-attributes deposit writes. */
export const L1_BLOCK: Hex = '0x4200000000000000000000000000000000000015'
/** Where the base fee, the L1 data fee and the operator fee go (not burned, as on Ethereum). */
export const BASE_FEE_VAULT: Hex = '0x4200000000000000000000000000000000000019'
export const L1_FEE_VAULT: Hex = '0x420000000000000000000000000000000000001a'
export const OPERATOR_FEE_VAULT: Hex = '0x420000000000000000000000000000000000001b'
/** Deposit receipts since Canyon. */
export const DEPOSIT_RECEIPT_VERSION = 1n

/** L1Block storage: slot and byte offset (from the left of the 32-byte word) of each parameter. */
const L1_BASE_FEE_SLOT = 1n
const FEE_SCALARS_SLOT = 3n
const BASE_FEE_SCALAR_OFFSET = 16
const BLOB_BASE_FEE_SCALAR_OFFSET = 20
const BLOB_BASE_FEE_SLOT = 7n
const OPERATOR_FEE_SLOT = 8n
const DA_FOOTPRINT_GAS_SCALAR_OFFSET = 18
const OPERATOR_FEE_SCALAR_OFFSET = 20
const OPERATOR_FEE_CONSTANT_OFFSET = 24

/** Fjord's estimate of a transaction's compressed size, scaled by 1e6: max(100e6, intercept + coef × FastLZ size). */
const L1_COST_INTERCEPT = -42_585_600n
const L1_COST_FASTLZ_COEF = 836_500n
const MIN_TRANSACTION_SIZE_SCALED = 100_000_000n
const NON_ZERO_BYTE_GAS = 16n
const OPERATOR_FEE_SCALAR_DECIMAL = 1_000_000n
const OPERATOR_FEE_JOVIAN_MULTIPLIER = 100n

/** Selector of the L1-attributes deposit's call since Jovian (`setL1BlockValuesJovian()`). */
const JOVIAN_L1_INFO_SELECTOR = '0x3db6be2b'

export type L1FeeParameters = {
  l1BaseFee: bigint
  l1BlobBaseFee: bigint
  baseFeeScalar: bigint
  blobBaseFeeScalar: bigint
  operatorFeeScalar: bigint
  operatorFeeConstant: bigint
  daFootprintGasScalar: bigint
  /** Jovian's rules (operator fee ×100, DA footprint in receipts), known by the block's L1-attributes call. */
  jovian: boolean
}

/** Whether a block whose L1-attributes deposit carries this calldata follows Jovian's rules. */
export function isJovianL1Info(data: Hex): boolean {
  return data.slice(0, 10).toLowerCase() === JOVIAN_L1_INFO_SELECTOR
}

const field = (word: Uint8Array, offset: number, bytes: number) => hexToBigInt(bytesToHex(word.subarray(offset, offset + bytes)))

/** The L1 fee parameters, read from the L1Block predeploy's storage through `slot` (32-byte words). */
export async function readL1FeeParameters(slot: (index: bigint) => Promise<Uint8Array>, jovian: boolean): Promise<L1FeeParameters> {
  const [baseFee, scalars, blobBaseFee, operator] = await Promise.all([
    slot(L1_BASE_FEE_SLOT),
    slot(FEE_SCALARS_SLOT),
    slot(BLOB_BASE_FEE_SLOT),
    slot(OPERATOR_FEE_SLOT),
  ])
  return {
    l1BaseFee: field(baseFee, 0, 32),
    l1BlobBaseFee: field(blobBaseFee, 0, 32),
    baseFeeScalar: field(scalars, BASE_FEE_SCALAR_OFFSET, 4),
    blobBaseFeeScalar: field(scalars, BLOB_BASE_FEE_SCALAR_OFFSET, 4),
    operatorFeeScalar: field(operator, OPERATOR_FEE_SCALAR_OFFSET, 4),
    operatorFeeConstant: field(operator, OPERATOR_FEE_CONSTANT_OFFSET, 8),
    daFootprintGasScalar: jovian ? field(operator, DA_FOOTPRINT_GAS_SCALAR_OFFSET, 2) : 0n,
    jovian,
  }
}

/** Fjord's estimated compressed size of a signed transaction (its EIP-2718 bytes), scaled by 1e6. */
export function estimatedSizeScaled(raw: Hex): bigint {
  const compressed = BigInt((LibZip.flzCompress(raw).length - 2) / 2)
  const estimate = L1_COST_INTERCEPT + L1_COST_FASTLZ_COEF * compressed
  return estimate < MIN_TRANSACTION_SIZE_SCALED ? MIN_TRANSACTION_SIZE_SCALED : estimate
}

/** The L1 data fee of a non-deposit transaction (Fjord): estimated size × (16 × scalar × L1 base fee + blob scalar × blob base fee) / 1e12. */
export function l1DataFee(sizeScaled: bigint, parameters: L1FeeParameters): bigint {
  const perByte = parameters.l1BaseFee * NON_ZERO_BYTE_GAS * parameters.baseFeeScalar + parameters.l1BlobBaseFee * parameters.blobBaseFeeScalar
  return (sizeScaled * perByte) / 1_000_000_000_000n
}

/** The operator fee for `gas` (Isthmus: gas × scalar / 1e6 + constant; Jovian: gas × scalar × 100 + constant). */
export function operatorFee(gas: bigint, parameters: L1FeeParameters): bigint {
  const product = parameters.jovian
    ? gas * parameters.operatorFeeScalar * OPERATOR_FEE_JOVIAN_MULTIPLIER
    : (gas * parameters.operatorFeeScalar) / OPERATOR_FEE_SCALAR_DECIMAL
  return product + parameters.operatorFeeConstant
}

/**
 * The OP-Stack fields of a transaction's receipt, as Base's node reports them (for deposits too, with no
 * L1 fee): the L1 fee and gas and the parameters behind them; the operator fee's only when either is not
 * zero; since Jovian the DA footprint scalar, and the transaction's DA footprint as `blobGasUsed`.
 */
export function opReceiptFields(sizeScaled: bigint, fee: bigint, parameters: L1FeeParameters): Record<string, Hex> {
  const fields: Record<string, Hex> = {
    l1GasPrice: toQuantity(parameters.l1BaseFee),
    l1GasUsed: toQuantity((sizeScaled * NON_ZERO_BYTE_GAS) / 1_000_000n),
    l1Fee: toQuantity(fee),
    l1BaseFeeScalar: toQuantity(parameters.baseFeeScalar),
    l1BlobBaseFee: toQuantity(parameters.l1BlobBaseFee),
    l1BlobBaseFeeScalar: toQuantity(parameters.blobBaseFeeScalar),
  }
  if (parameters.operatorFeeScalar !== 0n || parameters.operatorFeeConstant !== 0n) {
    fields.operatorFeeScalar = toQuantity(parameters.operatorFeeScalar)
    fields.operatorFeeConstant = toQuantity(parameters.operatorFeeConstant)
  }
  if (parameters.jovian) {
    fields.daFootprintGasScalar = toQuantity(parameters.daFootprintGasScalar)
    fields.blobGasUsed = toQuantity((sizeScaled / 1_000_000n) * parameters.daFootprintGasScalar)
  }
  return fields
}
