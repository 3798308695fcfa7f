// `--pending-source execute` on an OP-Stack chain (issue 16, item 3), checked against a real OP-Stack EVM:
// anvil with `--network optimism` (op-revm, Isthmus rules) seals a block that opens with an L1-attributes
// deposit and holds user deposits (minting, creating a contract, reverting, halting) and signed transactions of every kind and compressibility; the same transactions, fed to the
// executor as a flashblock on the parent block's state, must give the sealed block's receipts (status, gas,
// cumulative gas, logs, created contract) and leave every touched account's balance as anvil left it,
// the fee vaults' included, whose L1 fee credits are also each receipt's `l1Fee`. The L1Block predeploy is
// Optimism's own compiled contract (test/fixtures/op-stack); its operator fee parameters are set in its
// storage, as an Isthmus L1-attributes call would leave them.
import { readFileSync } from 'node:fs'
import { pino } from 'pino'
import { concat, encodeFunctionData, type Hex, keccak256, numberToHex, pad, toHex } from 'viem'
import { serializeTransaction } from 'viem/op-stack'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { TOKEN_DEPLOY_BYTECODE, tokenAbi } from '../src/devnet/contracts.js'
import { BASE_FEE_VAULT, L1_BLOCK, L1_FEE_VAULT, OPERATOR_FEE_VAULT } from '../src/pending/execute/op-stack.js'
import { createFlashblockExecutor } from '../src/pending/execute/index.js'
import { flashblockMessage } from '../src/pending/message.js'
import { createPendingState } from '../src/pending/state.js'
import { createUpstream } from '../src/upstream/index.js'
import { DEV_ACCOUNTS, flashblock } from './fixtures/flashblocks.js'
import { result } from './fixtures/gateway.js'

const L1_BLOCK_CODE = (JSON.parse(readFileSync(new URL('./fixtures/op-stack/l1block-ecotone.json', import.meta.url), 'utf8')) as { deployedBytecode: Hex })
  .deployedBytecode
const DEPOSITOR: Hex = '0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001'
const ECOTONE_L1_INFO_SELECTOR: Hex = '0x440a5e20'
/** Base mainnet's L1 fee scalars (2024–2026) and an L1 block's fees. */
const BASE_FEE_SCALAR = 2_269
const BLOB_BASE_FEE_SCALAR = 1_055_762
const L1_BASE_FEE = 7_000_000_000n
const L1_BLOB_BASE_FEE = 3n
const OPERATOR_FEE_SCALAR = 1_500
const OPERATOR_FEE_CONSTANT = 7_000n

type Json = Record<string, any>

let anvil: Anvil
const call = <value>(method: string, params: unknown[] = []) => result<value>(anvil.rpcUrl, method, params)

beforeAll(async () => {
  anvil = await startAnvil({ noMining: true, extraArgs: ['--network', 'optimism', '--order', 'fifo'] })
  await call('anvil_setCode', [L1_BLOCK, L1_BLOCK_CODE])
  // operatorFeeScalar at bytes 20..24 and operatorFeeConstant at 24..32 of slot 8 (Isthmus' L1Block).
  const operatorWord = concat([pad('0x', { size: 20 }), numberToHex(OPERATOR_FEE_SCALAR, { size: 4 }), numberToHex(OPERATOR_FEE_CONSTANT, { size: 8 })])
  await call('anvil_setStorageAt', [L1_BLOCK, pad(toHex(8), { size: 32 }), operatorWord])
  await call('evm_mine')
}, 30_000)

afterAll(async () => {
  await anvil?.stop()
})

function deposit(options: { from: Hex; to: Hex | null; mint?: bigint; value?: bigint; gas: bigint; data?: Hex; salt: string }): Hex {
  return serializeTransaction({
    type: 'deposit',
    sourceHash: keccak256(toHex(options.salt)),
    from: options.from,
    ...(options.to !== null && { to: options.to }),
    mint: options.mint ?? 0n,
    value: options.value ?? 0n,
    gas: options.gas,
    isSystemTx: false,
    data: options.data ?? '0x',
  })
}

/** The L1-attributes deposit of an Ecotone-format chain: scalars, sequence number, L1 block, fees, hashes. */
function l1AttributesDeposit(l2Block: number): Hex {
  const data = concat([
    ECOTONE_L1_INFO_SELECTOR,
    numberToHex(BASE_FEE_SCALAR, { size: 4 }),
    numberToHex(BLOB_BASE_FEE_SCALAR, { size: 4 }),
    numberToHex(0, { size: 8 }),
    numberToHex(1_800_000_000 + l2Block, { size: 8 }),
    numberToHex(20_000_000 + l2Block, { size: 8 }),
    numberToHex(L1_BASE_FEE, { size: 32 }),
    numberToHex(L1_BLOB_BASE_FEE, { size: 32 }),
    keccak256(toHex(`l1 block ${l2Block}`)),
    pad('0x5050', { size: 32 }),
  ])
  return deposit({ from: DEPOSITOR, to: L1_BLOCK, gas: 1_000_000n, data, salt: `l1 info ${l2Block}` })
}

test('an OP-Stack block (deposits, L1 and operator fees, vaults) executes to the sealed block: receipts and balances', async () => {
  const [deployer, sender, other] = [DEV_ACCOUNTS[0]!.address, DEV_ACCOUNTS[1]!.address, DEV_ACCOUNTS[2]!.address]
  // A token to call, sealed before the block under test.
  const deployment = await call<Hex>('eth_sendTransaction', [{ from: deployer, data: TOKEN_DEPLOY_BYTECODE, gas: '0x100000' }])
  await call('evm_mine')
  const token = (await call<Json>('eth_getTransactionReceipt', [deployment])).contractAddress as Hex
  const parent = await call<Json>('eth_getBlockByNumber', ['latest', false])
  const number = Number(parent.number) + 1

  // One sender per deposit: anvil's pool takes a second deposit of a sender (nonce 0 in the envelope) for a replacement.
  const aliased = ['a1', 'a2', 'a3', 'a4'].map((byte) => `0x${byte.repeat(20)}` as Hex)
  const recipient: Hex = `0x${'c4'.repeat(20)}`
  const deposits = [
    l1AttributesDeposit(number),
    // Mints 2 ETH and sends 0.5 of it on.
    deposit({ from: aliased[0]!, to: recipient, mint: 2n * 10n ** 18n, value: 5n * 10n ** 17n, gas: 100_000n, salt: 'transfer' }),
    // Creates a contract (the token).
    deposit({ from: aliased[1]!, to: null, gas: 1_000_000n, data: TOKEN_DEPLOY_BYTECODE, salt: 'create' }),
    // Reverts (transfer of nothing): its gas as used, the mint kept.
    deposit({
      from: aliased[2]!,
      to: token,
      mint: 1n,
      gas: 200_000n,
      data: encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [recipient, 0n] }),
      salt: 'revert',
    }),
    // Runs out of gas: a failed deposit, all its gas used, only mint and nonce kept.
    deposit({
      from: aliased[3]!,
      to: token,
      mint: 3n,
      gas: 23_000n,
      data: encodeFunctionData({ abi: tokenAbi, functionName: 'mint', args: [recipient, 5n] }),
      salt: 'halt',
    }),
  ]
  const depositHashes: Hex[] = []
  for (const raw of deposits) depositHashes.push(await call<Hex>('eth_sendRawTransaction', [raw]))
  // Signed transactions: incompressible and compressible calldata, legacy and EIP-1559, logs, a revert, a creation.
  const random = toHex(Uint8Array.from({ length: 400 }, (_, index) => (index * 7919 + 13) % 251))
  const signed: Json[] = [
    { from: sender, to: recipient, value: '0x1', data: random, gas: '0x20000' },
    { from: sender, to: recipient, value: '0x2', data: pad('0x01', { size: 600 }), gas: '0x20000' },
    { from: other, to: recipient, value: '0x3', gasPrice: '0x77359400', gas: '0x5208' },
    { from: sender, to: token, data: encodeFunctionData({ abi: tokenAbi, functionName: 'multi', args: [recipient, 4n] }), gas: '0x30000' },
    { from: other, to: token, data: encodeFunctionData({ abi: tokenAbi, functionName: 'mint', args: [recipient, 9n] }), gas: '0x30000' },
    { from: sender, to: token, data: encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [recipient, 0n] }), gas: '0x30000' },
    { from: other, data: TOKEN_DEPLOY_BYTECODE, gas: '0x100000' },
  ]
  const signedHashes: Hex[] = []
  for (const transaction of signed) signedHashes.push(await call<Hex>('eth_sendTransaction', [transaction]))
  await call('evm_mine')

  const sealed = await call<Json>('eth_getBlockByNumber', [toHex(number), false])
  const hashes = [...depositHashes, ...signedHashes]
  expect(sealed.transactions).toEqual(hashes)
  const raws = [...deposits, ...(await Promise.all(signedHashes.map((hash) => call<Hex>('eth_getRawTransactionByHash', [hash]))))]
  const receipts = await Promise.all(hashes.map((hash) => call<Json>('eth_getTransactionReceipt', [hash])))
  expect(receipts.map((receipt) => Number(receipt.status))).toEqual([1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1])

  // The executor, on anvil's state at the parent block, fed the block as one flashblock.
  const logger = pino({ level: 'silent' })
  const state = createPendingState({ logger })
  const upstream = createUpstream({ rpcUrl: anvil.rpcUrl })
  const executor = createFlashblockExecutor({ state, chainId: 31337, request: (method, params) => upstream.batchedRequest(method, params), logger })
  state.setHydrate(executor.hydrate)
  const message = flashblock({
    index: 0,
    blockNumber: number,
    parentHash: parent.hash,
    timestamp: Number(sealed.timestamp),
    format: 'current',
    transactions: raws.map((raw) => ({ raw, hash: keccak256(raw) })),
  })
  Object.assign(message.base!, {
    fee_recipient: sealed.miner,
    gas_limit: sealed.gasLimit,
    base_fee_per_gas: sealed.baseFeePerGas,
    prev_randao: sealed.mixHash,
    parent_beacon_block_root: sealed.parentBeaconBlockRoot,
  })
  await state.apply(flashblockMessage.parse(message))
  await executor.idle()
  await state.settled()
  const block = state.blocks(number - 1).find((candidate) => candidate.number === number)!
  expect(executor.status()).toMatchObject({ executedTransactions: hashes.length, executedDeposits: deposits.length, failedBlocks: 0 })

  for (const [position, sealedReceipt] of receipts.entries()) {
    const executed = block.receipts[position] as Json
    const label = `transaction ${position} (${hashes[position]})`
    expect(executed, label).not.toBeNull()
    for (const field of ['status', 'gasUsed', 'cumulativeGasUsed', 'effectiveGasPrice', 'contractAddress', 'from', 'to'])
      expect(executed[field], `${label}: ${field}`).toEqual(sealedReceipt[field])
    expect(
      executed.logs.map(({ address, topics, data, logIndex }: Json) => ({ address, topics, data, logIndex })),
      `${label}: logs`,
    ).toEqual(sealedReceipt.logs.map(({ address, topics, data, logIndex }: Json) => ({ address, topics, data, logIndex })))
    if (position < deposits.length) {
      expect(executed.depositReceiptVersion, label).toBe('0x1')
      expect(executed.l1Fee, label).toBe('0x0')
      // anvil reports the nonce after the deposit; Base's node (and op-geth) the nonce before it.
      expect(BigInt(executed.depositNonce), label).toBe(BigInt(sealedReceipt.depositNonce) - 1n)
    } else {
      expect(executed.depositNonce, label).toBeUndefined()
      expect(BigInt(executed.l1Fee), label).toBeGreaterThan(0n)
      expect(executed).toMatchObject({
        l1GasPrice: toHex(L1_BASE_FEE),
        l1BaseFeeScalar: toHex(BASE_FEE_SCALAR),
        l1BlobBaseFee: toHex(L1_BLOB_BASE_FEE),
        l1BlobBaseFeeScalar: toHex(BLOB_BASE_FEE_SCALAR),
        operatorFeeScalar: toHex(OPERATOR_FEE_SCALAR),
        operatorFeeConstant: toHex(OPERATOR_FEE_CONSTANT),
      })
    }
  }

  // Every account a transaction touched (senders, recipients, created contracts, coinbase, vaults) holds
  // what anvil's sealed block says, and the L1 fee vault received exactly the receipts' L1 fees.
  const balances = block.balances
  for (const address of [...aliased, recipient, sender, other, sealed.miner, BASE_FEE_VAULT, L1_FEE_VAULT, OPERATOR_FEE_VAULT])
    expect(balances.has(address.toLowerCase()), `${address} touched`).toBe(true)
  for (const [address, balance] of balances) expect(balance, `balance of ${address}`).toBe(BigInt(await call<Hex>('eth_getBalance', [address, toHex(number)])))
  const l1Fees = (block.receipts as Json[]).reduce((sum, receipt) => sum + BigInt(receipt.l1Fee), 0n)
  const vaultBefore = BigInt(await call<Hex>('eth_getBalance', [L1_FEE_VAULT, toHex(number - 1)]))
  expect(balances.get(L1_FEE_VAULT)! - vaultBefore).toBe(l1Fees)
  for (const address of aliased) expect(BigInt(await call<Hex>('eth_getTransactionCount', [address, toHex(number)])), address).toBe(1n)
  executor.stop()
}, 60_000)
