import { brotliDecompressSync } from 'node:zlib'
import {
  type Address,
  type Hash,
  type Hex,
  bytesToHex,
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  getAddress,
  getContractAddress,
  hexToBytes,
  http,
  keccak256,
  parseGwei,
  parseTransaction,
  recoverTransactionAddress,
  toHex,
} from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { WebSocket } from 'ws'
import { startAnvil } from './anvil.js'
import { TOKEN_DEPLOY_BYTECODE, deployToken, tokenAbi } from './contracts.js'
import { type Devnet, startDevnet } from './devnet.js'
import type { FlashblockReceipt, FlashblockWireMessage } from '../pending/message.js'
import { SEQUENCER_ANVIL_ARGS, createSequencer } from './sequencer.js'

// Proves DESIGN.md §6's invariant on a real anvil for the legacy feed: what a flashblock announces
// (receipts, logs, balances) is what the sealed block holds (preconfirmed.test.ts does the same for the
// devnet's JSON-RPC). Shorter slots than Base's, so that a few seconds cover several blocks.
const BLOCK_TIME_MS = 1_000
const FLASHBLOCK_INTERVAL_MS = 100
const TICKS_PER_BLOCK = BLOCK_TIME_MS / FLASHBLOCK_INTERVAL_MS
/** Traffic rounds, spaced so that transactions spread over many flashblocks of several blocks. */
const ROUNDS = 12
const ROUND_GAP_MS = 170
const CALL_GAS = 150_000n
/** anvil's default mnemonic: its dev accounts' keys, to sign locally and use eth_sendRawTransaction. */
const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk'
const POLL_MS = 20
/** How often the reader probes `latest` while ticks run. */
const READ_PROBE_MS = 7

type Received = { message: FlashblockWireMessage; at: number }
type RawReceipt = Record<string, unknown> & { logs: Record<string, unknown>[] }
type RawBlock = Record<string, unknown> & { hash: Hash; number: Hex; transactions: Hash[] }

let devnet: Devnet
let feed: { messages: Received[]; close: () => void }
let rpc: <T>(method: string, params?: unknown[]) => Promise<T>

beforeAll(async () => {
  // The legacy feed: its receipts and balances are what this file checks against the sealed blocks.
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: BLOCK_TIME_MS, flashblockIntervalMs: FLASHBLOCK_INTERVAL_MS, feedFormat: 'legacy' })
  feed = await collectFlashblocks(devnet.flashblocksUrl)
  rpc = createRawRpc(devnet.rpcUrl)
})

afterAll(async () => {
  feed?.close()
  await devnet?.stop()
})

describe('sequencer invariant', () => {
  test('every pre-confirmed receipt, log and balance equals the sealed block’s', async () => {
    const transport = http(devnet.rpcUrl, { batch: false })
    const client = createPublicClient({ transport, pollingInterval: POLL_MS })
    const wallet = createWalletClient({ transport })
    const accounts = await wallet.getAddresses()
    const [deployer, ...senders] = accounts.slice(0, 5) as [Address, ...Address[]]
    const token = await deployToken(createWalletClient({ transport, account: deployer }), client)
    const localAccount = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: 7 })
    const localWallet = createWalletClient({ transport, account: localAccount })
    const chainId = await client.getChainId()
    let localNonce = await client.getTransactionCount({ address: localAccount.address, blockTag: 'pending' })

    // Reads through the devnet must never see a speculative block: every `latest` seen must be final.
    const seenHeads = new Map<Hex, Hash>()
    let reading = true
    const reader = (async () => {
      while (reading) {
        const head = await rpc<RawBlock>('eth_getBlockByNumber', ['latest', false])
        seenHeads.set(head.number, head.hash)
        await sleep(READ_PROBE_MS)
      }
    })()

    const hashes: Hash[] = []
    const call = (from: Address, data: Hex, gas = CALL_GAS) => wallet.sendTransaction({ account: from, chain: null, to: token, data, gas })
    for (let round = 0; round < ROUNDS; round++) {
      const from = senders[round % senders.length]!
      const to = accounts[(round + 5) % accounts.length]!
      const sends: Promise<Hash>[] = [
        call(from, encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [to, BigInt(round + 1)] })),
        call(senders[(round + 1) % senders.length]!, encodeFunctionData({ abi: tokenAbi, functionName: 'multi', args: [to, BigInt(2 + (round % 4))] })),
      ]
      if (round % 3 === 0) {
        const topic = keccak256(toHex(round))
        sends.push(
          call(senders[(round + 2) % senders.length]!, encodeFunctionData({ abi: tokenAbi, functionName: 'emitLogs', args: [4, topic, topic, topic, 7n] })),
        )
      }
      // transfer(to, 0) reverts with Error("zero amount"); explicit gas keeps it from failing estimation.
      if (round % 4 === 1)
        sends.push(call(senders[(round + 3) % senders.length]!, encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [to, 0n] })))
      if (round === 5) sends.push(wallet.deployContract({ account: from, chain: null, abi: tokenAbi, bytecode: TOKEN_DEPLOY_BYTECODE }))
      // Locally signed: legacy and EIP-1559, sent raw; a value transfer to a fresh address each time.
      const fresh = getAddress(keccak256(toHex(`fresh-${round}`)).slice(0, 42))
      const fees =
        round % 2 === 0
          ? { type: 'legacy' as const, gasPrice: parseGwei('3') }
          : { maxFeePerGas: parseGwei('5'), maxPriorityFeePerGas: BigInt(round) * 1_000_000n }
      const raw = await localWallet.signTransaction({
        chain: null,
        chainId,
        to: fresh,
        value: BigInt(round + 1) * 10n ** 12n,
        gas: 21_000n,
        nonce: localNonce++,
        ...fees,
      })
      sends.push(rpc<Hash>('eth_sendRawTransaction', [raw]))
      // Sends of one round go out together (they are ordered by arrival), rounds are spread over time.
      hashes.push(...(await Promise.all(sends)))
      await sleep(ROUND_GAP_MS)
    }
    const receipts = await Promise.all(hashes.map((hash) => client.waitForTransactionReceipt({ hash })))
    const lastBlock = receipts.reduce((max, receipt) => (receipt.blockNumber > max ? receipt.blockNumber : max), 0n)
    await waitFor(() => feed.messages.some(({ message }) => message.metadata.block_number === Number(lastBlock) && message.index === TICKS_PER_BLOCK - 1))
    reading = false
    await reader
    expect(receipts.some((receipt) => receipt.status === 'reverted')).toBe(true)
    expect(receipts.some((receipt) => receipt.contractAddress)).toBe(true)

    const blockNumbers = [...new Set(receipts.map((receipt) => receipt.blockNumber))]
    expect(blockNumbers.length).toBeGreaterThanOrEqual(3)
    let compared = 0
    let mostFlashblocksWithTxs = 0
    for (const number of blockNumbers) {
      const sealed = await rpc<RawBlock>('eth_getBlockByNumber', [toHex(number), false])
      const flashblocks = flashblocksOf(sealed)
      // The sealed block is exactly the concatenation of its flashblocks, in order.
      const announced = flashblocks.flatMap((message) => message.diff.transactions.map((raw) => keccak256(raw)))
      expect(announced).toEqual(sealed.transactions)
      expectHeaderMatches(flashblocks, sealed)
      const withTxs = flashblocks.filter((message) => message.diff.transactions.length > 0).length
      mostFlashblocksWithTxs = Math.max(mostFlashblocksWithTxs, withTxs)

      const rebuilt = await receiptsFromFlashblocks(flashblocks)
      for (const hash of sealed.transactions) {
        const { blobGasPrice: _anvilOnly, ...expected } = await rpc<RawReceipt>('eth_getTransactionReceipt', [hash])
        expect(rebuilt.get(hash), `receipt of ${hash}`).toEqual(expected)
        compared++
      }
      await expectBalancesMatch(flashblocks, sealed)
    }
    expect(compared).toBeGreaterThanOrEqual(hashes.length)
    // The case that matters: a block built over several flashblocks, each re-mined on a reverted snapshot.
    expect(mostFlashblocksWithTxs).toBeGreaterThanOrEqual(3)

    for (const [number, hash] of seenHeads) {
      const final = await rpc<RawBlock>('eth_getBlockByNumber', [number, false])
      expect(final.hash, `head ${number} seen through the devnet`).toBe(hash)
    }
  })
})

describe('sequencer stop', () => {
  test('stop() takes the pre-confirmed block down: anvil’s head is the sealed one, the unsealed transaction back in its pool', async () => {
    const anvil = await startAnvil({ noMining: true, extraArgs: [...SEQUENCER_ANVIL_ARGS] })
    const messages: FlashblockWireMessage[] = []
    // Long slots, so that the transaction is pre-confirmed well before its block would seal.
    const sequencer = createSequencer({
      anvilRpcUrl: anvil.rpcUrl,
      blockTimeMs: 4_000,
      flashblockIntervalMs: 100,
      onFlashblock: (message) => messages.push(message),
    })
    const anvilRpc = createRawRpc(anvil.rpcUrl)
    try {
      sequencer.start()
      const call = async <T>(method: string, params: unknown[] = []) => (await sequencer.forward({ jsonrpc: '2.0', id: 1, method, params })).result as T
      const [from, to] = await call<Address[]>('eth_accounts')
      await waitFor(() => messages.length > 0)
      const hash = await call<Hash>('eth_sendTransaction', [{ from, to, value: '0x1' }])
      await waitFor(() => messages.some((message) => message.diff.transactions.some((raw) => keccak256(raw) === hash)))
      const sealedHead = await call<Hex>('eth_blockNumber')
      expect(await anvilRpc<Hex>('eth_blockNumber')).toBe(toHex(BigInt(sealedHead) + 1n))

      await sequencer.stop()
      expect(await anvilRpc<Hex>('eth_blockNumber')).toBe(sealedHead)
      expect(await anvilRpc('eth_getTransactionReceipt', [hash])).toBeNull()
      expect(await anvilRpc('txpool_status')).toEqual({ pending: '0x1', queued: '0x0' })
      await anvilRpc('evm_mine')
      expect(await anvilRpc<{ status: Hex }>('eth_getTransactionReceipt', [hash])).toMatchObject({ status: '0x1' })
    } finally {
      await sequencer.stop()
      await anvil.stop()
    }
  })
})

/** The complete flashblock sequence (index 0 to the sealing one) whose last diff is the sealed block. */
function flashblocksOf(sealed: RawBlock): FlashblockWireMessage[] {
  const last = feed.messages.find(({ message }) => message.diff.block_hash === sealed.hash && message.index === TICKS_PER_BLOCK - 1)
  expect(last, `sealing flashblock of block ${sealed.number}`).toBeDefined()
  const sequence = feed.messages.map(({ message }) => message).filter((message) => message.payload_id === last!.message.payload_id)
  expect(sequence.map((message) => message.index)).toEqual([...Array(TICKS_PER_BLOCK).keys()])
  return sequence
}

function expectHeaderMatches(flashblocks: FlashblockWireMessage[], sealed: RawBlock): void {
  const { base } = flashblocks[0]!
  expect(base).toEqual({
    parent_beacon_block_root: sealed.parentBeaconBlockRoot,
    parent_hash: sealed.parentHash,
    fee_recipient: sealed.miner,
    prev_randao: sealed.mixHash,
    block_number: sealed.number,
    gas_limit: sealed.gasLimit,
    timestamp: sealed.timestamp,
    extra_data: sealed.extraData,
    base_fee_per_gas: sealed.baseFeePerGas,
  })
  expect(flashblocks.slice(1).every((message) => message.base === undefined)).toBe(true)
  const { diff } = flashblocks.at(-1)!
  expect(diff).toMatchObject({
    state_root: sealed.stateRoot,
    receipts_root: sealed.receiptsRoot,
    logs_bloom: sealed.logsBloom,
    gas_used: sealed.gasUsed,
    block_hash: sealed.hash,
    withdrawals_root: sealed.withdrawalsRoot,
  })
}

/**
 * What a consumer of the feed can know of each receipt: the consensus fields from `metadata.receipts`, the
 * rest derived from the transactions, their positions and `base` — exactly as a node does for Base's feed.
 */
async function receiptsFromFlashblocks(flashblocks: FlashblockWireMessage[]): Promise<Map<Hash, RawReceipt>> {
  const base = flashblocks[0]!.base!
  const blockHash = flashblocks.at(-1)!.diff.block_hash
  const receipts = new Map<Hash, RawReceipt>()
  let previousCumulative = 0n
  let logIndex = 0
  for (const message of flashblocks) {
    for (const raw of message.diff.transactions) {
      const hash = keccak256(raw)
      const consensus = message.metadata.receipts?.[hash] as FlashblockReceipt
      const tx = parseTransaction(raw)
      const from = (await recoverTransactionAddress({ serializedTransaction: raw as never })).toLowerCase()
      const transactionIndex = toHex(receipts.size)
      const baseFee = BigInt(base.base_fee_per_gas)
      const effectiveGasPrice = tx.maxFeePerGas !== undefined ? min(tx.maxFeePerGas, baseFee + tx.maxPriorityFeePerGas!) : tx.gasPrice!
      const logs = consensus.logs.map((log) => ({
        ...log,
        blockHash,
        blockNumber: base.block_number,
        blockTimestamp: base.timestamp,
        transactionHash: hash,
        transactionIndex,
        logIndex: toHex(logIndex++),
        removed: false,
      }))
      receipts.set(hash, {
        type: consensus.type,
        status: consensus.status,
        cumulativeGasUsed: consensus.cumulativeGasUsed,
        logs,
        logsBloom: logsBloom(consensus.logs),
        transactionHash: hash,
        transactionIndex,
        blockHash,
        blockNumber: base.block_number,
        gasUsed: toHex(BigInt(consensus.cumulativeGasUsed) - previousCumulative),
        effectiveGasPrice: toHex(effectiveGasPrice),
        from,
        to: tx.to?.toLowerCase() ?? null,
        contractAddress: tx.to ? null : getContractAddress({ from: from as Address, nonce: BigInt(tx.nonce!) }).toLowerCase(),
        // anvil 1.7.1 writes a receipt's blockTimestamp as a JSON number (a log's as hex).
        blockTimestamp: Number(base.timestamp),
      })
      previousCumulative = BigInt(consensus.cumulativeGasUsed)
    }
    // A flashblock's gas_used is the block's so far: the last receipt's cumulative gas.
    expect(BigInt(message.diff.gas_used)).toBe(previousCumulative)
  }
  return receipts
}

/** A balance announced by a flashblock, and not changed by a later one, is the sealed block's balance. */
async function expectBalancesMatch(flashblocks: FlashblockWireMessage[], sealed: RawBlock): Promise<void> {
  let checked = 0
  for (const [i, message] of flashblocks.entries()) {
    const later = new Set(flashblocks.slice(i + 1).flatMap((next) => Object.keys(next.metadata.new_account_balances ?? {})))
    for (const [address, balance] of Object.entries(message.metadata.new_account_balances ?? {})) {
      if (later.has(address)) continue
      expect(await rpc<Hex>('eth_getBalance', [address, sealed.number]), `balance of ${address}`).toBe(balance)
      checked++
    }
    // Every sender pays gas, so every transaction's sender is among the balances its flashblock announces.
    for (const raw of message.diff.transactions) {
      const sender = (await recoverTransactionAddress({ serializedTransaction: raw as never })).toLowerCase()
      expect(Object.keys(message.metadata.new_account_balances ?? {})).toContain(sender)
    }
  }
  if (sealed.transactions.length > 0) expect(checked).toBeGreaterThan(0)
}

/** The 2048-bit bloom of a receipt's logs (Yellow Paper §4.3.1): 3 bits per address and topic. */
function logsBloom(logs: { address: Address; topics: Hex[] }[]): Hex {
  const bloom = new Uint8Array(256)
  for (const item of logs.flatMap((log) => [log.address, ...log.topics])) {
    const digest = hexToBytes(keccak256(item))
    for (let i = 0; i < 6; i += 2) {
      const bit = ((digest[i]! << 8) | digest[i + 1]!) & 2047
      bloom[255 - (bit >> 3)]! |= 1 << (bit & 7)
    }
  }
  return bytesToHex(bloom)
}

// --- helpers -------------------------------------------------------------------------------------------

async function collectFlashblocks(url: string): Promise<{ messages: Received[]; close: () => void }> {
  const messages: Received[] = []
  const socket = new WebSocket(url)
  socket.on('message', (data: Buffer, isBinary) => {
    const text = isBinary ? brotliDecompressSync(data).toString('utf8') : data.toString('utf8')
    messages.push({ message: JSON.parse(text) as FlashblockWireMessage, at: performance.now() })
  })
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  return { messages, close: () => socket.close() }
}

/** JSON-RPC without viem's formatting, to compare the wire form field by field. */
function createRawRpc(url: string) {
  let id = 0
  return async <T>(method: string, params: unknown[] = []): Promise<T> => {
    // anvil itself refuses a body without the content-type; the devnet does not need it.
    const headers = { 'content-type': 'application/json' }
    const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }) })
    const body = (await response.json()) as { result?: T; error?: { message: string } }
    if (body.error) throw new Error(`${method}: ${body.error.message}`)
    return body.result as T
  }
}

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!condition()) {
    if (performance.now() > deadline) throw new Error('timed out waiting for the feed')
    await sleep(POLL_MS)
  }
}

const min = (a: bigint, b: bigint) => (a < b ? a : b)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
