import { brotliDecompressSync } from 'node:zlib'
import {
  type Address,
  type Hash,
  type Hex,
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  getAddress,
  http,
  keccak256,
  pad,
  parseGwei,
  toHex,
} from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { WebSocket } from 'ws'
import { TOKEN_DEPLOY_BYTECODE, deployToken, tokenAbi } from './contracts.js'
import { type Devnet, startDevnet } from './devnet.js'
import type { FlashblockWireMessage } from '../pending/message.js'
import { PRECONFIRMED_BLOCK_HASH } from './node-view.js'

// The devnet's JSON-RPC answers as a flashblocks-aware Base node (DESIGN.md §6): every pre-confirmed answer
// equals the sealed block's once it seals, block hash aside, while `latest` stays on the sealed head. The
// feed is Base's current one (no receipts in the frames): everything checked here is read from the RPC.
const BLOCK_TIME_MS = 1_000
const FLASHBLOCK_INTERVAL_MS = 100
const TICKS_PER_BLOCK = BLOCK_TIME_MS / FLASHBLOCK_INTERVAL_MS
/** Blocks with traffic, and rounds of sends per block (each round in its own flashblock). */
const TRAFFIC_BLOCKS = 3
const ROUNDS_PER_BLOCK = 3
const CALL_GAS = 150_000n
const DEPLOY_GAS = 1_000_000n
const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk'
const POLL_MS = 10

type RpcObject = Record<string, unknown>
type RawTransaction = RpcObject & { hash: Hash; blockHash: Hash | null }
type RawBlock<T = Hash> = RpcObject & { hash: Hash; number: Hex; parentHash: Hash; miner: Address; transactions: T[] }
type RawLog = RpcObject & { blockHash: Hash; blockNumber: Hex }
type RawReceipt = RpcObject & { transactionHash: Hash; blockHash: Hash; blockNumber: Hex; status: Hex; contractAddress: Address | null; logs: RawLog[] }
type Call = [method: string, params: unknown[]]

/** What the devnet answered in one batch: one consistent view (a batch never straddles a tick). */
type Snapshot = {
  sealedHead: Hex
  latest: RawBlock
  pending: RawBlock<RawTransaction>
  pendingReceipts: RawReceipt[]
  receipts: Map<Hash, RawReceipt | null>
  transactions: Map<Hash, RawTransaction | null>
  balances: Map<Address, Hex>
  nonces: Map<Address, Hex>
  tokenBalances: Map<Address, Hex>
}

let devnet: Devnet
let feed: { messages: FlashblockWireMessage[]; onMessage: (listener: (message: FlashblockWireMessage) => void) => void; close: () => void }
let rpc: <T>(method: string, params?: unknown[]) => Promise<T>
let batch: (calls: Call[]) => Promise<{ result?: unknown; error?: { code: number; message: string } }[]>

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: BLOCK_TIME_MS, flashblockIntervalMs: FLASHBLOCK_INTERVAL_MS })
  feed = await collectFlashblocks(devnet.flashblocksUrl)
  batch = createBatchRpc(devnet.rpcUrl)
  rpc = async <T>(method: string, params: unknown[] = []) => {
    const [answer] = await batch([[method, params]])
    if (answer!.error) throw new Error(`${method}: ${answer!.error.code} ${answer!.error.message}`)
    return answer!.result as T
  }
})

afterAll(async () => {
  feed?.close()
  await devnet?.stop()
})

describe('pre-confirmed answers (pending) equal the sealed ones', () => {
  test('receipts, transactions, the pending block and its receipts, balances, nonces and a token balance at pending equal the sealed block’s once it seals; latest stays on the sealed head', async () => {
    const transport = http(devnet.rpcUrl)
    const client = createPublicClient({ transport, pollingInterval: POLL_MS })
    const wallet = createWalletClient({ transport })
    const accounts = await wallet.getAddresses()
    const [deployer, ...senders] = accounts.slice(0, 5) as [Address, ...Address[]]
    const token = await deployToken(createWalletClient({ transport, account: deployer }), client)
    const local = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: 7 })
    const chainId = await client.getChainId()
    let localNonce = Number(await rpc<Hex>('eth_getTransactionCount', [local.address, 'pending']))
    const derived = (label: string) => getAddress(keccak256(toHex(label)).slice(0, 42))
    const holders = [0, 1, 2].map((i) => derived(`holder-${i}`))
    const fresh = Array.from({ length: TRAFFIC_BLOCKS * ROUNDS_PER_BLOCK + 1 }, (_, i) => derived(`fresh-${i}`))
    const { miner } = await rpc<RawBlock>('eth_getBlockByNumber', ['latest', false])
    const watched = [deployer, ...senders, local.address, miner, ...fresh]

    const hashes: Hash[] = []
    const snapshots: Promise<Snapshot>[] = []
    let snapshotting = true
    feed.onMessage(() => {
      if (snapshotting) snapshots.push(takeSnapshot([...hashes], watched, holders, token))
    })

    const call = (from: Address, data: Hex) => wallet.sendTransaction({ account: from, chain: null, to: token, data, gas: CALL_GAS })
    for (let block = 0; block < TRAFFIC_BLOCKS; block++) {
      await nextFlashblock((message) => message.index === 0)
      for (let round = 0; round < ROUNDS_PER_BLOCK; round++) {
        const g = block * ROUNDS_PER_BLOCK + round
        const sends: Promise<Hash>[] = [
          wallet.sendTransaction({ account: senders[g % 4]!, chain: null, to: fresh[g]!, value: BigInt(g + 1) * 10n ** 12n }),
          call(senders[(g + 1) % 4]!, encodeFunctionData({ abi: tokenAbi, functionName: 'mint', args: [holders[g % 3]!, BigInt(g + 1)] })),
          call(senders[(g + 2) % 4]!, encodeFunctionData({ abi: tokenAbi, functionName: 'multi', args: [accounts[5]!, BigInt(2 + (g % 3))] })),
        ]
        // transfer(to, 0) reverts with Error("zero amount"); explicit gas keeps it from failing estimation.
        if (g % 3 === 1) sends.push(call(senders[(g + 3) % 4]!, encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [accounts[6]!, 0n] })))
        if (g % 3 === 2) sends.push(wallet.deployContract({ account: deployer, chain: null, abi: tokenAbi, bytecode: TOKEN_DEPLOY_BYTECODE, gas: DEPLOY_GAS }))
        const fees =
          g % 2 === 0 ? { type: 'legacy' as const, gasPrice: parseGwei('3') } : { maxFeePerGas: parseGwei('5'), maxPriorityFeePerGas: BigInt(g) * 1_000_000n }
        const raw = await local.signTransaction({ chainId, to: fresh[g + 1]!, value: 10n ** 12n, gas: 21_000n, nonce: localNonce++, ...fees })
        sends.push(rpc<Hash>('eth_sendRawTransaction', [raw]))
        const sent = await Promise.all(sends)
        hashes.push(...sent)
        // The next round goes into a later flashblock.
        await waitFor(() => sent.every((hash) => feed.messages.some((message) => announces(message, hash))))
      }
    }
    const lastBlock = feed.messages.find((message) => announces(message, hashes.at(-1)!))!.metadata.block_number
    await waitFor(() => feed.messages.some((message) => message.metadata.block_number === lastBlock && message.index === TICKS_PER_BLOCK - 1))
    snapshotting = false
    const views = await Promise.all(snapshots)

    const sealedBlocks = new Map<bigint, Promise<[RawBlock<RawTransaction>, RawReceipt[]]>>()
    const sealed = (number: bigint) => {
      if (!sealedBlocks.has(number)) {
        sealedBlocks.set(
          number,
          Promise.all([
            rpc<RawBlock<RawTransaction>>('eth_getBlockByNumber', [toHex(number), true]),
            rpc<RawReceipt[]>('eth_getBlockReceipts', [toHex(number)]),
          ]),
        )
      }
      return sealedBlocks.get(number)!
    }
    const finalReceipts = new Map(await Promise.all(hashes.map(async (hash) => [hash, await rpc<RawReceipt>('eth_getTransactionReceipt', [hash])] as const)))
    const finalTransactions = new Map(
      await Promise.all(hashes.map(async (hash) => [hash, await rpc<RawTransaction>('eth_getTransactionByHash', [hash])] as const)),
    )
    expect([...finalReceipts.values()].some((receipt) => receipt.status === '0x0')).toBe(true)
    expect([...finalReceipts.values()].some((receipt) => receipt.contractAddress !== null)).toBe(true)

    let complete = 0
    let partial = 0
    let preconfirmedReceipts = 0
    for (const view of views) {
      const head = BigInt(view.sealedHead)
      const pendingNumber = BigInt(view.pending.number)
      // latest and eth_blockNumber show the sealed head, a block that is still in the chain.
      expect(BigInt(view.latest.number)).toBe(head)
      expect((await rpc<RawBlock>('eth_getBlockByNumber', [view.latest.number, false])).hash).toBe(view.latest.hash)
      if (pendingNumber === head) {
        // Sealed, the next block not opened yet: pending is latest, every receipt a sealed one.
        expect(view.pending.hash).toBe(view.latest.hash)
        for (const [hash, receipt] of view.receipts) if (receipt !== null) expect(receipt).toEqual(finalReceipts.get(hash))
        continue
      }
      expect(pendingNumber).toBe(head + 1n)
      expect(view.pending.parentHash).toBe(view.latest.hash)
      // The feed announced it (by number: as Base's builder, the feed's block_hash is each flashblock's own, not the block's).
      expect(feed.messages.some((message) => message.metadata.block_number === Number(pendingNumber))).toBe(true)

      const [block, blockReceipts] = await sealed(pendingNumber)
      const count = view.pending.transactions.length
      const preconfirmed = view.pending.transactions.map((tx) => tx.hash)
      expect(preconfirmed).toEqual(block.transactions.slice(0, count).map((tx) => tx.hash))
      expect(view.pending.transactions).toEqual(block.transactions.slice(0, count).map((tx) => ({ ...tx, blockHash: null })))
      expect(view.pendingReceipts).toEqual(blockReceipts.slice(0, count).map(asPreconfirmed))

      for (const [hash, receipt] of view.receipts) {
        const transaction = view.transactions.get(hash)
        if (preconfirmed.includes(hash)) {
          expect(receipt, `pre-confirmed receipt of ${hash}`).toEqual(asPreconfirmed(finalReceipts.get(hash)!))
          expect(transaction).toEqual({ ...finalTransactions.get(hash), blockHash: null })
          preconfirmedReceipts++
        } else if (receipt !== null) {
          expect(BigInt(receipt.blockNumber)).toBeLessThanOrEqual(head)
          expect(receipt).toEqual(finalReceipts.get(hash))
        } else {
          // Not in a flashblock yet: in the pool, in no block.
          expect(BigInt(finalReceipts.get(hash)!.blockNumber)).toBeGreaterThan(head)
          expect(transaction?.blockHash ?? null).toBeNull()
        }
      }

      if (count < block.transactions.length) {
        // A prefix of the block: the header fields its transactions do not change are the sealed ones.
        for (const field of ['parentHash', 'number', 'timestamp', 'baseFeePerGas', 'miner', 'gasLimit', 'mixHash', 'extraData', 'parentBeaconBlockRoot']) {
          expect(view.pending[field], field).toEqual(block[field])
        }
        partial++
        continue
      }
      // Every transaction of the block pre-confirmed: the block and the state at pending are the sealed ones.
      expect({ ...view.pending, hash: block.hash, transactions: block.transactions }).toEqual(block)
      for (const [address, balance] of view.balances) expect(balance, `balance of ${address}`).toBe(await rpc<Hex>('eth_getBalance', [address, block.number]))
      for (const [address, nonce] of view.nonces) expect(nonce, `nonce of ${address}`).toBe(await rpc<Hex>('eth_getTransactionCount', [address, block.number]))
      for (const [holder, balance] of view.tokenBalances) {
        expect(balance, `token balance of ${holder}`).toBe(await rpc<Hex>('eth_call', [{ to: token, data: balanceOfData(holder) }, block.number]))
      }
      if (count > 0) complete++
    }
    // Every block with traffic was seen part-built and whole, before it sealed; every receipt pre-confirmed.
    expect(complete).toBeGreaterThanOrEqual(TRAFFIC_BLOCKS)
    expect(partial).toBeGreaterThanOrEqual(TRAFFIC_BLOCKS)
    expect(preconfirmedReceipts).toBeGreaterThanOrEqual(hashes.length)
  })

  test('block arguments: latest, safe, finalized and omitted read the sealed head; pending the pre-confirmed block; its number and hash are not a sealed block', async () => {
    const [sender] = await rpc<Address[]>('eth_accounts')
    const token = await deployFor(sender!)
    const holder = getAddress(keccak256(toHex('rules-holder')).slice(0, 42))
    await nextFlashblock((message) => message.index === 0)
    const mint = await rpc<Hash>('eth_sendTransaction', [
      { from: sender, to: token, data: encodeFunctionData({ abi: tokenAbi, functionName: 'mint', args: [holder, 42n] }), gas: toHex(CALL_GAS) },
    ])
    await waitFor(() => feed.messages.some((message) => announces(message, mint)))
    const pending = await rpc<RawBlock>('eth_getBlockByNumber', ['pending', false])
    const pendingNumber = BigInt(pending.number)
    const head = toHex(pendingNumber - 1n)
    const balanceOf = { to: token, data: balanceOfData(holder) }
    const slot = pad(holder, { size: 32 })
    const answers = await batch([
      ['eth_getBlockByNumber', ['pending', false]],
      ['eth_blockNumber', []],
      ['eth_getBlockByNumber', ['latest', false]],
      ['eth_getBlockByNumber', ['safe', false]],
      ['eth_getBlockByNumber', ['finalized', false]],
      ['eth_getBlockByNumber', [pending.number, false]],
      ['eth_getBlockByHash', [pending.hash, false]],
      ['eth_getBlockTransactionCountByHash', [pending.hash]],
      ['eth_getTransactionByBlockHashAndIndex', [pending.hash, '0x0']],
      ['eth_getBlockTransactionCountByNumber', ['pending']],
      ['eth_getTransactionByBlockNumberAndIndex', ['pending', '0x0']],
      ['eth_getBalance', [sender, pending.number]],
      ['eth_getBalance', [sender, { blockHash: pending.hash }]],
      ['eth_getBalance', [sender, { blockNumber: head }]],
      ['eth_getBalance', [sender, 'latest']],
      ['eth_getBalance', [sender]],
      ['eth_getBalance', [sender, 'pending']],
      ['eth_getTransactionCount', [sender]],
      ['eth_getTransactionCount', [sender, 'pending']],
      ['eth_call', [balanceOf]],
      ['eth_call', [balanceOf, 'pending']],
      ['eth_getStorageAt', [token, slot]],
      ['eth_getStorageAt', [token, slot, 'pending']],
      ['eth_getProof', [token, [slot], 'pending']],
      ['eth_getLogs', [{ fromBlock: '0x0', address: token }]],
      ['eth_getLogs', [{ fromBlock: '0x0', toBlock: pending.number, address: token }]],
      ['eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending', address: token }]],
      ['eth_getLogs', [{ blockHash: pending.hash }]],
      ['eth_feeHistory', ['0x1', 'latest', []]],
      ['eth_feeHistory', ['0x1', 'pending', []]],
      ['eth_feeHistory', ['0x1', pending.number, []]],
      ['eth_getBlockReceipts', ['latest']],
      ['eth_getBlockReceipts', [head]],
      ['eth_getBlockReceipts', [pending.hash]],
      ['debug_traceBlockByNumber', ['pending', { tracer: 'callTracer' }]],
      ['debug_traceBlockByNumber', [pending.number, { tracer: 'callTracer' }]],
      ['debug_traceCall', [balanceOf, 'pending', { tracer: 'callTracer' }]],
      ['debug_traceCall', [balanceOf, 'latest', { tracer: 'callTracer' }]],
      ['eth_simulateV1', [{ blockStateCalls: [{ calls: [balanceOf] }] }, 'pending']],
      ['eth_simulateV1', [{ blockStateCalls: [{ calls: [balanceOf] }] }]],
    ])
    const [
      again,
      blockNumber,
      latest,
      safe,
      finalized,
      byNumber,
      byHash,
      countByHash,
      txByHash,
      countPending,
      txPending,
      balanceAtNumber,
      balanceAtHash,
      balanceAtHead,
      balanceLatest,
      balanceOmitted,
      balancePending,
      nonceOmitted,
      noncePending,
      callOmitted,
      callPending,
      storageOmitted,
      storagePending,
      proofPending,
      logsLatest,
      logsToPendingNumber,
      logsPending,
      logsByHash,
      feesLatest,
      feesPending,
      feesToPendingNumber,
      receiptsLatest,
      receiptsHead,
      receiptsByHash,
      tracePending,
      traceByNumber,
      traceCallPending,
      traceCallLatest,
      simulatePending,
      simulateOmitted,
    ] = answers
    // The same pre-confirmed block all along (nothing else was sent).
    expect((again!.result as RawBlock).hash).toBe(pending.hash)

    expect(blockNumber!.result).toBe(head)
    expect((latest!.result as RawBlock).number).toBe(head)
    // anvil's safe and finalized are one and two epochs of 32 blocks below the head.
    expect((safe!.result as RawBlock).number).toBe(toHex(max(0n, pendingNumber - 1n - 32n)))
    expect((finalized!.result as RawBlock).number).toBe(toHex(max(0n, pendingNumber - 1n - 64n)))
    expect(byNumber!.result).toBeNull()
    expect(byHash!.result).toBeNull()
    expect(countByHash!.result).toBeNull()
    expect(txByHash!.result).toBeNull()
    expect(Number(countPending!.result)).toBeGreaterThanOrEqual(1)
    expect((txPending!.result as RawTransaction).blockHash).toBeNull()
    expect(balanceAtNumber!.error?.message).toBe(`BlockOutOfRangeError: block height is ${pendingNumber - 1n} but requested was ${pendingNumber}`)
    // Not a parameter error (-32602): the block is unknown, as anvil says of a hash it has not sealed.
    expect(balanceAtHash!.error).toMatchObject({ code: -32001 })
    expect(balanceAtHead!.result).toBe(balanceLatest!.result)
    expect(balanceOmitted!.result).toBe(balanceLatest!.result)
    expect(BigInt(balancePending!.result as Hex)).toBeLessThan(BigInt(balanceLatest!.result as Hex)) // the mint's gas
    expect(BigInt(noncePending!.result as Hex)).toBe(BigInt(nonceOmitted!.result as Hex) + 1n)
    expect(BigInt(callOmitted!.result as Hex)).toBe(0n)
    expect(BigInt(callPending!.result as Hex)).toBe(42n)
    expect(BigInt(storageOmitted!.result as Hex)).toBe(0n)
    expect(BigInt(storagePending!.result as Hex)).toBe(42n)
    expect((proofPending!.result as { storageProof: { value: Hex }[] }).storageProof[0]!.value).toBe('0x2a')
    // Logs: the sealed range ends at the sealed head, even when asked for the pending number.
    const mintLogs = (logs: unknown) => (logs as RawLog[]).filter((log) => log.transactionHash === mint)
    expect(mintLogs(logsLatest!.result)).toEqual([])
    expect(logsToPendingNumber!.result).toEqual(logsLatest!.result)
    expect(mintLogs(logsPending!.result)).toHaveLength(1)
    expect(mintLogs(logsPending!.result)[0]).toMatchObject({ blockHash: PRECONFIRMED_BLOCK_HASH, blockNumber: pending.number })
    expect(logsByHash!.error).toMatchObject({ code: -32000, message: 'unknown block' })
    expect((feesLatest!.result as { oldestBlock: Hex }).oldestBlock).toBe(head)
    expect((feesPending!.result as { oldestBlock: Hex }).oldestBlock).toBe(pending.number)
    expect(feesToPendingNumber!.result).toEqual(feesLatest!.result)
    expect(receiptsLatest!.result).toEqual(receiptsHead!.result)
    expect(receiptsByHash!.result).toBeNull()
    expect(tracePending!.result).toHaveLength(Number(countPending!.result))
    expect(traceByNumber!.error).toMatchObject({ code: -32001 })
    expect(BigInt((traceCallPending!.result as { output: Hex }).output)).toBe(42n)
    expect(BigInt((traceCallLatest!.result as { output: Hex }).output)).toBe(0n)
    const simulated = (answer: typeof simulatePending) => BigInt((answer!.result as { calls: { returnData: Hex }[] }[])[0]!.calls[0]!.returnData)
    expect(simulated(simulatePending)).toBe(42n)
    expect(simulated(simulateOmitted)).toBe(0n)
  })
})

// --- helpers -------------------------------------------------------------------------------------------

async function deployFor(from: Address): Promise<Address> {
  const hash = await rpc<Hash>('eth_sendTransaction', [{ from, data: TOKEN_DEPLOY_BYTECODE, gas: toHex(DEPLOY_GAS) }])
  await waitFor(() => feed.messages.some((message) => announces(message, hash)))
  return (await rpc<RawReceipt>('eth_getTransactionReceipt', [hash])).contractAddress!
}

async function takeSnapshot(hashes: Hash[], watched: Address[], holders: Address[], token: Address): Promise<Snapshot> {
  const calls: Call[] = [
    ['eth_blockNumber', []],
    ['eth_getBlockByNumber', ['latest', false]],
    ['eth_getBlockByNumber', ['pending', true]],
    ['eth_getBlockReceipts', ['pending']],
    ...hashes.map((hash): Call => ['eth_getTransactionReceipt', [hash]]),
    ...hashes.map((hash): Call => ['eth_getTransactionByHash', [hash]]),
    ...watched.map((address): Call => ['eth_getBalance', [address, 'pending']]),
    ...watched.map((address): Call => ['eth_getTransactionCount', [address, 'pending']]),
    ...holders.map((holder): Call => ['eth_call', [{ to: token, data: balanceOfData(holder) }, 'pending']]),
  ]
  const answers = await batch(calls)
  for (const [i, answer] of answers.entries()) if (answer.error) throw new Error(`${calls[i]![0]}: ${answer.error.message}`)
  const results = answers.map((answer) => answer.result)
  let at = 4
  const take = <K, V>(keys: K[]) => new Map(keys.map((key) => [key, results[at++] as V]))
  return {
    sealedHead: results[0] as Hex,
    latest: results[1] as RawBlock,
    pending: results[2] as RawBlock<RawTransaction>,
    pendingReceipts: results[3] as RawReceipt[],
    receipts: take<Hash, RawReceipt | null>(hashes),
    transactions: take<Hash, RawTransaction | null>(hashes),
    balances: take<Address, Hex>(watched),
    nonces: take<Address, Hex>(watched),
    tokenBalances: take<Address, Hex>(holders),
  }
}

/** The sealed receipt as base-reth-node shows it while pre-confirmed: zero block hash, in its logs too. */
function asPreconfirmed(receipt: RawReceipt): RawReceipt {
  return { ...receipt, blockHash: PRECONFIRMED_BLOCK_HASH, logs: receipt.logs.map((log) => ({ ...log, blockHash: PRECONFIRMED_BLOCK_HASH })) }
}

function balanceOfData(holder: Address): Hex {
  return encodeFunctionData({ abi: tokenAbi, functionName: 'balanceOf', args: [holder] })
}

function announces(message: FlashblockWireMessage, hash: Hash): boolean {
  return message.diff.transactions.some((raw) => keccak256(raw) === hash)
}

async function nextFlashblock(matches: (message: FlashblockWireMessage) => boolean): Promise<void> {
  const seen = feed.messages.length
  await waitFor(() => feed.messages.slice(seen).some(matches))
}

async function collectFlashblocks(url: string): Promise<typeof feed> {
  const messages: FlashblockWireMessage[] = []
  const listeners: ((message: FlashblockWireMessage) => void)[] = []
  const socket = new WebSocket(url)
  socket.on('message', (data: Buffer, isBinary) => {
    const message = JSON.parse(isBinary ? brotliDecompressSync(data).toString('utf8') : data.toString('utf8')) as FlashblockWireMessage
    messages.push(message)
    for (const listener of listeners) listener(message)
  })
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  return { messages, onMessage: (listener) => listeners.push(listener), close: () => socket.close() }
}

/** A JSON-RPC batch, answers in call order: the devnet answers a batch's reads between two ticks. */
function createBatchRpc(url: string) {
  let id = 0
  return async (calls: Call[]) => {
    const first = id
    const body = calls.map(([method, params]) => ({ jsonrpc: '2.0', id: ++id, method, params }))
    const answers = (await (await fetch(url, { method: 'POST', body: JSON.stringify(body) })).json()) as {
      id: number
      result?: unknown
      error?: { code: number; message: string }
    }[]
    return answers
      .sort((a, b) => a.id - b.id)
      .map((answer, i) => {
        expect(answer.id).toBe(first + i + 1)
        return answer
      })
  }
}

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!condition()) {
    if (performance.now() > deadline) throw new Error('timed out waiting for the feed')
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
  }
}

const max = (a: bigint, b: bigint) => (a > b ? a : b)
