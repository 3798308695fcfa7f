// Real clients reading and watching through flashgate (issue 13, "Checked by"): viem, ethers 6 and web3 4,
// each with one instance pointed at flashgate and one at anvil, make the same calls on a generated chain and
// must parse the same results; their block and event streams over flashgate's WebSocket must equal those of
// anvil's own WebSocket while blocks are mined; foundry's `cast` prints the same through either. The one
// difference found: anvil's newHeads frames carry the block's `transactions` (hashes), flashgate's do not (as
// geth's header-only newHeads); viem and ethers never see it (viem refetches the block, ethers takes the number).
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { JsonRpcProvider, Network, WebSocketProvider } from 'ethers'
import { type Address, createPublicClient, encodeFunctionData, type Hash, http, type PublicClient, parseAbiItem, type Transport, webSocket } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { Web3, WebSocketProvider as Web3WebSocketProvider } from 'web3'
import { WebSocket } from 'ws'
import { tokenAbi } from '../src/devnet/contracts.js'
import { resolveCastBinary } from './fixtures/cast.js'
import type { Anvil } from './fixtures/anvil.js'
import { useFollowedChain } from './fixtures/followed-chain.js'
import type { TestGateway } from './fixtures/gateway.js'
import type { ChainFacts } from './fixtures/queries.js'
import { anvilCall, anvilReceipt, waitForSameHead } from './fixtures/sync.js'

const SEED = 1313
const BLOCKS = 24
const CHAIN_ID = 31337
/** Blocks mined, each with one token transfer, while the watchers listen. */
const WATCHED_BLOCKS = 4
/** Time for every client to have its subscription in place before the first watched block. */
const SUBSCRIBE_SETTLE_MS = 500
const CAST_TIMEOUT_MS = 15_000
const TRANSFER_EVENT = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)')
const SENDER: Address = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266'
const RECIPIENT: Address = `0x${'7e'.repeat(20)}`

const castBinary = resolveCastBinary()

const followed = useFollowedChain({ seed: SEED, blocks: BLOCKS })
let anvil: Anvil
let gateway: TestGateway
let facts: ChainFacts
/** Flashgate's dedicated endpoint over WebSocket (same port, same path). */
let gatewayWs: string
/** The block with the most logs, and one transaction of it that emitted some. */
let busy: { number: number; hash: Hash; logs: number; transaction: Hash; from: Address }
let token: Address

type Pair<client> = { flashgate: client; anvil: client }

beforeAll(async () => {
  const ready = followed()
  anvil = ready.anvil
  gateway = ready.gateway
  facts = ready.facts
  gatewayWs = gateway.dedicatedUrl.replace(/^http/, 'ws')
  await waitForSameHead(gateway, anvil.rpcUrl)
  const receipts = await Promise.all(
    facts.blockHashes.map((hash) => anvilCall<{ transactionHash: Hash; from: Address; logs: unknown[] }[]>(anvil.rpcUrl, 'eth_getBlockReceipts', [hash])),
  )
  const counts = receipts.map((block) => block.reduce((sum, receipt) => sum + receipt.logs.length, 0))
  const number = counts.indexOf(Math.max(...counts))
  const withLogs = receipts[number]!.find((receipt) => receipt.logs.length > 0)!
  busy = { number, hash: facts.blockHashes[number]!, logs: counts[number]!, transaction: withLogs.transactionHash, from: withLogs.from }
  token = facts.contracts[0]!
  expect(busy.logs).toBeGreaterThan(2)
})

/** Runs the same read through both instances of a client and expects the same parsed answer. */
async function same<client, value>(pair: Pair<client>, read: (client: client) => Promise<value>, label: string): Promise<value> {
  const [ours, theirs] = await Promise.all([read(pair.flashgate), read(pair.anvil)])
  expect(ours, label).toEqual(theirs)
  return theirs
}

function withoutTransactions(header: Record<string, unknown>): Record<string, unknown> {
  const { transactions: _transactions, ...rest } = header
  return rest
}

describe('viem: the same parsed answers through flashgate as from anvil', () => {
  let viem: Pair<PublicClient<Transport>>
  beforeAll(() => {
    viem = {
      flashgate: createPublicClient({ transport: http(gateway.dedicatedUrl, { retryCount: 0 }) }),
      anvil: createPublicClient({ transport: http(anvil.rpcUrl, { retryCount: 0 }) }),
    }
  })

  test('getBlock by number, hash and tag, with and without transactions', async () => {
    const block = await same(viem, (client) => client.getBlock({ blockNumber: BigInt(busy.number), includeTransactions: true }), 'by number')
    expect(block.transactions.length).toBeGreaterThan(0)
    await same(viem, (client) => client.getBlock({ blockHash: busy.hash }), 'by hash')
    await same(viem, (client) => client.getBlock({ blockHash: busy.hash, includeTransactions: true }), 'by hash, full')
    // flashgate learns the upstream's safe and finalized heads after a commit: wait until it has them.
    await expect
      .poll(
        () =>
          viem.flashgate.getBlock({ blockTag: 'finalized' }).then(
            () => true,
            () => false,
          ),
        { timeout: 10_000 },
      )
      .toBe(true)
    await expect
      .poll(
        () =>
          viem.flashgate.getBlock({ blockTag: 'safe' }).then(
            () => true,
            () => false,
          ),
        { timeout: 10_000 },
      )
      .toBe(true)
    for (const blockTag of ['latest', 'earliest', 'safe', 'finalized'] as const) await same(viem, (client) => client.getBlock({ blockTag }), blockTag)
    await same(viem, (client) => client.getBlockNumber({ cacheTime: 0 }), 'getBlockNumber')
  })

  test('getTransaction and getTransactionReceipt, by hash and by block and index', async () => {
    for (const hash of facts.transactionHashes.slice(0, 40)) {
      await same(viem, (client) => client.getTransaction({ hash }), `transaction ${hash}`)
      await same(viem, (client) => client.getTransactionReceipt({ hash }), `receipt ${hash}`)
    }
    await same(viem, (client) => client.getTransaction({ blockHash: busy.hash, index: 0 }), 'by block hash and index')
    await same(viem, (client) => client.getTransaction({ blockNumber: BigInt(busy.number), index: 0 }), 'by block number and index')
  })

  test('getLogs by address, event and topics, over ranges and a block hash', async () => {
    const all = await same(viem, (client) => client.getLogs({ fromBlock: 'earliest', toBlock: 'latest' }), 'whole chain')
    expect(all.length).toBeGreaterThan(busy.logs)
    const ofToken = await same(viem, (client) => client.getLogs({ address: token, fromBlock: 0n, toBlock: BigInt(facts.head) }), 'one address')
    expect(ofToken.length).toBeGreaterThan(0)
    await same(viem, (client) => client.getLogs({ address: facts.contracts, fromBlock: 1n, toBlock: BigInt(Math.min(facts.head, 12)) }), 'addresses, a range')
    const transfers = await same(viem, (client) => client.getLogs({ event: TRANSFER_EVENT, fromBlock: 'earliest' }), 'Transfer event')
    expect(transfers.length).toBeGreaterThan(0)
    const { from } = transfers[0]!.args
    await same(viem, (client) => client.getLogs({ event: TRANSFER_EVENT, args: { from }, fromBlock: 0n, toBlock: 'latest' }), 'Transfer from one sender')
    await same(viem, (client) => client.getLogs({ blockHash: busy.hash }), 'by block hash')
    await same(viem, (client) => client.getLogs({ address: token, blockHash: busy.hash }), 'address by block hash')
    const [topic1] = facts.topics[1] ?? []
    if (topic1 !== undefined)
      await same(
        viem,
        (client) => client.request({ method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: 'latest', topics: [null, topic1] }] }),
        'topic1 only (raw)',
      )
  })

  test('getBalance and getTransactionCount at past blocks, by number, tag and block hash (EIP-1898)', async () => {
    const blocks = [0, 1, Math.floor(facts.head / 2), busy.number, facts.head]
    for (const address of [...facts.accounts.slice(0, 4), busy.from]) {
      for (const number of blocks) {
        await same(viem, (client) => client.getBalance({ address, blockNumber: BigInt(number) }), `balance ${address} @${number}`)
        await same(viem, (client) => client.getTransactionCount({ address, blockNumber: BigInt(number) }), `nonce ${address} @${number}`)
      }
      await same(viem, (client) => client.getBalance({ address, blockHash: busy.hash }), `balance ${address} @{blockHash}`)
      await same(
        viem,
        (client) => client.getBalance({ address, blockHash: busy.hash, requireCanonical: true }),
        `balance ${address} @{blockHash, requireCanonical}`,
      )
      await same(viem, (client) => client.getTransactionCount({ address, blockHash: busy.hash }), `nonce ${address} @{blockHash}`)
      await same(viem, (client) => client.getBalance({ address, blockTag: 'earliest' }), `balance ${address} @earliest`)
      await same(viem, (client) => client.getTransactionCount({ address, blockTag: 'safe' }), `nonce ${address} @safe`)
    }
  })

  test('getBlockReceipts by a bare block hash (what viem sends), number and tag', async () => {
    const receipts = await same(viem, (client) => client.getBlockReceipts({ blockHash: busy.hash }), 'bare block hash')
    expect(receipts.length).toBeGreaterThan(0)
    await same(viem, (client) => client.getBlockReceipts({ blockNumber: BigInt(busy.number) }), 'number')
    await same(viem, (client) => client.getBlockReceipts({ blockTag: 'latest' }), 'latest')
    await same(viem, (client) => client.getBlockReceipts({ blockTag: 'earliest' }), 'earliest')
  })
})

describe('ethers 6: the same parsed answers through flashgate as from anvil', () => {
  let ethers: Pair<JsonRpcProvider>
  beforeAll(() => {
    const network = Network.from(CHAIN_ID)
    ethers = {
      flashgate: new JsonRpcProvider(gateway.dedicatedUrl, network, { staticNetwork: network }),
      anvil: new JsonRpcProvider(anvil.rpcUrl, network, { staticNetwork: network }),
    }
  })
  afterAll(() => {
    ethers?.flashgate.destroy()
    ethers?.anvil.destroy()
  })

  test('getBlock by number, hash and tag, with prefetched transactions', async () => {
    const block = await same(ethers, async (provider) => (await provider.getBlock(busy.number, true))!.toJSON(), 'by number')
    expect(block.transactions.length).toBeGreaterThan(0)
    await same(
      ethers,
      async (provider) => (await provider.getBlock(busy.number, true))!.prefetchedTransactions.map((transaction) => transaction.toJSON()),
      'prefetched',
    )
    await same(ethers, async (provider) => (await provider.getBlock(busy.hash))!.toJSON(), 'by hash')
    for (const tag of ['latest', 'earliest', 'safe', 'finalized']) await same(ethers, async (provider) => (await provider.getBlock(tag))!.toJSON(), tag)
  })

  test('getTransaction and getTransactionReceipt', async () => {
    for (const hash of facts.transactionHashes.slice(0, 30)) {
      await same(ethers, async (provider) => (await provider.getTransaction(hash))!.toJSON(), `transaction ${hash}`)
      await same(ethers, async (provider) => (await provider.getTransactionReceipt(hash))!.toJSON(), `receipt ${hash}`)
    }
  })

  test("a block's receipts, asked for gzip-compressed (flashgate sends its stored stream in a gzip member)", async () => {
    const block = `0x${Number(busy.number).toString(16)}`
    const receipts = await same(ethers, (provider) => provider.send('eth_getBlockReceipts', [block]) as Promise<unknown[]>, 'block receipts')
    expect(receipts.length).toBeGreaterThan(0)
  })

  test('getLogs by address, topics, range and block hash', async () => {
    const json = (logs: { toJSON(): unknown }[]) => logs.map((log) => log.toJSON())
    const all = await same(ethers, async (provider) => json(await provider.getLogs({ fromBlock: 0, toBlock: 'latest' })), 'whole chain')
    expect(all.length).toBeGreaterThan(busy.logs)
    await same(ethers, async (provider) => json(await provider.getLogs({ address: token, fromBlock: 0, toBlock: facts.head })), 'one address')
    await same(ethers, async (provider) => json(await provider.getLogs({ address: facts.contracts, fromBlock: 2, toBlock: busy.number })), 'addresses, a range')
    const [topic0] = facts.topics[0] ?? []
    expect(await same(ethers, async (provider) => json(await provider.getLogs({ topics: [topic0!], fromBlock: 'earliest' })), 'topic0')).not.toEqual([])
    const alternatives = facts.topics[1]!.slice(0, 3)
    expect(
      await same(ethers, async (provider) => json(await provider.getLogs({ topics: [null, alternatives], fromBlock: 0 })), 'topic1 alternatives'),
    ).not.toEqual([])
    await same(ethers, async (provider) => json(await provider.getLogs({ blockHash: busy.hash })), 'by block hash')
  })

  test('getBalance and getTransactionCount at a block number, tag and a bare block hash (what ethers sends)', async () => {
    for (const address of [...facts.accounts.slice(0, 3), busy.from]) {
      for (const blockTag of [0, 1, busy.number, facts.head, 'earliest', 'latest', 'safe', 'finalized'])
        await same(ethers, (provider) => provider.getBalance(address, blockTag), `balance ${address} @${blockTag}`)
      await same(ethers, (provider) => provider.getBalance(address, busy.hash), `balance ${address} @hash`)
      await same(ethers, (provider) => provider.getTransactionCount(address, busy.hash), `nonce ${address} @hash`)
      await same(ethers, (provider) => provider.getTransactionCount(address, busy.number), `nonce ${address} @${busy.number}`)
    }
  })
})

describe('web3 4: the same parsed answers through flashgate as from anvil', () => {
  let web3: Pair<Web3>
  beforeAll(() => {
    web3 = { flashgate: new Web3(gateway.dedicatedUrl), anvil: new Web3(anvil.rpcUrl) }
  })

  test('eth.getBlock by number, hash and tag', async () => {
    const block = await same(web3, (client) => client.eth.getBlock(busy.number, true), 'by number, full')
    expect(block.transactions.length).toBeGreaterThan(0)
    await same(web3, (client) => client.eth.getBlock(busy.hash, false), 'by hash')
    for (const tag of ['latest', 'earliest', 'safe', 'finalized'] as const) await same(web3, (client) => client.eth.getBlock(tag), tag)
  })

  test('eth.getTransaction and getTransactionReceipt', async () => {
    for (const hash of facts.transactionHashes.slice(0, 30)) {
      await same(web3, (client) => client.eth.getTransaction(hash), `transaction ${hash}`)
      await same(web3, (client) => client.eth.getTransactionReceipt(hash), `receipt ${hash}`)
    }
  })

  test('eth.getPastLogs by address, topics, range and block hash', async () => {
    const all = await same(web3, (client) => client.eth.getPastLogs({ fromBlock: 'earliest', toBlock: 'latest' }), 'whole chain')
    expect(all.length).toBeGreaterThan(busy.logs)
    await same(web3, (client) => client.eth.getPastLogs({ address: token, fromBlock: 0, toBlock: facts.head }), 'one address')
    await same(web3, (client) => client.eth.getPastLogs({ address: facts.contracts, fromBlock: 1, toBlock: busy.number }), 'addresses, a range')
    expect(await same(web3, (client) => client.eth.getPastLogs({ topics: [null, facts.topics[1]![0]!], fromBlock: 0 }), 'topic1')).not.toEqual([])
    await same(web3, (client) => client.eth.getPastLogs({ blockHash: busy.hash }), 'by block hash')
  })

  test('eth.getBalance and getTransactionCount at past blocks', async () => {
    for (const address of [...facts.accounts.slice(0, 3), busy.from]) {
      for (const block of [0, 1, busy.number, facts.head, 'earliest', 'latest', 'safe', 'finalized'] as const) {
        await same(web3, (client) => client.eth.getBalance(address, block), `balance ${address} @${block}`)
        await same(web3, (client) => client.eth.getTransactionCount(address, block), `nonce ${address} @${block}`)
      }
    }
  })
})

describe('foundry cast: the same output through flashgate as through anvil', () => {
  let home: string
  let cast: (args: string[]) => Promise<string>
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'flashgate-cast-read-'))
    const env = { PATH: process.env.PATH ?? '', HOME: home, NO_COLOR: '1', FOUNDRY_DISABLE_NIGHTLY_WARNING: '1' }
    cast = async (args) => (await promisify(execFile)(castBinary!, args, { env, cwd: home, timeout: CAST_TIMEOUT_MS })).stdout.trim()
  })
  afterAll(async () => {
    if (home) await rm(home, { recursive: true, force: true })
  })

  /** Runs cast with `--rpc-url` at flashgate and at anvil; expects the same output, and returns it. */
  async function sameCast(args: string[]): Promise<string> {
    const [ours, theirs] = await Promise.all([cast([...args, '--rpc-url', gateway.dedicatedUrl]), cast([...args, '--rpc-url', anvil.rpcUrl])])
    expect(ours, `cast ${args.join(' ')}`).toBe(theirs)
    return theirs
  }

  test.skipIf(castBinary === undefined)('cast logs over a range and an address, with and without an event signature', async () => {
    const range = ['--from-block', '1', '--to-block', String(facts.head)]
    expect(await sameCast(['logs', ...range, '--address', token])).not.toBe('')
    expect(await sameCast(['logs', '--json', ...range, '--address', token])).not.toBe('[]')
    const transfers = JSON.parse(
      await sameCast(['logs', '--json', ...range, '--address', token, 'Transfer(address indexed from, address indexed to, uint256 value)']),
    )
    expect(transfers.length).toBeGreaterThan(0)
    const inBusyBlock = JSON.parse(await sameCast(['logs', '--json', '--from-block', String(busy.number), '--to-block', String(busy.number)]))
    expect(inBusyBlock).toHaveLength(busy.logs)
  })

  test.skipIf(castBinary === undefined)('cast receipt --json, cast rpc eth_getBlockReceipts <blockHash>, cast block <n> --json', async () => {
    for (const hash of facts.transactionHashes.slice(0, 5)) await sameCast(['receipt', hash, '--json'])
    await sameCast(['receipt', busy.transaction, '--json'])
    const receipts = JSON.parse(await sameCast(['rpc', 'eth_getBlockReceipts', busy.hash])) as unknown[]
    expect(receipts.length).toBeGreaterThan(0)
    for (const number of [0, 1, busy.number, facts.head]) await sameCast(['block', String(number), '--json'])
    await sameCast(['block', busy.hash, '--json'])
    await sameCast(['block', 'latest', '--json'])
    await sameCast(['block', 'earliest', '--json'])
    await sameCast(['balance', busy.from, '--block', String(busy.number)])
    await sameCast(['nonce', busy.from, '--block', busy.hash])
  })
})

describe('watching over WebSocket: the same events from flashgate as from anvil', () => {
  test(`viem watchBlocks/watchEvent, ethers on('block'), web3 newBlockHeaders while ${WATCHED_BLOCKS} blocks are mined`, async () => {
    type Streams = {
      viemBlocks: unknown[]
      viemEvents: unknown[]
      ethersBlocks: number[]
      web3Headers: Record<string, unknown>[]
      web3Logs: unknown[]
      rawHeads: Record<string, unknown>[]
      rawLogs: unknown[]
    }
    const empty = (): Streams => ({ viemBlocks: [], viemEvents: [], ethersBlocks: [], web3Headers: [], web3Logs: [], rawHeads: [], rawLogs: [] })
    const streams: Pair<Streams> = { flashgate: empty(), anvil: empty() }
    const urls: Pair<string> = { flashgate: gatewayWs, anvil: anvil.wsUrl }
    const stops: (() => Promise<void> | void)[] = []
    try {
      for (const side of ['flashgate', 'anvil'] as const) {
        const seen = streams[side]
        const viem = createPublicClient({ transport: webSocket(urls[side], { retryCount: 0 }) })
        stops.push(async () => (await viem.transport.getRpcClient()).close())
        stops.push(
          viem.watchBlocks({ onBlock: (block) => void seen.viemBlocks.push(block), onError: (error) => void seen.viemBlocks.push(`error: ${error.message}`) }),
        )
        stops.push(
          viem.watchEvent({
            address: token,
            event: TRANSFER_EVENT,
            onLogs: (logs) => void seen.viemEvents.push(...logs),
            onError: (error) => void seen.viemEvents.push(`error: ${error.message}`),
          }),
        )

        const network = Network.from(CHAIN_ID)
        const ethers = new WebSocketProvider(urls[side], network, { staticNetwork: network })
        stops.push(() => ethers.destroy())
        await ethers.on('block', (number: number) => void seen.ethersBlocks.push(number))

        const web3 = new Web3(new Web3WebSocketProvider(urls[side]))
        stops.push(async () => {
          await web3.eth.clearSubscriptions()
          ;(web3.provider as Web3WebSocketProvider).disconnect()
        })
        const headers = await web3.eth.subscribe('newBlockHeaders')
        headers.on('data', (header) => void seen.web3Headers.push(header as unknown as Record<string, unknown>))
        headers.on('error', (error) => void seen.web3Headers.push({ error: String(error) }))
        const logs = await web3.eth.subscribe('logs', { address: token })
        logs.on('data', (log) => void seen.web3Logs.push(log))
        logs.on('error', (error) => void seen.web3Logs.push(`error: ${String(error)}`))

        // The frames themselves, as any client receives them.
        const raw = new WebSocket(urls[side])
        stops.push(() => raw.close())
        await once(raw, 'open')
        const kinds = new Map<string, 'rawHeads' | 'rawLogs'>()
        const pending = new Map<number, 'rawHeads' | 'rawLogs'>([
          [1, 'rawHeads'],
          [2, 'rawLogs'],
        ])
        raw.on('message', (data) => {
          const message = JSON.parse(String(data)) as { id?: number; result?: string; params?: { subscription: string; result: Record<string, unknown> } }
          if (message.id !== undefined && typeof message.result === 'string') kinds.set(message.result, pending.get(message.id)!)
          else if (message.params !== undefined) seen[kinds.get(message.params.subscription)!].push(message.params.result as never)
        })
        raw.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] }))
        raw.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'eth_subscribe', params: ['logs', { address: token }] }))
      }
      await sleep(SUBSCRIBE_SETTLE_MS)

      const first = facts.head + 1
      for (let block = 0; block < WATCHED_BLOCKS; block++) {
        // Automine: one block per transfer (and an empty one in between, as anvil_mine would make).
        const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(block + 1)] })
        const hash = await anvilCall<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: token, data, gas: '0x30000' }])
        // Sealed before the next step: anvil answers with the hash before its miner seals the block.
        await anvilReceipt(anvil.rpcUrl, hash)
        if (block % 2 === 1) await anvilCall(anvil.rpcUrl, 'anvil_mine', ['0x1'])
        await waitForSameHead(gateway, anvil.rpcUrl)
      }
      const head = Number(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber'))
      const mined = head - first + 1
      expect(mined).toBe(WATCHED_BLOCKS + Math.floor(WATCHED_BLOCKS / 2))

      for (const side of ['flashgate', 'anvil'] as const) {
        const seen = streams[side]
        await expect.poll(() => seen.viemBlocks.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(mined)
        await expect.poll(() => seen.viemEvents.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(WATCHED_BLOCKS)
        await expect.poll(() => seen.ethersBlocks.filter((number) => number >= first).length, { timeout: 5_000 }).toBeGreaterThanOrEqual(mined)
        await expect.poll(() => seen.web3Headers.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(mined)
        await expect.poll(() => seen.web3Logs.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(WATCHED_BLOCKS)
        await expect.poll(() => seen.rawHeads.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(mined)
        await expect.poll(() => seen.rawLogs.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(WATCHED_BLOCKS)
      }
      await sleep(300)
      // Only the blocks mined while both sides listened: a block the index committed just before (or anvil
      // announced just before the subscription took) is not part of the comparison.
      const numberOf = (item: unknown) => {
        const value = (item as { number?: unknown; blockNumber?: unknown } | null)?.number ?? (item as { blockNumber?: unknown } | null)?.blockNumber
        return value === undefined || value === null ? Number.NaN : Number(value)
      }
      for (const seen of Object.values(streams))
        for (const key of ['viemBlocks', 'viemEvents', 'web3Headers', 'web3Logs', 'rawHeads', 'rawLogs'] as const)
          (seen[key] as unknown[]) = (seen[key] as unknown[]).filter((item) => !(numberOf(item) < first))
      // viem fetches each announced block before calling back, so two blocks in quick succession may arrive
      // in either order, on either side: compared in chain order.
      for (const seen of Object.values(streams)) seen.viemBlocks.sort((a, b) => numberOf(a) - numberOf(b))
      const { flashgate: ours, anvil: theirs } = streams
      expect(theirs.viemBlocks).toHaveLength(mined)
      expect(ours.viemBlocks, 'viem watchBlocks').toEqual(theirs.viemBlocks)
      expect(ours.viemEvents, 'viem watchEvent').toEqual(theirs.viemEvents)
      expect(
        ours.ethersBlocks.filter((number) => number >= first),
        "ethers on('block')",
      ).toEqual(theirs.ethersBlocks.filter((number) => number >= first))
      expect(theirs.ethersBlocks.filter((number) => number >= first)).toEqual(Array.from({ length: mined }, (_, offset) => first + offset))
      expect(ours.web3Logs, 'web3 logs').toEqual(theirs.web3Logs)
      expect(ours.rawLogs, 'logs frames').toEqual(theirs.rawLogs)
      // anvil's newHeads frame is its whole block with the transaction hashes (`transactions`); flashgate's is
      // that block without them, as geth's header-only newHeads has none. Every other field, and the order of
      // the fields, is the same.
      expect(theirs.rawHeads.every((header) => Array.isArray(header.transactions))).toBe(true)
      expect(ours.rawHeads.map(withoutTransactions), 'newHeads frames').toEqual(theirs.rawHeads.map(withoutTransactions))
      expect(ours.rawHeads.map((header) => Object.keys(withoutTransactions(header)))).toEqual(
        theirs.rawHeads.map((header) => Object.keys(withoutTransactions(header))),
      )
      expect(ours.web3Headers.map(withoutTransactions), 'web3 newBlockHeaders').toEqual(theirs.web3Headers.map(withoutTransactions))
    } finally {
      for (const stop of stops.reverse()) await Promise.resolve(stop()).catch(() => {})
    }
  })
})
