import { type Hex, bytesToHex, hexToBytes, numberToHex, size } from 'viem'

// A tiny EVM assembler for the devnet's hand-written contracts (no Solidity compiler is available):
// opcodes by name, pushes of the smallest width, and labels for jump targets.

const OPCODES = {
  STOP: 0x00,
  ADD: 0x01,
  MUL: 0x02,
  SUB: 0x03,
  LT: 0x10,
  GT: 0x11,
  EQ: 0x14,
  ISZERO: 0x15,
  AND: 0x16,
  BYTE: 0x1a,
  SHL: 0x1b,
  SHR: 0x1c,
  SHA3: 0x20,
  ADDRESS: 0x30,
  CALLER: 0x33,
  CALLDATALOAD: 0x35,
  CALLDATASIZE: 0x36,
  CODECOPY: 0x39,
  POP: 0x50,
  MLOAD: 0x51,
  MSTORE: 0x52,
  SLOAD: 0x54,
  SSTORE: 0x55,
  JUMP: 0x56,
  JUMPI: 0x57,
  GAS: 0x5a,
  JUMPDEST: 0x5b,
  DUP1: 0x80,
  DUP2: 0x81,
  DUP3: 0x82,
  DUP4: 0x83,
  DUP5: 0x84,
  SWAP1: 0x90,
  SWAP2: 0x91,
  LOG0: 0xa0,
  LOG1: 0xa1,
  LOG2: 0xa2,
  LOG3: 0xa3,
  LOG4: 0xa4,
  CALL: 0xf1,
  RETURN: 0xf3,
  REVERT: 0xfd,
} as const
const PUSH1 = 0x60
/** Jump targets are pushed as PUSH2, so code stays under 64 KiB (it is a few hundred bytes). */
const LABEL_PUSH_BYTES = 2
export const WORD = 0x20

type Opcode = keyof typeof OPCODES
export type AsmItem =
  | Opcode
  /** PUSHn with the smallest n that holds the value (a Hex keeps its own width). */
  | { push: number | bigint | Hex }
  /** JUMPDEST, marking a jump target. */
  | { label: string }
  /** PUSH2 of a label's offset. */
  | { ref: string }

export const push = (value: number | bigint | Hex): AsmItem => ({ push: value })
export const label = (name: string): AsmItem => ({ label: name })
export const ref = (name: string): AsmItem => ({ ref: name })

function pushBytes(value: number | bigint | Hex): Uint8Array {
  const bytes = typeof value === 'string' ? hexToBytes(value) : hexToBytes(numberToHex(value))
  if (bytes.length === 0 || bytes.length > 32) throw new Error(`cannot PUSH ${bytes.length} bytes`)
  return bytes
}

function itemSize(item: AsmItem): number {
  if (typeof item === 'string' || 'label' in item) return 1
  if ('ref' in item) return 1 + LABEL_PUSH_BYTES
  return 1 + pushBytes(item.push).length
}

export function assemble(items: AsmItem[]): Hex {
  const labels = new Map<string, number>()
  let offset = 0
  for (const item of items) {
    if (typeof item === 'object' && 'label' in item) {
      if (labels.has(item.label)) throw new Error(`duplicate label ${item.label}`)
      labels.set(item.label, offset)
    }
    offset += itemSize(item)
  }
  const code: number[] = []
  for (const item of items) {
    if (typeof item === 'string') code.push(OPCODES[item])
    else if ('label' in item) code.push(OPCODES.JUMPDEST)
    else if ('ref' in item) {
      const target = labels.get(item.ref)
      if (target === undefined) throw new Error(`unknown label ${item.ref}`)
      code.push(PUSH1 + LABEL_PUSH_BYTES - 1, target >> 8, target & 0xff)
    } else {
      const bytes = pushBytes(item.push)
      code.push(PUSH1 + bytes.length - 1, ...bytes)
    }
  }
  return bytesToHex(Uint8Array.from(code))
}

/** MSTOREs that lay `data` out from memory offset 0, then REVERT with it. */
export function revertWith(data: Hex): AsmItem[] {
  const bytes = hexToBytes(data)
  const items: AsmItem[] = []
  for (let at = 0; at < bytes.length; at += WORD) {
    const word = new Uint8Array(WORD)
    word.set(bytes.subarray(at, at + WORD))
    items.push(push(bytesToHex(word)), push(at), 'MSTORE')
  }
  items.push(push(bytes.length), push(0), 'REVERT')
  return items
}

export const emptyRevert: AsmItem[] = [push(0), 'DUP1', 'REVERT']

/** Initcode: copy the runtime that follows this 13-byte prefix into memory and return it. */
export function deployCode(runtimeCode: Hex): Hex {
  const runtimeSize = size(runtimeCode)
  const prefix: AsmItem[] = [
    { push: numberToHex(runtimeSize, { size: 2 }) },
    'DUP1',
    { push: numberToHex(0, { size: 2 }) }, // patched below: offset of the runtime
    push(0),
    'CODECOPY',
    push(0),
    'RETURN',
  ]
  const prefixSize = prefix.reduce((sum, item) => sum + itemSize(item), 0)
  prefix[2] = { push: numberToHex(prefixSize, { size: 2 }) }
  return `${assemble(prefix)}${runtimeCode.slice(2)}`
}
