import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { brotliDecompressSync } from 'node:zlib'
import { type Address, type Hash, type Hex, keccak256, parseGwei } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { WebSocket } from 'ws'
import { type Devnet, startDevnet } from './devnet.js'
import type { FlashblockWireMessage } from '../pending/message.js'
import { PRECONFIRMED_BLOCK_HASH } from './node-view.js'

/** Base's timing, the devnet's defaults. */
const TICKS_PER_BLOCK = 10
const FLASHBLOCK_INTERVAL_MS = 200
const LATENCY_SAMPLES = 6
/** Spacing between consecutive messages may wobble by this much around the interval. */
const CADENCE_TOLERANCE_MS = 60
const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk'
const POLL_MS = 10

type Frame = { message: FlashblockWireMessage; at: number; isBinary: boolean }
type Feed = { frames: Frame[]; socket: WebSocket }

describe('devnet with Base timing (2 s blocks, 200 ms flashblocks)', () => {
  let devnet: Devnet
  let feed: Feed
  let rpc: ReturnType<typeof createRawRpc>
  let accounts: Address[]

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0, flashblocksPort: 0 })
    feed = await connect(devnet.flashblocksUrl)
    rpc = createRawRpc(devnet.rpcUrl)
    accounts = await rpc<Address[]>('eth_accounts')
  })
  afterAll(async () => {
    feed?.socket.close()
    await devnet?.stop()
  })

  test("one message per tick in Base's current format: index 0 opens each block with base, then one more per tick, empty ticks included", async () => {
    // Two whole blocks after the first index 0 seen (the connection may have started mid-block).
    const firstOpen = () => feed.frames.findIndex(({ message }) => message.index === 0)
    await waitFor(() => firstOpen() >= 0 && feed.frames.length - firstOpen() >= 2 * TICKS_PER_BLOCK)
    const frames = feed.frames.slice(firstOpen(), firstOpen() + 2 * TICKS_PER_BLOCK)
    const [first, second] = [frames.slice(0, TICKS_PER_BLOCK), frames.slice(TICKS_PER_BLOCK)]

    for (const block of [first, second]) {
      expect(block.map(({ message }) => message.index)).toEqual([...Array(TICKS_PER_BLOCK).keys()])
      expect(block.map(({ message }) => message.base !== undefined)).toEqual([true, ...Array(TICKS_PER_BLOCK - 1).fill(false)])
      expect(new Set(block.map(({ message }) => message.payload_id)).size).toBe(1)
      expect(new Set(block.map(({ message }) => message.metadata.block_number)).size).toBe(1)
      expect(block[0]!.message.payload_id).toMatch(/^0x[0-9a-f]{16}$/)
      expect(block.every(({ isBinary }) => isBinary)).toBe(true)
      // Since Azul: no receipts, no balances; and, as Base's builder sends today, the flashblock each one follows.
      for (const { message } of block)
        expect(message.metadata).toEqual({ block_number: message.metadata.block_number, access_list: null, prev_flashblock_id: expect.any(String) })
      // As Base's builder: no state root per flashblock, and a block_hash of each flashblock's own.
      expect(block.every(({ message }) => message.diff.state_root === `0x${'00'.repeat(32)}`)).toBe(true)
      expect(block.every(({ message }) => message.diff.blob_gas_used === '0x0')).toBe(true)
    }
    // Nothing was sent: these are empty ticks, still one message each.
    expect(frames.every(({ message }) => message.diff.transactions.length === 0)).toBe(true)
    expect(second[0]!.message.metadata.block_number).toBe(first[0]!.message.metadata.block_number + 1)
    expect(second[0]!.message.payload_id).not.toBe(first[0]!.message.payload_id)
    // Each flashblock names the one before it, across the blocks too.
    frames.slice(1).forEach(({ message }, i) => {
      const before = frames[i]!.message
      expect(message.metadata.prev_flashblock_id).toBe(`${before.metadata.block_number}-${before.index}`)
    })
    // The next block is built on the sealed one, whose hash no flashblock carried: each has a block_hash of its own.
    const sealedFirst = await rpc<{ hash: Hash }>('eth_getBlockByNumber', [`0x${first[0]!.message.metadata.block_number.toString(16)}`, false])
    expect(second[0]!.message.base!.parent_hash).toBe(sealedFirst.hash)
    const frameHashes = frames.map(({ message }) => message.diff.block_hash)
    expect(new Set(frameHashes).size).toBe(frames.length)
    expect(frameHashes).not.toContain(sealedFirst.hash)
    expect(BigInt(second[0]!.message.base!.timestamp) - BigInt(first[0]!.message.base!.timestamp)).toBe(2n)

    const gaps = frames.slice(1).map((frame, i) => frame.at - frames[i]!.at)
    const medianGap = gaps.sort((a, b) => a - b)[gaps.length >> 1]!
    expect(Math.abs(medianGap - FLASHBLOCK_INTERVAL_MS)).toBeLessThan(CADENCE_TOLERANCE_MS)
  })

  // The position of the frame is what is checked, not the milliseconds: a loaded machine delays ticks (the
  // latency itself is measured by `npm run bench`).
  test('a transaction sent mid-slot is in the next flashblock', async () => {
    for (let sample = 0; sample < LATENCY_SAMPLES; sample++) {
      // Mid-interval, at varied points: 60 to 140 ms after a flashblock arrived.
      const count = feed.frames.length
      await waitFor(() => feed.frames.length > count)
      await sleep(60 + ((sample * 29) % 80))
      const sentAt = performance.now()
      const hash = await rpc<Hash>('eth_sendTransaction', [{ from: accounts[sample % 3], to: accounts[9], value: '0x1' }])
      const framesWhenAnswered = feed.frames.length
      await waitFor(() => feed.frames.some(({ message }) => announces(message, hash)))
      const position = feed.frames.findIndex(({ message }) => announces(message, hash))
      // The next tick's message; one sent just before the answer may still have been on its way.
      expect(position, `sent ${Math.round(performance.now() - sentAt)} ms ago`).toBeLessThanOrEqual(framesWhenAnswered + 1)
      expect(Object.keys(feed.frames[position]!.message.metadata).sort()).toEqual(['access_list', 'block_number', 'prev_flashblock_id'])
    }
  })

  test('a transaction that would replace a pre-confirmed one is refused with "nonce too low"', async () => {
    const account = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: 6 })
    const chainId = Number(await rpc<Hex>('eth_chainId'))
    const nonce = Number(await rpc<Hex>('eth_getTransactionCount', [account.address, 'pending']))
    const sign = (value: bigint, maxFeePerGas: bigint) =>
      account.signTransaction({ chainId, nonce, to: accounts[9], value, gas: 21_000n, maxFeePerGas, maxPriorityFeePerGas: 1n })
    // Right after a block is sealed, so that the whole next slot is left to try the replacement in.
    await waitFor(() => feed.frames.at(-1)?.message.index === TICKS_PER_BLOCK - 1)
    const original = await rpc<Hash>('eth_sendRawTransaction', [await sign(1n, parseGwei('10'))])
    await waitFor(() => feed.frames.some(({ message }) => announces(message, original)))

    // A higher fee would make anvil's pool swap it in, and the sealed block would contradict the feed.
    // anvil checks it against the pre-confirmed state, so it refuses it in its own words.
    const replacement = await sign(2n, parseGwei('50'))
    expect(BigInt(await rpc<Hex>('eth_blockNumber'))).toBeLessThan(
      BigInt((await rpc<{ blockNumber: Hex }>('eth_getTransactionReceipt', [original])).blockNumber),
    )
    await expect(rpc('eth_sendRawTransaction', [replacement])).rejects.toThrow(/-32003 nonce too low/)
    await expect(rpc('eth_sendRawTransactionSync', [replacement])).rejects.toThrow(/-32003 nonce too low/)
    await waitFor(() => sealedIn(feed, original))
    const receipt = await rpc<{ transactionHash: Hash } | null>('eth_getTransactionReceipt', [original])
    expect(receipt?.transactionHash).toBe(original)
    expect(await rpc('eth_getTransactionReceipt', [keccak256(replacement)])).toBeNull()
  })

  test('eth_sendRawTransactionSync answers with the pre-confirmed receipt (zero block hash) a flashblock later, long before the block seals', async () => {
    const account = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: 8 })
    const chainId = Number(await rpc<Hex>('eth_chainId'))
    const nonce = Number(await rpc<Hex>('eth_getTransactionCount', [account.address, 'pending']))
    const raw = await account.signTransaction({
      chainId,
      nonce,
      to: accounts[9],
      value: 1n,
      gas: 21_000n,
      maxFeePerGas: parseGwei('10'),
      maxPriorityFeePerGas: 1n,
    })
    // Right after a block opens: the block seals ~1.8 s later.
    await waitFor(() => feed.frames.at(-1)?.message.index === 0)
    const sentAt = performance.now()
    const receipt = await rpc<{ transactionHash: Hash; status: Hex; blockHash: Hash; blockNumber: Hex }>('eth_sendRawTransactionSync', [raw])
    const elapsed = performance.now() - sentAt
    const sealedHead = await rpc<Hex>('eth_blockNumber')
    expect(receipt).toMatchObject({ transactionHash: keccak256(raw), status: '0x1', blockHash: PRECONFIRMED_BLOCK_HASH })
    // Answered before its block sealed: the sealed head is still the block before.
    expect(elapsed).toBeLessThan(TICKS_PER_BLOCK * FLASHBLOCK_INTERVAL_MS)
    expect(BigInt(sealedHead)).toBe(BigInt(receipt.blockNumber) - 1n)

    await waitFor(() => sealedIn(feed, keccak256(raw)))
    const sealed = await rpc<{ blockHash: Hash }>('eth_getTransactionReceipt', [keccak256(raw)])
    expect(sealed.blockHash).not.toBe(PRECONFIRMED_BLOCK_HASH)
    expect({ ...receipt, blockHash: sealed.blockHash }).toEqual(sealed)
  })

  test('eth_sendRawTransactionSync: a transaction not included in time is EIP-7966 error 4 with its hash; the timeout may be hex', async () => {
    const account = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: 5 })
    const chainId = Number(await rpc<Hex>('eth_chainId'))
    const nonce = Number(await rpc<Hex>('eth_getTransactionCount', [account.address, 'pending']))
    // A nonce gap: accepted into the pool, never included.
    const raw = await account.signTransaction({
      chainId,
      nonce: nonce + 1,
      to: accounts[9],
      value: 1n,
      gas: 21_000n,
      maxFeePerGas: parseGwei('10'),
      maxPriorityFeePerGas: 1n,
    })
    const post = async (params: unknown[]) =>
      (await (
        await fetch(devnet.rpcUrl, { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_sendRawTransactionSync', params }) })
      ).json()) as { error?: { code: number; data?: unknown } }
    const startedAt = performance.now()
    const { error } = await post([raw, '0x190']) // 400 ms
    expect(error).toMatchObject({ code: 4, data: keccak256(raw) })
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(390)
    expect((await post([raw, 'soon'])).error?.code).toBe(-32602)
  })

  test('JSON-RPC: batches answer in order, bad JSON is a parse error, unknown calls reach anvil', async () => {
    const post = async (body: string) => (await fetch(devnet.rpcUrl, { method: 'POST', body })).json()
    expect(await post('{not json')).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } })
    expect(await post('{"id":1}')).toMatchObject({ id: 1, error: { code: -32600 } })
    const batch = (await post(
      JSON.stringify([
        { jsonrpc: '2.0', id: 'a', method: 'eth_chainId' },
        { jsonrpc: '2.0', id: 'b', method: 'eth_blockNumber' },
        { jsonrpc: '2.0', id: 'c', method: 'no_such_method' },
      ]),
    )) as { id: string; result?: unknown; error?: unknown }[]
    expect(batch.map(({ id }) => id)).toEqual(['a', 'b', 'c'])
    expect(batch[0]!.result).toBe('0x7a69')
    expect(batch[2]!.error).toBeDefined()
  })

  test('a block mined around the sequencer (evm_mine through the RPC) voids the open block; the next message opens a new one', async () => {
    await waitFor(() => (feed.frames.at(-1)?.message.index ?? 0) >= 3)
    await rpc('evm_mine')
    const count = feed.frames.length
    const mined = await rpc<{ hash: Hash; number: Hex }>('eth_getBlockByNumber', ['latest', false])
    const opening = () => feed.frames.slice(count).findIndex(({ message }) => message.index === 0)
    await waitFor(() => opening() !== -1)
    // Only a tick already under way when the block was mined may still send a flashblock of the void
    // block (or seal it on top of the mined one): the next after that opens a new block.
    expect(opening()).toBeLessThanOrEqual(1)
    const next = feed.frames[count + opening()]!.message
    expect(next.metadata.block_number).toBeGreaterThan(Number(mined.number))
    const parent = await rpc<{ hash: Hash }>('eth_getBlockByNumber', [`0x${(next.metadata.block_number - 1).toString(16)}`, false])
    expect(next.base?.parent_hash).toBe(parent.hash)
  })
})

describe('devnet lifecycle', () => {
  test('refuses a block time that is not a whole number of flashblock intervals, starting nothing', async () => {
    const before = childAnvils()
    await expect(startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 300 })).rejects.toThrow(/multiple/)
    expect(childAnvils()).toEqual(before)
  })

  test("plain: true sends JSON text frames, feedFormat: 'legacy' the older metadata; stop() leaves no anvil and no open port", async () => {
    const before = childAnvils()
    const devnet = await startDevnet({ port: 0, flashblocksPort: 0, plain: true, feedFormat: 'legacy', blockTimeMs: 500, flashblockIntervalMs: 100 })
    const started = childAnvils().filter((pid) => !before.includes(pid))
    if (process.platform === 'linux') expect(started).toHaveLength(1)

    const feed = await connect(devnet.flashblocksUrl)
    await waitFor(() => feed.frames.length >= 3)
    expect(feed.frames.every(({ isBinary }) => !isBinary)).toBe(true)
    expect(feed.frames.every(({ message }) => typeof message.metadata.block_number === 'number')).toBe(true)
    // Receipts and balances (sequencer.test.ts checks their content), no access_list, no blob_gas_used.
    for (const { message } of feed.frames) {
      expect(Object.keys(message.metadata).sort()).toEqual(['block_number', 'new_account_balances', 'receipts'])
      expect(message.diff.blob_gas_used).toBeUndefined()
    }

    const disconnected = new Promise((resolve) => feed.socket.once('close', resolve))
    await devnet.stop()
    await disconnected
    for (const pid of started) expect(existsSync(`/proc/${pid}`)).toBe(false)
    await expect(fetch(devnet.rpcUrl, { method: 'POST', body: '{}' })).rejects.toThrow()
    await expect(fetch(devnet.anvilRpcUrl, { method: 'POST', body: '{}' })).rejects.toThrow()
    await expect(connect(devnet.flashblocksUrl)).rejects.toThrow(/ECONNREFUSED/)
    await devnet.stop() // idempotent
  })
})

// --- helpers -------------------------------------------------------------------------------------------

function announces(message: FlashblockWireMessage, hash: Hash): boolean {
  return message.diff.transactions.some((raw) => keccak256(raw) === hash)
}

/** True once the block holding `hash` has had its sealing flashblock. */
function sealedIn(feed: Feed, hash: Hash): boolean {
  const announcing = feed.frames.find(({ message }) => announces(message, hash))?.message
  return feed.frames.some(({ message }) => message.payload_id === announcing?.payload_id && message.index === TICKS_PER_BLOCK - 1)
}

async function connect(url: string): Promise<Feed> {
  const frames: Frame[] = []
  const socket = new WebSocket(url)
  socket.on('message', (data: Buffer, isBinary) => {
    const text = isBinary ? brotliDecompressSync(data).toString('utf8') : data.toString('utf8')
    frames.push({ message: JSON.parse(text) as FlashblockWireMessage, at: performance.now(), isBinary })
  })
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  return { frames, socket }
}

function createRawRpc(url: string) {
  let id = 0
  return async <T = unknown>(method: string, params: unknown[] = []): Promise<T> => {
    const response = await fetch(url, { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }) })
    const body = (await response.json()) as { result?: T; error?: { code: number; message: string } }
    if (body.error) throw new Error(`${method}: ${body.error.code} ${body.error.message}`)
    return body.result as T
  }
}

/** anvil processes started by this test process (Linux; elsewhere an empty list). */
function childAnvils(): number[] {
  if (process.platform !== 'linux') return []
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((pid) => {
      try {
        // "pid (comm) state ppid ..."; comm may hold spaces, so split after its closing parenthesis.
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
        return comm === 'anvil' && ppid === process.pid ? [Number(pid)] : []
      } catch {
        return [] // exited while listing
      }
    })
}

async function waitFor(condition: () => boolean, timeoutMs = 8_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!condition()) {
    if (performance.now() > deadline) throw new Error('timed out waiting for the feed')
    await sleep(POLL_MS)
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
