// Stateful filters (eth_newFilter, eth_newBlockFilter, eth_newPendingTransactionFilter, eth_getFilterChanges,
// eth_getFilterLogs, eth_uninstallFilter), as clients use them over HTTP: the changes equal those of anvil's own
// filters on the same chain, viem's and ethers' watchers see every event once, and pending transactions are
// reported at pre-confirmation, before their block is sealed.
import { setTimeout as sleep } from 'node:timers/promises'
import { Contract, JsonRpcProvider } from 'ethers'
import { type Address, createPublicClient, encodeFunctionData, type Hash, type Hex, http, type Log } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { Web3 } from 'web3'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { TRANSFER_TOPIC, tokenAbi } from '../src/devnet/contracts.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, DEVNET_CHAIN } from './fixtures/flashblocks.js'
import { deployDevnetToken, result, rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { largestLogFilter } from './fixtures/queries.js'

const CHAIN_ID = 31337
const BLOCK_TIME_MS = 1_000
const FLASHBLOCK_INTERVAL_MS = 100
const POLL_MS = 100
const WAIT_MS = 20_000
const RECIPIENT: Address = `0x${'7e'.repeat(20)}`
const DEPLOYER = DEV_ACCOUNTS[0]!

let devnet: Devnet
let database: TestDatabase
let gateway: TestGateway
let token: Address

type Json = Record<string, unknown>

/** Sends `count` calls to the token from the (unlocked) deployer through the devnet, a few per block; their hashes. */
async function transfers(count: number, { logsEach = 1, perBlock = 3 }: { logsEach?: number; perBlock?: number } = {}): Promise<Hash[]> {
  const hashes: Hash[] = []
  for (let sent = 0; sent < count; sent++) {
    const data =
      logsEach === 1
        ? encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(sent + 1)] })
        : encodeFunctionData({ abi: tokenAbi, functionName: 'multi', args: [RECIPIENT, BigInt(logsEach)] })
    hashes.push(await result<Hash>(devnet.rpcUrl, 'eth_sendTransaction', [{ from: DEPLOYER.address, to: token, data, gas: '0x100000' }]))
    if (sent % perBlock === perBlock - 1) await sleep(BLOCK_TIME_MS / 2)
  }
  return hashes
}

/** The sealed block of each transaction, once flashgate has indexed it. */
const sealedBlockOf = (hash: Hash) => sealedBlockOn(hash, gateway)

async function sealedBlockOn(hash: Hash, indexedBy: TestGateway): Promise<number> {
  const deadline = Date.now() + WAIT_MS
  for (;;) {
    const receipt = await result<Json | null>(devnet.anvilRpcUrl, 'eth_getTransactionReceipt', [hash])
    if (receipt !== null) {
      const number = Number(receipt.blockNumber)
      await indexedBy.ingester.waitForBlock(number, WAIT_MS)
      return number
    }
    if (Date.now() > deadline) throw new Error(`${hash} was not sealed within ${WAIT_MS} ms`)
    await sleep(POLL_MS)
  }
}

/** Polls a filter until `done` says what it gathered is complete; everything it delivered, in order. */
async function pollUntil<change>(url: string, id: Hex, done: (gathered: change[]) => boolean): Promise<change[]> {
  const gathered: change[] = []
  const deadline = Date.now() + WAIT_MS
  for (;;) {
    gathered.push(...(await result<change[]>(url, 'eth_getFilterChanges', [id])))
    if (done(gathered)) return gathered
    if (Date.now() > deadline) throw new Error(`filter ${id} did not deliver what was expected within ${WAIT_MS} ms (got ${gathered.length})`)
    await sleep(POLL_MS)
  }
}

const numberOf = (log: Json) => Number(log.blockNumber)

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: BLOCK_TIME_MS, flashblockIntervalMs: FLASHBLOCK_INTERVAL_MS })
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
  const deployed = await deployDevnetToken(devnet.rpcUrl, DEPLOYER.address)
  token = deployed.address
  await gateway.ingester.waitForBlock(deployed.blockNumber, WAIT_MS)
})

afterAll(async () => {
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
})

describe('stateful filters', () => {
  test("log and block filters deliver what anvil's own filters deliver on the same chain, each change once", async () => {
    const criteria = { address: token, topics: [TRANSFER_TOPIC] }
    const ours = { logs: await result<Hex>(gateway.url, 'eth_newFilter', [criteria]), blocks: await result<Hex>(gateway.url, 'eth_newBlockFilter') }
    const anvils = {
      logs: await result<Hex>(devnet.anvilRpcUrl, 'eth_newFilter', [criteria]),
      blocks: await result<Hex>(devnet.anvilRpcUrl, 'eth_newBlockFilter'),
    }
    const firstOurs = Number(await result<Hex>(gateway.url, 'eth_blockNumber'))
    const sent = await transfers(12)
    const last = Math.max(...(await Promise.all(sent.map(sealedBlockOf))))

    const ourLogs = await pollUntil<Json>(
      gateway.url,
      ours.logs,
      (logs) => logs.filter((log) => sent.includes(log.transactionHash as Hash)).length === sent.length,
    )
    const ourBlocks = await pollUntil<Hash>(gateway.url, ours.blocks, (hashes) => hashes.length >= last - firstOurs)
    const anvilLogs = await result<Json[]>(devnet.anvilRpcUrl, 'eth_getFilterChanges', [anvils.logs])
    const anvilBlocks = await result<Hash[]>(devnet.anvilRpcUrl, 'eth_getFilterChanges', [anvils.blocks])

    // The devnet mines each pre-confirmed block in anvil and takes it down again (src/devnet): anvil's filters
    // report those blocks and their logs too, some twice (mined again with the same hash). Compared: what anvil
    // reports of its canonical chain, each once, over the blocks both filters cover, up to the last transfer's.
    const anvilBlock = (hash: unknown) => result<Json | null>(devnet.anvilRpcUrl, 'eth_getBlockByHash', [hash, false])
    const canonical = (await Promise.all([...new Set(anvilBlocks)].map(anvilBlock))).filter((block): block is Json => block !== null)
    const anvilNumbers = canonical.map((block) => Number(block.number))
    const once = [...new Map(anvilLogs.map((log) => [`${log.blockHash}:${log.logIndex}`, log])).values()]
    const canonicalLogs = (await Promise.all(once.map(async (log) => ((await anvilBlock(log.blockHash)) === null ? null : log)))).filter(
      (log): log is Json => log !== null,
    )
    const common = (number: number) => number > Math.max(firstOurs, anvilNumbers[0]! - 1) && number <= last
    expect(ourLogs.filter((log) => common(numberOf(log)))).toEqual(canonicalLogs.filter((log) => common(numberOf(log))))
    expect(ourLogs.map((log) => log.transactionHash).filter((hash) => sent.includes(hash as Hash))).toEqual(sent)

    const ourNumbers = await Promise.all(ourBlocks.map(async (hash) => Number((await result<Json>(gateway.url, 'eth_getBlockByHash', [hash, false])).number)))
    // Every block after the one the filter was installed at, once, in order: no gap, no repeat.
    expect(ourNumbers).toEqual(ourNumbers.map((_, offset) => ourNumbers[0]! + offset))
    expect(ourNumbers[0]).toBeLessThanOrEqual(firstOurs + 1)
    expect(ourBlocks.filter((_, at) => common(ourNumbers[at]!))).toEqual(canonical.filter((_, at) => common(anvilNumbers[at]!)).map((block) => block.hash))

    // eth_getFilterLogs answers as eth_getLogs with the same criteria.
    const range = { fromBlock: `0x${firstOurs.toString(16)}`, toBlock: `0x${last.toString(16)}` }
    const ranged = await result<Hex>(gateway.url, 'eth_newFilter', [{ ...criteria, ...range }])
    expect(await result(gateway.url, 'eth_getFilterLogs', [ranged])).toEqual(await result(gateway.url, 'eth_getLogs', [{ ...criteria, ...range }]))
    expect(await result(gateway.url, 'eth_getFilterLogs', [ranged])).toEqual(await result(devnet.anvilRpcUrl, 'eth_getLogs', [{ ...criteria, ...range }]))
  })

  test('a pending transaction filter reports a transaction at pre-confirmation, before its block is sealed, once', async () => {
    const id = await result<Hex>(gateway.url, 'eth_newPendingTransactionFilter')
    const seen: Hash[] = []
    const poll = async () => seen.push(...(await result<Hash[]>(gateway.url, 'eth_getFilterChanges', [id])))
    // A transaction sent just before its block seals may be sealed before a poll on a loaded machine sees it
    // pre-confirmed: a few are sent, one after another, until one is reported while flashgate's head is
    // still below its block (without the pre-confirmed blocks, none ever would be).
    let preConfirmed: Hash | null = null
    const sent: Hash[] = []
    for (let attempt = 0; attempt < 5 && preConfirmed === null; attempt++) {
      const [hash] = await transfers(1)
      sent.push(hash!)
      let headWhenSeen = -1
      const deadline = Date.now() + WAIT_MS
      while (!seen.includes(hash!)) {
        await poll()
        headWhenSeen = Number(await result<Hex>(gateway.url, 'eth_blockNumber'))
        if (Date.now() > deadline) throw new Error('the transaction was not reported')
        await sleep(20)
      }
      if ((await sealedBlockOf(hash!)) > headWhenSeen) preConfirmed = hash!
    }
    expect(preConfirmed).not.toBeNull()
    // Sealed since: not reported again.
    await sleep(BLOCK_TIME_MS)
    await poll()
    for (const hash of sent) expect(seen.filter((seenHash) => seenHash === hash)).toHaveLength(1)
    expect(new Set(seen).size).toBe(seen.length)
  })

  test('a pending transaction filter polled after its transactions were sealed still reports each of them once', async () => {
    const id = await result<Hex>(gateway.url, 'eth_newPendingTransactionFilter')
    const sent = await transfers(6)
    await Promise.all(sent.map(sealedBlockOf))
    const reported = await result<Hash[]>(gateway.url, 'eth_getFilterChanges', [id])
    expect(reported.filter((hash) => sent.includes(hash))).toEqual(sent)
    expect(new Set(reported).size).toBe(reported.length)
  })

  test("viem's watchers over HTTP: watchPendingTransactions and watchContractEvent see every transaction and log once", async () => {
    const asked = new Set<string>()
    const transport = http(gateway.url, {
      onFetchRequest: async (request) => {
        for (const call of [await request.clone().json()].flat() as { method: string }[]) asked.add(call.method)
      },
    })
    const client = createPublicClient({ chain: DEVNET_CHAIN, transport, pollingInterval: POLL_MS })
    const pending: Hash[] = []
    const events: Log[] = []
    const failures: Error[] = []
    const unwatchPending = client.watchPendingTransactions({
      poll: true,
      onTransactions: (hashes) => pending.push(...hashes),
      onError: (e) => failures.push(e),
    })
    const unwatchEvents = client.watchContractEvent({
      address: token,
      abi: tokenAbi,
      eventName: 'Transfer',
      poll: true,
      onLogs: (logs) => events.push(...logs),
      onError: (e) => failures.push(e),
    })
    try {
      // viem installs its filters on the first poll and reads changes from the next: sent once it polls them.
      await expect
        .poll(() => asked.has('eth_getFilterChanges') && asked.has('eth_newFilter') && asked.has('eth_newPendingTransactionFilter'), { timeout: WAIT_MS })
        .toBe(true)
      await sleep(2 * POLL_MS)
      const sent = await transfers(6, { logsEach: 2 })
      await Promise.all(sent.map(sealedBlockOf))
      await expect.poll(() => sent.every((hash) => pending.includes(hash)), { timeout: WAIT_MS }).toBe(true)
      await expect.poll(() => events.filter((log) => sent.includes(log.transactionHash!)).length, { timeout: WAIT_MS }).toBe(sent.length * 2)
      expect(new Set(pending).size).toBe(pending.length)
      const keys = events.map((log) => `${log.blockNumber}:${log.logIndex}`)
      expect(new Set(keys).size).toBe(keys.length)
      expect(failures).toEqual([])
      // The events came through the filter: viem polls eth_getLogs instead only when it could not install one.
      expect(asked.has('eth_getLogs')).toBe(false)
    } finally {
      unwatchPending()
      unwatchEvents()
    }
  })

  test("viem's createEventFilter, getFilterChanges and getFilterLogs; createBlockFilter", async () => {
    const client = createPublicClient({ chain: DEVNET_CHAIN, transport: http(gateway.url) })
    const from = await client.getBlockNumber()
    const filter = await client.createContractEventFilter({ address: token, abi: tokenAbi, eventName: 'Transfer', fromBlock: from })
    const blocks = await client.createBlockFilter()
    const sent = await transfers(3)
    const last = Math.max(...(await Promise.all(sent.map(sealedBlockOf))))
    const changes = await client.getFilterChanges({ filter })
    expect(changes.map((log) => log.args.value)).toEqual([1n, 2n, 3n])
    const logs = await client.getFilterLogs({ filter })
    expect(logs).toEqual(await client.getContractEvents({ address: token, abi: tokenAbi, eventName: 'Transfer', fromBlock: from }))
    const hashes = await client.getFilterChanges({ filter: blocks })
    expect(hashes.length).toBeGreaterThanOrEqual(last - Number(from))
    expect(await client.uninstallFilter({ filter })).toBe(true)
    expect(await client.uninstallFilter({ filter })).toBe(false)
  })

  test("ethers 6: contract.on('Transfer') and provider.on('pending') over HTTP", async () => {
    const provider = new JsonRpcProvider(gateway.url, CHAIN_ID, { staticNetwork: true, pollingInterval: POLL_MS })
    try {
      const asked = new Set<string>()
      await provider.on('debug', (event: { action: string; payload?: { method: string } | { method: string }[] }) => {
        if (event.action === 'sendRpcPayload') for (const call of [event.payload!].flat()) asked.add(call.method)
      })
      const contract = new Contract(token, tokenAbi, provider)
      const values: bigint[] = []
      const pending: string[] = []
      await contract.on('Transfer', (_from: string, _to: string, value: bigint) => {
        values.push(value)
      })
      await provider.on('pending', (hash: string) => {
        pending.push(hash)
      })
      // ethers installs both filters as the listeners start, then polls them: sent once it does.
      await expect
        .poll(() => asked.has('eth_newFilter') && asked.has('eth_newPendingTransactionFilter') && asked.has('eth_getFilterChanges'), { timeout: WAIT_MS })
        .toBe(true)
      await sleep(2 * POLL_MS)
      const sent = await transfers(3)
      await Promise.all(sent.map(sealedBlockOf))
      await expect.poll(() => values.length, { timeout: WAIT_MS }).toBeGreaterThanOrEqual(3)
      expect(values.slice(-3)).toEqual([1n, 2n, 3n])
      await expect.poll(() => sent.every((hash) => pending.includes(hash)), { timeout: WAIT_MS }).toBe(true)
      // Through the filters: ethers polls eth_getLogs instead only when eth_newFilter fails.
      expect(asked.has('eth_getLogs')).toBe(false)
    } finally {
      provider.destroy()
    }
  })

  test('web3 4 over HTTP: every filter it creates is polled and uninstalled by the id it sends back (a quantity)', async () => {
    // web3 keeps a filter id as a number and sends it back with numberToHex: an id with a leading zero digit
    // (one in sixteen of 16 random bytes) came back without it and was `filter not found`.
    const web3 = new Web3(gateway.url)
    const ids = await Promise.all(Array.from({ length: 96 }, () => web3.eth.createNewBlockFilter()))
    for (const id of ids) {
      expect(Array.isArray(await web3.eth.getFilterChanges(id))).toBe(true)
      expect(await web3.eth.uninstallFilter(id)).toBe(true)
    }
    // A hex id is read as the quantity it is, leading zeros or not.
    const blocks = await result<Hex>(gateway.url, 'eth_newBlockFilter')
    expect(blocks).toMatch(/^0x[1-9a-f][0-9a-f]*$/)
    expect((await rpc(gateway.url, 'eth_getFilterChanges', [`0x000${blocks.slice(2).toUpperCase()}`])).error).toBeUndefined()
    expect(await result(gateway.url, 'eth_uninstallFilter', [blocks])).toBe(true)
  })

  test("unknown, uninstalled and wrong-kind ids are geth's `filter not found`; bad criteria are refused as eth_getLogs refuses them", async () => {
    const unknown = await rpc(gateway.url, 'eth_getFilterChanges', ['0x0123456789abcdef0123456789abcdef'])
    expect(unknown.error).toEqual({ code: -32000, message: 'filter not found' })
    const blocks = await result<Hex>(gateway.url, 'eth_newBlockFilter')
    expect((await rpc(gateway.url, 'eth_getFilterLogs', [blocks])).error).toEqual({ code: -32000, message: 'filter not found' })
    expect(await result(gateway.url, 'eth_uninstallFilter', [blocks])).toBe(true)
    expect(await result(gateway.url, 'eth_uninstallFilter', [blocks])).toBe(false)
    expect((await rpc(gateway.url, 'eth_getFilterChanges', [blocks])).error?.code).toBe(-32000)

    for (const criteria of [
      { address: '0x1234' },
      { topics: ['nope'] },
      { fromBlock: '0x1', blockHash: `0x${'11'.repeat(32)}` },
      { fromBlock: '0x5', toBlock: '0x1' },
      7,
    ]) {
      const asFilter = await rpc(gateway.url, 'eth_newFilter', [criteria])
      const asLogs = await rpc(gateway.url, 'eth_getLogs', [criteria])
      expect(asFilter.error).toEqual(asLogs.error)
      expect(asFilter.error?.code).toBe(-32602)
    }
    expect((await rpc(gateway.url, 'eth_getFilterChanges', [42])).error?.code).toBe(-32602)
    expect((await rpc(gateway.url, 'eth_getFilterChanges', ['0x'.padEnd(200, '1')])).error?.code).toBe(-32602)
    expect((await rpc(gateway.url, 'eth_getFilterChanges', [])).error?.code).toBe(-32602)
    expect((await rpc(gateway.url, 'eth_newPendingTransactionFilter', [true])).error?.code).toBe(-32602)
  })
})

describe("one client's filters", () => {
  test("cannot push out another client's: past its share its installs are refused (-32005), and what it uninstalls frees it", async () => {
    // Another client (a dedicated key) has a log filter and a block filter.
    const theirLogs = await result<Hex>(gateway.dedicatedUrl, 'eth_newFilter', [{ address: token }])
    const theirBlocks = await result<Hex>(gateway.dedicatedUrl, 'eth_newBlockFilter')
    // This one (an address on the public endpoint) installs the largest filters the parser takes (~320 KB each)
    // and abandons them: the store's whole bound (64 MiB) would take ~210.
    const largest = largestLogFilter()
    const installed: Hex[] = []
    let refusal: { code: number; message: string } | undefined
    for (let attempt = 0; attempt < 260 && refusal === undefined; attempt++) {
      const answer = await rpc(gateway.url, 'eth_newFilter', [largest])
      if (answer.error === undefined) installed.push(answer.result as Hex)
      else if (answer.error.message.startsWith('too many filters')) refusal = answer.error
      else throw new Error(`unexpected answer: ${JSON.stringify(answer.error)}`)
    }
    expect(refusal?.code).toBe(-32005)
    expect(refusal?.message).toMatch(/at most 1000 filters and 4 MiB of filter criteria/)
    expect(installed.length).toBeGreaterThan(5)
    expect(installed.length).toBeLessThan(20)
    // The other client's filters are all there.
    expect(Array.isArray(await result(gateway.dedicatedUrl, 'eth_getFilterChanges', [theirLogs]))).toBe(true)
    expect(Array.isArray(await result(gateway.dedicatedUrl, 'eth_getFilterChanges', [theirBlocks]))).toBe(true)
    // Its own filters still answer; one uninstalled makes room for one more.
    expect(Array.isArray(await result(gateway.url, 'eth_getFilterChanges', [installed[0]]))).toBe(true)
    expect(await result(gateway.url, 'eth_uninstallFilter', [installed[0]])).toBe(true)
    const again = await result<Hex>(gateway.url, 'eth_newFilter', [largest])
    expect((await rpc(gateway.url, 'eth_newFilter', [largest])).error?.code).toBe(-32005)
    for (const id of [...installed.slice(1), again]) await result(gateway.url, 'eth_uninstallFilter', [id])
    // Small filters of its own are refused no longer.
    expect(await result<Hex>(gateway.url, 'eth_newBlockFilter')).toMatch(/^0x/)
  })
})

describe('filters within the endpoint limits', () => {
  let limited: TestGateway
  let limitedDatabase: TestDatabase
  const MAX_LOGS = 4
  const MAX_BLOCK_RANGE = 3

  beforeAll(async () => {
    limitedDatabase = await createTestDatabase()
    limited = await startTestGateway({
      upstreamRpc: devnet.rpcUrl,
      databaseUrl: limitedDatabase.databaseUrl,
      publicMaxLogs: MAX_LOGS,
      publicMaxBlockRange: MAX_BLOCK_RANGE,
    })
    await limited.ingester.waitForBlock(Number(await result<Hex>(devnet.rpcUrl, 'eth_blockNumber')), WAIT_MS)
  })

  afterAll(async () => {
    await limited?.stop()
    await limitedDatabase?.drop()
  })

  test('a log filter far behind gets, poll by poll, the blocks that fit the limits, and every log once in order', async () => {
    const criteria = { address: token, topics: [TRANSFER_TOPIC] }
    const id = await result<Hex>(limited.url, 'eth_newFilter', [criteria])
    const first = Number(await result<Hex>(limited.url, 'eth_blockNumber'))
    // One log every half block: at most three in a block, more than the limits allow in one answer over a few blocks.
    const sent = await transfers(10, { perBlock: 1 })
    const last = Math.max(...(await Promise.all(sent.map((hash) => sealedBlockOn(hash, limited)))))
    const polls: Json[][] = []
    const deadline = Date.now() + WAIT_MS
    while (polls.flat().filter((log) => numberOf(log) <= last).length < sent.length) {
      const answer = await rpc(limited.url, 'eth_getFilterChanges', [id])
      expect(answer.error).toBeUndefined()
      polls.push(answer.result as Json[])
      if (Date.now() > deadline) throw new Error(`only ${polls.flat().length} logs after ${polls.length} polls`)
    }
    for (const poll of polls) expect(poll.length).toBeLessThanOrEqual(MAX_LOGS)
    expect(polls.filter((poll) => poll.length > 0).length).toBeGreaterThan(2)
    const expected = await result<Json[]>(limited.dedicatedUrl, 'eth_getLogs', [
      { ...criteria, fromBlock: `0x${(first + 1).toString(16)}`, toBlock: `0x${last.toString(16)}` },
    ])
    expect(polls.flat().filter((log) => numberOf(log) <= last)).toEqual(expected)
    expect(expected.map((log) => log.transactionHash)).toEqual(sent)
  })

  test("a log filter's fromBlock and toBlock bound its changes", async () => {
    const head = Number(await result<Hex>(limited.url, 'eth_blockNumber'))
    const range = { fromBlock: `0x${(head + 2).toString(16)}`, toBlock: `0x${(head + 3).toString(16)}` }
    const id = await result<Hex>(limited.url, 'eth_newFilter', [{ address: token, ...range }])
    const sent = await transfers(8, { perBlock: 1 })
    await Promise.all(sent.map((hash) => sealedBlockOn(hash, limited)))
    await limited.ingester.waitForBlock(head + 4, WAIT_MS)
    const changes: Json[] = []
    for (let poll = 0; poll < 4; poll++) changes.push(...(await result<Json[]>(limited.url, 'eth_getFilterChanges', [id])))
    const expected = await result<Json[]>(limited.dedicatedUrl, 'eth_getLogs', [{ address: token, ...range }])
    expect(expected.length).toBeGreaterThan(0)
    expect(changes).toEqual(expected)
  })
})
