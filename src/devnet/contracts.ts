import {
  type Account,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type Transport,
  type WalletClient,
  concat,
  encodeAbiParameters,
  parseAbi,
  toEventSelector,
  toFunctionSelector,
} from 'viem'
import { type AsmItem, WORD, assemble, deployCode, emptyRevert, label, push, ref, revertWith } from './assembler.js'

// A token-shaped log emitter, hand-assembled because no Solidity compiler is available. It exists to put
// varied, predictable logs on a devnet (Transfer events, 0..4-topic logs, many logs per tx, reverts);
// `transfer`, `transferFrom` (which checks no allowance: pools call it to take the swapper's tokens) and
// `multi` touch no storage. Only `mint` keeps balances, so that `balanceOf` is state a
// pending read can see. Calldata length is never checked, so ERC-8021 suffixes appended after the ABI
// arguments are ignored, as a Solidity contract would ignore them.

export const tokenAbi = parseAbi([
  'function transfer(address to, uint256 amount) returns (bool)',
  'function transferFrom(address from, address to, uint256 amount) returns (bool)',
  'function emitLogs(uint8 topicCount, bytes32 t1, bytes32 t2, bytes32 t3, uint256 value)',
  'function multi(address to, uint256 n)',
  'function mint(address to, uint256 amount)',
  'function balanceOf(address owner) view returns (uint256)',
  'event Transfer(address indexed from, address indexed to, uint256 value)',
  'event Custom(uint256 value)',
])

export const TRANSFER_TOPIC: Hex = toEventSelector('Transfer(address,address,uint256)')
export const CUSTOM_TOPIC: Hex = toEventSelector('Custom(uint256)')
/** Revert reason of `transfer(to, 0)`, ABI-encoded as `Error(string)` like Solidity's `require`. */
export const ZERO_AMOUNT_REASON = 'zero amount'

// --- the runtime -------------------------------------------------------------------------------------

// Calldata offsets of the ABI arguments (after the 4-byte selector).
const ARG0 = 0x04
const ARG1 = 0x24
const ARG2 = 0x44
const ARG3 = 0x64
const ARG4 = 0x84
const ADDRESS_MASK: Hex = `0x${'ff'.repeat(20)}`

/** Stack [..., to] → LOG3 Transfer(CALLER, to) with the word at memory 0 as data. */
const logTransfer: AsmItem[] = [push(ADDRESS_MASK), 'AND', 'CALLER', push(TRANSFER_TOPIC), push(WORD), push(0), 'LOG3']

const runtime: AsmItem[] = [
  // Fewer than 4 bytes of calldata (plain ETH transfers): accept and stop.
  push(4),
  'CALLDATASIZE',
  'LT',
  ref('stop'),
  'JUMPI',
  push(0),
  'CALLDATALOAD',
  push(0xe0),
  'SHR',
  'DUP1',
  push(toFunctionSelector('transfer(address,uint256)')),
  'EQ',
  ref('transfer'),
  'JUMPI',
  'DUP1',
  push(toFunctionSelector('transferFrom(address,address,uint256)')),
  'EQ',
  ref('transferFrom'),
  'JUMPI',
  'DUP1',
  push(toFunctionSelector('emitLogs(uint8,bytes32,bytes32,bytes32,uint256)')),
  'EQ',
  ref('emitLogs'),
  'JUMPI',
  'DUP1',
  push(toFunctionSelector('multi(address,uint256)')),
  'EQ',
  ref('multi'),
  'JUMPI',
  'DUP1',
  push(toFunctionSelector('mint(address,uint256)')),
  'EQ',
  ref('mint'),
  'JUMPI',
  'DUP1',
  push(toFunctionSelector('balanceOf(address)')),
  'EQ',
  ref('balanceOf'),
  'JUMPI',
  ...emptyRevert, // unknown selector

  // transfer(to, amount): amount == 0 reverts with Error("zero amount"); else Transfer and return true.
  label('transfer'),
  push(ARG1),
  'CALLDATALOAD',
  'DUP1',
  'ISZERO',
  ref('zeroAmount'),
  'JUMPI',
  push(0),
  'MSTORE',
  push(ARG0),
  'CALLDATALOAD',
  ...logTransfer,
  push(1),
  push(0),
  'MSTORE',
  push(WORD),
  push(0),
  'RETURN',
  label('zeroAmount'),
  ...revertWith(concat([toFunctionSelector('Error(string)'), encodeAbiParameters([{ type: 'string' }], [ZERO_AMOUNT_REASON])])),

  // transferFrom(from, to, amount): Transfer(from, to, amount) and return true.
  label('transferFrom'),
  push(ARG2),
  'CALLDATALOAD',
  push(0),
  'MSTORE',
  push(ARG1),
  'CALLDATALOAD',
  push(ADDRESS_MASK),
  'AND',
  push(ARG0),
  'CALLDATALOAD',
  push(ADDRESS_MASK),
  'AND',
  push(TRANSFER_TOPIC),
  push(WORD),
  push(0),
  'LOG3',
  push(1),
  push(0),
  'MSTORE',
  push(WORD),
  push(0),
  'RETURN',

  // emitLogs(topicCount, t1, t2, t3, value): LOG<topicCount> with topics Custom, t1, t2, t3 and data value.
  label('emitLogs'),
  push(ARG4),
  'CALLDATALOAD',
  push(0),
  'MSTORE',
  push(ARG0),
  'CALLDATALOAD',
  'DUP1',
  'ISZERO',
  ref('log0'),
  'JUMPI',
  'DUP1',
  push(1),
  'EQ',
  ref('log1'),
  'JUMPI',
  'DUP1',
  push(2),
  'EQ',
  ref('log2'),
  'JUMPI',
  'DUP1',
  push(3),
  'EQ',
  ref('log3'),
  'JUMPI',
  'DUP1',
  push(4),
  'EQ',
  ref('log4'),
  'JUMPI',
  ...emptyRevert, // topicCount > 4
  label('log0'),
  push(WORD),
  push(0),
  'LOG0',
  'STOP',
  label('log1'),
  push(CUSTOM_TOPIC),
  push(WORD),
  push(0),
  'LOG1',
  'STOP',
  label('log2'),
  push(ARG1),
  'CALLDATALOAD',
  push(CUSTOM_TOPIC),
  push(WORD),
  push(0),
  'LOG2',
  'STOP',
  label('log3'),
  push(ARG2),
  'CALLDATALOAD',
  push(ARG1),
  'CALLDATALOAD',
  push(CUSTOM_TOPIC),
  push(WORD),
  push(0),
  'LOG3',
  'STOP',
  label('log4'),
  push(ARG3),
  'CALLDATALOAD',
  push(ARG2),
  'CALLDATALOAD',
  push(ARG1),
  'CALLDATALOAD',
  push(CUSTOM_TOPIC),
  push(WORD),
  push(0),
  'LOG4',
  'STOP',

  // multi(to, n): Transfer(CALLER, to, i) for i = 1..n.
  label('multi'),
  push(ARG1),
  'CALLDATALOAD',
  push(0), // stack: n, i
  label('multiLoop'),
  'DUP2',
  'DUP2',
  'LT',
  'ISZERO',
  ref('stop'),
  'JUMPI', // i < n, else done
  push(1),
  'ADD', // i += 1
  'DUP1',
  push(0),
  'MSTORE',
  push(ARG0),
  'CALLDATALOAD',
  ...logTransfer,
  ref('multiLoop'),
  'JUMP',

  // mint(to, amount): balance[to] += amount (storage slot = the address), then Transfer(0, to, amount).
  label('mint'),
  push(ARG1),
  'CALLDATALOAD',
  'DUP1',
  push(0),
  'MSTORE', // stack: amount
  push(ARG0),
  'CALLDATALOAD',
  push(ADDRESS_MASK),
  'AND', // amount, to
  'DUP1',
  'SLOAD',
  'DUP3',
  'ADD',
  'DUP2',
  'SSTORE', // amount, to
  push(0),
  push(TRANSFER_TOPIC),
  push(WORD),
  push(0),
  'LOG3',
  'STOP',

  // balanceOf(owner): what mint credited to owner.
  label('balanceOf'),
  push(ARG0),
  'CALLDATALOAD',
  push(ADDRESS_MASK),
  'AND',
  'SLOAD',
  push(0),
  'MSTORE',
  push(WORD),
  push(0),
  'RETURN',

  label('stop'),
  'STOP',
]

export const TOKEN_RUNTIME_BYTECODE: Hex = assemble(runtime)

export const TOKEN_DEPLOY_BYTECODE: Hex = deployCode(TOKEN_RUNTIME_BYTECODE)

/** Deploys the token and waits for its receipt: use with automine or interval mining. */
export async function deployToken(walletClient: WalletClient<Transport, Chain | undefined, Account>, publicClient: PublicClient): Promise<Address> {
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
