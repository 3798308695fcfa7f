import { randomBytes } from 'node:crypto'
import type { Hex } from 'viem'

/**
 * A new filter or subscription id, as geth's `rpc.NewID` and reth's id provider make them: 16 random bytes as a
 * quantity, without leading zeros. web3.js 4 keeps a filter id as a number and sends it back with `numberToHex`,
 * so an id with a leading zero digit (one in sixteen) would come back without it and not be found.
 */
export function newQuantityId(): Hex {
  return asQuantityId(randomBytes(16).toString('hex'))
}

/** Hex digits as the id quantity they are: lower case, without leading zeros (`0x0` for none but zeros). */
export function asQuantityId(digits: string): Hex {
  return `0x${digits.toLowerCase().replace(/^0+(?=.)/, '')}`
}
