import { type Address, getContractAddress, type Hex, toFunctionSelector } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { REGISTRY_TOPICS } from '../attribution/registry.js'
import { DEV_MNEMONIC } from './anvil.js'
import { type AsmItem, WORD, assemble, deployCode, emptyRevert, label, push, ref } from './assembler.js'

// The devnet's Builder Codes registry: the events, token ids and rules of Base's (base/builder-codes) in a
// few hundred hand-assembled bytes (no Solidity compiler is available). What it leaves out is access
// control: anyone may register (Base's needs REGISTER_ROLE) and an owner transfers its own token (Base's
// needs TRANSFER_ROLE too). Registration checks the code (1 to 32 of [0-9a-z_]), refuses a taken code
// and zero addresses, and emits Transfer(0, owner, id), CodeRegistered(id, code),
// PayoutAddressUpdated(id, payout) in that order, as Base's does.

const ARG0 = 0x04
const ARG1 = 0x24
const ARG2 = 0x44
const ADDRESS_MASK: Hex = `0x${'ff'.repeat(20)}`

/** Stack [..., tokenId] → [..., slot of its payout address] (keccak256(tokenId . 1)). */
const payoutSlot: AsmItem[] = [push(0), 'MSTORE', push(1), push(WORD), 'MSTORE', push(0x40), push(0), 'SHA3']

const runtime: AsmItem[] = [
  push(4),
  'CALLDATASIZE',
  'LT',
  ref('invalid'),
  'JUMPI',
  push(0),
  'CALLDATALOAD',
  push(0xe0),
  'SHR',
  'DUP1',
  push(toFunctionSelector('register(string,address,address)')),
  'EQ',
  ref('register'),
  'JUMPI',
  'DUP1',
  push(toFunctionSelector('transferFrom(address,address,uint256)')),
  'EQ',
  ref('transferFrom'),
  'JUMPI',
  'DUP1',
  push(toFunctionSelector('updatePayoutAddress(string,address)')),
  'EQ',
  ref('updatePayout'),
  'JUMPI',
  'DUP1',
  push(toFunctionSelector('ownerOf(uint256)')),
  'EQ',
  ref('ownerOf'),
  'JUMPI',
  'DUP1',
  push(toFunctionSelector('payoutAddress(uint256)')),
  'EQ',
  ref('payoutAddress'),
  'JUMPI',
  label('invalid'),
  ...emptyRevert,

  // parseCode: [ret] → [tokenId, length], the string argument 0 checked and left-aligned in a word.
  label('parseCode'),
  push(ARG0),
  'CALLDATALOAD',
  push(4),
  'ADD', // ret, p
  'DUP1',
  'CALLDATALOAD', // ret, p, len
  'DUP1',
  'ISZERO',
  ref('invalid'),
  'JUMPI',
  push(WORD),
  'DUP2',
  'GT',
  ref('invalid'),
  'JUMPI', // len > 32
  'SWAP1',
  push(WORD),
  'ADD',
  'CALLDATALOAD', // ret, len, word
  push(8),
  'DUP3',
  'MUL',
  push(256),
  'SUB', // ret, len, word, shift
  'SWAP1',
  'DUP2',
  'SHR',
  'SWAP1',
  'SHL', // ret, len, tokenId
  push(0), // ret, len, tokenId, i
  label('charLoop'),
  'DUP3',
  'DUP2',
  'LT',
  'ISZERO',
  ref('charsDone'),
  'JUMPI',
  'DUP2',
  'DUP2',
  'BYTE', // ..., i, b
  push(0x30),
  'DUP2',
  'SUB',
  push(10),
  'SWAP1',
  'LT',
  ref('charOk'),
  'JUMPI', // 0-9
  push(0x61),
  'DUP2',
  'SUB',
  push(26),
  'SWAP1',
  'LT',
  ref('charOk'),
  'JUMPI', // a-z
  'DUP1',
  push(0x5f),
  'EQ',
  ref('charOk'),
  'JUMPI', // _
  ref('invalid'),
  'JUMP',
  label('charOk'),
  'POP',
  push(1),
  'ADD',
  ref('charLoop'),
  'JUMP',
  label('charsDone'),
  'POP',
  'SWAP2',
  'JUMP', // tokenId, len

  // register(code, owner, payout)
  label('register'),
  ref('registerParsed'),
  ref('parseCode'),
  'JUMP',
  label('registerParsed'), // tokenId, len
  push(ARG1),
  'CALLDATALOAD',
  push(ADDRESS_MASK),
  'AND',
  'DUP1',
  'ISZERO',
  ref('invalid'),
  'JUMPI', // tokenId, len, owner
  push(ARG2),
  'CALLDATALOAD',
  push(ADDRESS_MASK),
  'AND',
  'DUP1',
  'ISZERO',
  ref('invalid'),
  'JUMPI', // ..., owner, payout
  'DUP4',
  'SLOAD',
  ref('invalid'),
  'JUMPI', // taken
  'DUP2',
  'DUP5',
  'SSTORE', // owner of tokenId
  'DUP4',
  'DUP3',
  push(0),
  push(REGISTRY_TOPICS.transfer),
  push(0),
  push(0),
  'LOG4', // Transfer(0, owner, tokenId)
  push(WORD),
  push(0),
  'MSTORE',
  'DUP3',
  push(WORD),
  'MSTORE',
  'DUP4',
  push(0x40),
  'MSTORE',
  'DUP4',
  push(REGISTRY_TOPICS.registered),
  push(0x60),
  push(0),
  'LOG2', // CodeRegistered(tokenId, code)
  'DUP4',
  ...payoutSlot,
  'DUP2',
  'SWAP1',
  'SSTORE', // payout of tokenId
  push(0),
  'MSTORE', // tokenId, len, owner
  'DUP3',
  push(REGISTRY_TOPICS.payout),
  push(WORD),
  push(0),
  'LOG2', // PayoutAddressUpdated(tokenId, payout)
  'STOP',

  // transferFrom(from, to, tokenId): by the owner only.
  label('transferFrom'),
  push(ARG2),
  'CALLDATALOAD',
  'DUP1',
  'SLOAD', // tokenId, owner
  'DUP1',
  'ISZERO',
  ref('invalid'),
  'JUMPI',
  'DUP1',
  'CALLER',
  'EQ',
  'ISZERO',
  ref('invalid'),
  'JUMPI',
  'DUP1',
  push(ARG0),
  'CALLDATALOAD',
  push(ADDRESS_MASK),
  'AND',
  'EQ',
  'ISZERO',
  ref('invalid'),
  'JUMPI',
  push(ARG1),
  'CALLDATALOAD',
  push(ADDRESS_MASK),
  'AND',
  'DUP1',
  'ISZERO',
  ref('invalid'),
  'JUMPI', // tokenId, owner, to
  'DUP1',
  'DUP4',
  'SSTORE',
  'SWAP1',
  push(REGISTRY_TOPICS.transfer),
  push(0),
  push(0),
  'LOG4', // Transfer(owner, to, tokenId)
  'STOP',

  // updatePayoutAddress(code, payout): by the owner only.
  label('updatePayout'),
  ref('updateParsed'),
  ref('parseCode'),
  'JUMP',
  label('updateParsed'),
  'POP', // tokenId
  'DUP1',
  'SLOAD',
  'CALLER',
  'EQ',
  'ISZERO',
  ref('invalid'),
  'JUMPI',
  push(ARG1),
  'CALLDATALOAD',
  push(ADDRESS_MASK),
  'AND',
  'DUP1',
  'ISZERO',
  ref('invalid'),
  'JUMPI', // tokenId, payout
  'DUP2',
  ...payoutSlot,
  'DUP2',
  'SWAP1',
  'SSTORE',
  push(0),
  'MSTORE',
  push(REGISTRY_TOPICS.payout),
  push(WORD),
  push(0),
  'LOG2',
  'STOP',

  // ownerOf(tokenId), payoutAddress(tokenId): views; an unregistered token reverts.
  label('ownerOf'),
  push(ARG0),
  'CALLDATALOAD',
  'SLOAD',
  'DUP1',
  'ISZERO',
  ref('invalid'),
  'JUMPI',
  push(0),
  'MSTORE',
  push(WORD),
  push(0),
  'RETURN',
  label('payoutAddress'),
  push(ARG0),
  'CALLDATALOAD',
  'DUP1',
  'SLOAD',
  'ISZERO',
  ref('invalid'),
  'JUMPI',
  ...payoutSlot,
  'SLOAD',
  push(0),
  'MSTORE',
  push(WORD),
  push(0),
  'RETURN',
]

export const REGISTRY_RUNTIME_BYTECODE: Hex = assemble(runtime)
export const REGISTRY_DEPLOY_BYTECODE: Hex = deployCode(REGISTRY_RUNTIME_BYTECODE)

/** The dev account that runs the demo's infrastructure: the registry (its first transaction), the EntryPoint, the bundler. */
export const DEVNET_OPERATOR: Address = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: 9 }).address
/** Where the demo's registry lands: the operator's first contract. `flashgate dev` follows it. */
export const DEVNET_REGISTRY_ADDRESS: Address = getContractAddress({ from: DEVNET_OPERATOR, nonce: 0n })
