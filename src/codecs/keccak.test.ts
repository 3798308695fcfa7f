import { type Hex, keccak256 } from 'viem'
import { describe, expect, test } from 'vitest'
import { bytesToHexText, keccak256Bytes, keccak256OfHex } from './keccak.js'

const randomHex = (bytes: number): Hex => `0x${Buffer.from(Array.from({ length: bytes }, () => Math.floor(Math.random() * 256))).toString('hex')}`

describe('keccak on the hot paths gives what viem gives', () => {
  test('of hex data of every length up to 300 bytes, upper or lower case, and of bytes', () => {
    for (let length = 0; length <= 300; length++) {
      const hex = randomHex(length)
      const upper = `0x${hex.slice(2).toUpperCase()}` as Hex
      expect(bytesToHexText(keccak256OfHex(hex)), hex).toBe(keccak256(hex))
      expect(bytesToHexText(keccak256OfHex(upper)), upper).toBe(keccak256(upper))
      expect(bytesToHexText(keccak256Bytes(Buffer.from(hex.slice(2), 'hex')))).toBe(keccak256(hex))
    }
  })

  test('of hex Buffer would read otherwise (an odd length, a non-hex digit): as viem reads it', () => {
    for (const hex of ['0x1', '0xabc', '0x12zz34', '0xg0', '0x'] as Hex[]) expect(bytesToHexText(keccak256OfHex(hex)), hex).toBe(keccak256(hex))
  })

  test('bytesToHexText writes only the view it is given', () => {
    const whole = Buffer.from('00112233445566778899', 'hex')
    expect(bytesToHexText(whole.subarray(3, 6))).toBe('0x334455')
    expect(bytesToHexText(new Uint8Array(0))).toBe('0x')
  })
})
