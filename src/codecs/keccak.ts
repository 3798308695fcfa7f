import { keccak_256 } from '@noble/hashes/sha3.js'
import { type Hex, keccak256 } from 'viem'

// Keccak-256 on the paths that hash per transaction or per log (pre-confirmed transactions, log blooms): the
// same hash viem uses (noble's), without viem's hex conversions in JS, which cost about three times the hash
// itself on a transaction. Hex is converted by Buffer (native); what Buffer would read differently from viem
// (an odd length, a non-hex digit) is hashed by viem.

/** The digest of `bytes`, as bytes. */
export const keccak256Bytes = (bytes: Uint8Array): Uint8Array => keccak_256(bytes)

/** `0x`-prefixed hex data as bytes, converted by Buffer; `null` where Buffer would read it otherwise than viem (an odd length, a non-hex digit). */
export function hexBytes(hex: Hex): Buffer | null {
  const bytes = Buffer.from(hex.slice(2), 'hex')
  return bytes.length * 2 === hex.length - 2 ? bytes : null
}

/** The digest of `0x`-prefixed hex data, as bytes. */
export function keccak256OfHex(hex: Hex): Uint8Array {
  const bytes = hexBytes(hex)
  if (bytes !== null) return keccak_256(bytes)
  return Buffer.from(keccak256(hex).slice(2), 'hex')
}

/** Bytes as `0x`-prefixed lower-case hex. */
export const bytesToHexText = (bytes: Uint8Array): Hex => `0x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex')}`
