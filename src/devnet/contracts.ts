import {
  type Account,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type Transport,
  type WalletClient,
  bytesToHex,
  concat,
  encodeAbiParameters,
  hexToBytes,
  numberToHex,
  parseAbi,
  size,
  toEventSelector,
  toFunctionSelector,
} from 'viem'

// A token-shaped log emitter, hand-assembled because no Solidity compiler is available. It keeps no
// balances: it exists to put varied, predictable logs on a devnet (Transfer events, 0..4-topic logs,
// many logs per tx, reverts). Calldata length is never checked, so ERC-8021 suffixes appended after the
// ABI arguments are ignored, as a Solidity contract would ignore them.

export const tokenAbi = parseAbi([
  'function transfer(address to, uint256 amount) returns (bool)',
  'function emitLogs(uint8 topicCount, bytes32 t1, bytes32 t2, bytes32 t3, uint256 value)',
  'function multi(address to, uint256 n)',
  'event Transfer(address indexed from, address indexed to, uint256 value)',
  'event Custom(uint256 value)',
])

export const TRANSFER_TOPIC: Hex = toEventSelector('Transfer(address,address,uint256)')
export const CUSTOM_TOPIC: Hex = toEventSelector('Custom(uint256)')
/** Revert reason of `transfer(to, 0)`, ABI-encoded as `Error(string)` like Solidity's `require`. */
export const ZERO_AMOUNT_REASON = 'zero amount'

// --- a tiny assembler --------------------------------------------------------------------------------

const OPCODES = {
  STOP: 0x00,
  ADD: 0x01,
  LT: 0x10,
  EQ: 0x14,
  ISZERO: 0x15,
  AND: 0x16,
  SHR: 0x1c,
  CALLER: 0x33,
  CALLDATALOAD: 0x35,
  CALLDATASIZE: 0x36,
  CODECOPY: 0x39,
  MSTORE: 0x52,
  JUMP: 0x56,
  JUMPI: 0x57,
  JUMPDEST: 0x5b,
  DUP1: 0x80,
  DUP2: 0x81,
  LOG0: 0xa0,
  LOG1: 0xa1,
  LOG2: 0xa2,
  LOG3: 0xa3,
  LOG4: 0xa4,
  RETURN: 0xf3,
  REVERT: 0xfd,
} as const
const PUSH1 = 0x60
/** Jump targets are pushed as PUSH2, so code stays under 64 KiB (it is a few hundred bytes). */
const LABEL_PUSH_BYTES = 2

type Opcode = keyof typeof OPCODES
type AsmItem =
  | Opcode
  /** PUSHn with the smallest n that holds the value (a Hex keeps its own width). */
  | { push: number | bigint | Hex }
  /** JUMPDEST, marking a jump target. */
  | { label: string }
  /** PUSH2 of a label's offset. */
  | { ref: string }

const push = (value: number | bigint | Hex): AsmItem => ({ push: value })
const label = (name: string): AsmItem => ({ label: name })
const ref = (name: string): AsmItem => ({ ref: name })

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

function assemble(items: AsmItem[]): Hex {
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

// --- the runtime -------------------------------------------------------------------------------------

// Calldata offsets of the ABI arguments (after the 4-byte selector).
const ARG0 = 0x04
const ARG1 = 0x24
const ARG2 = 0x44
const ARG3 = 0x64
const ARG4 = 0x84
const WORD = 0x20
const ADDRESS_MASK: Hex = `0x${'ff'.repeat(20)}`

/** MSTOREs that lay `data` out from memory offset 0, then REVERT with it. */
function revertWith(data: Hex): AsmItem[] {
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

/** Stack [..., to] → LOG3 Transfer(CALLER, to) with the word at memory 0 as data. */
const logTransfer: AsmItem[] = [push(ADDRESS_MASK), 'AND', 'CALLER', push(TRANSFER_TOPIC), push(WORD), push(0), 'LOG3']

const emptyRevert: AsmItem[] = [push(0), 'DUP1', 'REVERT']

const runtime: AsmItem[] = [
  // Fewer than 4 bytes of calldata (plain ETH transfers): accept and stop.
  push(4), 'CALLDATASIZE', 'LT', ref('stop'), 'JUMPI',
  push(0), 'CALLDATALOAD', push(0xe0), 'SHR',
  'DUP1', push(toFunctionSelector('transfer(address,uint256)')), 'EQ', ref('transfer'), 'JUMPI',
  'DUP1', push(toFunctionSelector('emitLogs(uint8,bytes32,bytes32,bytes32,uint256)')), 'EQ', ref('emitLogs'), 'JUMPI',
  'DUP1', push(toFunctionSelector('multi(address,uint256)')), 'EQ', ref('multi'), 'JUMPI',
  ...emptyRevert, // unknown selector

  // transfer(to, amount): amount == 0 reverts with Error("zero amount"); else Transfer and return true.
  label('transfer'),
  push(ARG1), 'CALLDATALOAD', 'DUP1', 'ISZERO', ref('zeroAmount'), 'JUMPI',
  push(0), 'MSTORE',
  push(ARG0), 'CALLDATALOAD', ...logTransfer,
  push(1), push(0), 'MSTORE', push(WORD), push(0), 'RETURN',
  label('zeroAmount'),
  ...revertWith(concat([toFunctionSelector('Error(string)'), encodeAbiParameters([{ type: 'string' }], [ZERO_AMOUNT_REASON])])),

  // emitLogs(topicCount, t1, t2, t3, value): LOG<topicCount> with topics Custom, t1, t2, t3 and data value.
  label('emitLogs'),
  push(ARG4), 'CALLDATALOAD', push(0), 'MSTORE',
  push(ARG0), 'CALLDATALOAD',
  'DUP1', 'ISZERO', ref('log0'), 'JUMPI',
  'DUP1', push(1), 'EQ', ref('log1'), 'JUMPI',
  'DUP1', push(2), 'EQ', ref('log2'), 'JUMPI',
  'DUP1', push(3), 'EQ', ref('log3'), 'JUMPI',
  'DUP1', push(4), 'EQ', ref('log4'), 'JUMPI',
  ...emptyRevert, // topicCount > 4
  label('log0'), push(WORD), push(0), 'LOG0', 'STOP',
  label('log1'), push(CUSTOM_TOPIC), push(WORD), push(0), 'LOG1', 'STOP',
  label('log2'),
  push(ARG1), 'CALLDATALOAD',
  push(CUSTOM_TOPIC), push(WORD), push(0), 'LOG2', 'STOP',
  label('log3'),
  push(ARG2), 'CALLDATALOAD', push(ARG1), 'CALLDATALOAD',
  push(CUSTOM_TOPIC), push(WORD), push(0), 'LOG3', 'STOP',
  label('log4'),
  push(ARG3), 'CALLDATALOAD', push(ARG2), 'CALLDATALOAD', push(ARG1), 'CALLDATALOAD',
  push(CUSTOM_TOPIC), push(WORD), push(0), 'LOG4', 'STOP',

  // multi(to, n): Transfer(CALLER, to, i) for i = 1..n.
  label('multi'),
  push(ARG1), 'CALLDATALOAD', push(0), // stack: n, i
  label('multiLoop'),
  'DUP2', 'DUP2', 'LT', 'ISZERO', ref('stop'), 'JUMPI', // i < n, else done
  push(1), 'ADD', // i += 1
  'DUP1', push(0), 'MSTORE',
  push(ARG0), 'CALLDATALOAD', ...logTransfer,
  ref('multiLoop'), 'JUMP',

  label('stop'), 'STOP',
]

export const TOKEN_RUNTIME_BYTECODE: Hex = assemble(runtime)

/** Initcode: copy the runtime that follows this 13-byte prefix into memory and return it. */
function deployCode(runtimeCode: Hex): Hex {
  const runtimeSize = size(runtimeCode)
  const prefix: AsmItem[] = [
    { push: numberToHex(runtimeSize, { size: 2 }) }, 'DUP1',
    { push: numberToHex(0, { size: 2 }) }, // patched below: offset of the runtime
    push(0), 'CODECOPY', push(0), 'RETURN',
  ]
  const prefixSize = prefix.reduce((sum, item) => sum + itemSize(item), 0)
  prefix[2] = { push: numberToHex(prefixSize, { size: 2 }) }
  return `${assemble(prefix)}${runtimeCode.slice(2)}`
}

export const TOKEN_DEPLOY_BYTECODE: Hex = deployCode(TOKEN_RUNTIME_BYTECODE)

/** Deploys the token and waits for its receipt: use with automine or interval mining. */
export async function deployToken(
  walletClient: WalletClient<Transport, Chain | undefined, Account>,
  publicClient: PublicClient,
): Promise<Address> {
  const hash = await walletClient.deployContract({
    abi: tokenAbi,
    bytecode: TOKEN_DEPLOY_BYTECODE,
    account: walletClient.account,
    chain: walletClient.chain ?? null,
  })
  const receipt = await publicClient.waitForTransactionReceipt({ hash })
  if (receipt.status !== 'success' || !receipt.contractAddress) {
    throw new Error(`token deployment ${hash} failed (status ${receipt.status})`)
  }
  return receipt.contractAddress
}
