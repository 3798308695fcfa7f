import { type Hex, pad, parseAbi, toEventSelector, toFunctionSelector } from 'viem'
import { type AsmItem, WORD, assemble, deployCode, emptyRevert, label, push, ref } from './assembler.js'

// A Uniswap-V2-pair-shaped log emitter for the devnet's load profiles, hand-assembled like the token
// (contracts.ts). Each hop of `swap` does what a pair's swap leaves in a receipt: the tokens' own Transfer
// logs (tokenIn from the caller to the pool through `transferFrom`, which the devnet token does not
// check, and tokenOut from the pool to `to`), then Sync with reserves kept in storage, then Swap. Four
// logs from three contracts per hop; a multi-hop route repeats them. Trailing calldata (an ERC-8021
// suffix) is ignored.

export const poolAbi = parseAbi([
  'function swap(address tokenIn, address tokenOut, address to, uint256 amountIn, uint256 amountOut, uint256 hops)',
  'event Sync(uint112 reserve0, uint112 reserve1)',
  'event Swap(address indexed sender, uint256 amount0In, uint256 amount1In, uint256 amount0Out, uint256 amount1Out, address indexed to)',
])

export const SYNC_TOPIC: Hex = toEventSelector('Sync(uint112,uint112)')
export const SWAP_TOPIC: Hex = toEventSelector('Swap(address,uint256,uint256,uint256,uint256,address)')
/** Logs of one hop: Transfer (tokenIn), Transfer (tokenOut), Sync, Swap. */
export const LOGS_PER_HOP = 4

// Calldata offsets of swap's arguments.
const TOKEN_IN = 0x04
const TOKEN_OUT = 0x24
const TO = 0x44
const AMOUNT_IN = 0x64
const AMOUNT_OUT = 0x84
const HOPS = 0xa4
const ADDRESS_MASK: Hex = `0x${'ff'.repeat(20)}`
const RESERVE0_SLOT = 0
const RESERVE1_SLOT = 1

/** A selector as the first 4 bytes of a memory word, the rest zero. */
const selectorWord = (signature: string): Hex => pad(toFunctionSelector(signature), { dir: 'right', size: WORD })

/** CALL `token` (address at calldata `tokenArg`) with `argsSize` bytes of memory from 0; reverts if it fails. */
const callToken = (tokenArg: number, argsSize: number): AsmItem[] => [
  push(0),
  push(0),
  push(argsSize),
  push(0),
  push(0),
  push(tokenArg),
  'CALLDATALOAD',
  'GAS',
  'CALL',
  'ISZERO',
  ref('fail'),
  'JUMPI',
]

/** reserve[slot] += the word at calldata `amountArg`; the new reserve is stored to memory at `memoryAt`. */
const addToReserve = (slot: number, amountArg: number, memoryAt: number): AsmItem[] => [
  push(amountArg),
  'CALLDATALOAD',
  push(slot),
  'SLOAD',
  'ADD',
  'DUP1',
  push(slot),
  'SSTORE',
  push(memoryAt),
  'MSTORE',
]

const runtime: AsmItem[] = [
  push(4),
  'CALLDATASIZE',
  'LT',
  ref('stop'),
  'JUMPI',
  push(0),
  'CALLDATALOAD',
  push(0xe0),
  'SHR',
  push(toFunctionSelector('swap(address,address,address,uint256,uint256,uint256)')),
  'EQ',
  ref('swap'),
  'JUMPI',
  ...emptyRevert, // unknown selector

  label('swap'),
  push(HOPS),
  'CALLDATALOAD',
  push(0), // stack: hops, i
  label('hop'),
  'DUP2',
  'DUP2',
  'LT',
  'ISZERO',
  ref('stop'),
  'JUMPI', // i < hops, else done
  push(1),
  'ADD',
  // tokenIn.transferFrom(caller, this pool, amountIn)
  push(selectorWord('transferFrom(address,address,uint256)')),
  push(0),
  'MSTORE',
  'CALLER',
  push(0x04),
  'MSTORE',
  'ADDRESS',
  push(0x24),
  'MSTORE',
  push(AMOUNT_IN),
  'CALLDATALOAD',
  push(0x44),
  'MSTORE',
  ...callToken(TOKEN_IN, 0x64),
  // tokenOut.transfer(to, amountOut)
  push(selectorWord('transfer(address,uint256)')),
  push(0),
  'MSTORE',
  push(TO),
  'CALLDATALOAD',
  push(0x04),
  'MSTORE',
  push(AMOUNT_OUT),
  'CALLDATALOAD',
  push(0x24),
  'MSTORE',
  ...callToken(TOKEN_OUT, 0x44),
  // Sync(reserve0 += amountIn, reserve1 += amountOut)
  ...addToReserve(RESERVE0_SLOT, AMOUNT_IN, 0),
  ...addToReserve(RESERVE1_SLOT, AMOUNT_OUT, WORD),
  push(SYNC_TOPIC),
  push(2 * WORD),
  push(0),
  'LOG1',
  // Swap(caller, amountIn, 0, 0, amountOut, to)
  push(AMOUNT_IN),
  'CALLDATALOAD',
  push(0),
  'MSTORE',
  push(0),
  push(WORD),
  'MSTORE',
  push(0),
  push(2 * WORD),
  'MSTORE',
  push(AMOUNT_OUT),
  'CALLDATALOAD',
  push(3 * WORD),
  'MSTORE',
  push(TO),
  'CALLDATALOAD',
  push(ADDRESS_MASK),
  'AND',
  'CALLER',
  push(SWAP_TOPIC),
  push(4 * WORD),
  push(0),
  'LOG3',
  ref('hop'),
  'JUMP',

  label('fail'),
  ...emptyRevert,
  label('stop'),
  'STOP',
]

export const POOL_RUNTIME_BYTECODE: Hex = assemble(runtime)
export const POOL_DEPLOY_BYTECODE: Hex = deployCode(POOL_RUNTIME_BYTECODE)
