import type { Hex } from 'viem'

/** Hex at the edges, bytes in the database. Buffer is the fastest codec Node has for both directions. */
export function hexToBytea(value: Hex): Uint8Array {
  return Buffer.from(value.slice(2), 'hex')
}

export function byteaToHex(value: Uint8Array): Hex {
  const buffer = Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength)
  return `0x${buffer.toString('hex')}`
}
