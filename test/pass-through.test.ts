import { sql } from 'drizzle-orm'
import { BaseError, ContractFunctionRevertedError, createPublicClient, createWalletClient, http, numberToHex, parseEther, type PublicClient } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { foundry } from 'viem/chains'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { deployToken, tokenAbi, ZERO_AMOUNT_REASON } from '../src/devnet/contracts.js'
import { PASS_THROUGH_METHODS } from '../src/upstream/pass-through.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, anvilReceipt, waitForSameHead } from './fixtures/sync.js'

/** anvil's first dev account. */
const PRIVATE_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80'
const RECIPIENT = '0x000000000000000000000000000000000000bEEF'

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let client: PublicClient

beforeAll(async () => {
  anvil = await startAnvil()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  await gateway.ingester.waitForBlock(0)
  client = createPublicClient({ chain: foundry, transport: http(gateway.url), pollingInterval: 50 })
})

afterAll(async () => {
  await gateway?.stop()
  await database?.drop()
  await anvil?.stop()
})

describe('a wallet pointed at the public endpoint', () => {
  const account = privateKeyToAccount(PRIVATE_KEY)
  const wallet = () => createWalletClient({ account, chain: foundry, transport: http(gateway.url) })

  test('deploys a contract, sends value, reads state and estimates fees, all through flashgate', async () => {
    // Deploying takes eth_chainId, eth_getTransactionCount(pending), eth_estimateGas, the fee methods and
    // eth_sendRawTransaction, then waits for the receipt, which comes from the index.
    const token = await deployToken(wallet(), client)
    expect(await client.getCode({ address: token })).toBe(await anvilCall(anvil.rpcUrl, 'eth_getCode', [token, 'latest']))

    const hash = await wallet().sendTransaction({ to: RECIPIENT, value: parseEther('1.5') })
    const receipt = await client.waitForTransactionReceipt({ hash })
    expect(receipt.status).toBe('success')
    expect(await client.getBalance({ address: RECIPIENT })).toBe(parseEther('1.5'))
    expect(await client.getTransactionCount({ address: account.address })).toBe(2)

    const { result } = await client.simulateContract({ address: token, abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, 5n], account })
    expect(result).toBe(true)
    const transfer = await wallet().writeContract({ address: token, abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, 5n] })
    expect((await client.waitForTransactionReceipt({ hash: transfer })).logs).toHaveLength(1)

    const fees = await client.estimateFeesPerGas()
    expect(fees.maxFeePerGas).toBeGreaterThan(0n)
    expect(await client.getGasPrice()).toBeGreaterThan(0n)
    expect((await client.getFeeHistory({ blockCount: 2, rewardPercentiles: [50] })).baseFeePerGas.length).toBe(3)
    expect(await client.getStorageAt({ address: token, slot: '0x0' })).toBe(await anvilCall(anvil.rpcUrl, 'eth_getStorageAt', [token, '0x0', 'latest']))
  })

  test("a reverting call reaches the wallet with the node's reason", async () => {
    const token = await deployToken(wallet(), client)
    const failure = await client
      .simulateContract({ address: token, abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, 0n], account })
      .catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(BaseError)
    const reverted = (failure as BaseError).walk((error) => error instanceof ContractFunctionRevertedError)
    expect((reverted as ContractFunctionRevertedError).reason).toBe(ZERO_AMOUNT_REASON)
  })
})

describe('forwarding', () => {
  test("an upstream error is passed through with the node's code, message and data", async () => {
    const token = await deployToken(createWalletClient({ account: privateKeyToAccount(PRIVATE_KEY), chain: foundry, transport: http(gateway.url) }), client)
    const data = `0xa9059cbb${RECIPIENT.slice(2).toLowerCase().padStart(64, '0')}${'0'.repeat(64)}`
    const call = { to: token, data }
    const direct = await fetch(anvil.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_call', params: [call, 'latest'] }),
    }).then((response) => response.json() as Promise<{ error: unknown }>)
    expect(direct.error).toBeDefined()
    expect(await rpc(gateway.url, 'eth_call', [call, 'latest'])).toEqual({ jsonrpc: '2.0', id: 1, error: direct.error })
  })

  test.each([
    'eth_sendTransaction',
    'eth_sign',
    'personal_sign',
    'anvil_mine',
    'evm_mine',
    'debug_traceTransaction',
    'admin_nodeInfo',
    'personal_unlockAccount',
  ])('%s is not on the allowlist: -32601, and the upstream never sees it', async (method) => {
    const head = await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber', [])
    const { error } = await rpc(gateway.url, method, method === 'anvil_mine' ? ['0x5'] : [])
    expect(error).toEqual({ code: -32601, message: `the method ${method} does not exist/is not available` })
    expect(await anvilCall(anvil.rpcUrl, 'eth_blockNumber', [])).toBe(head)
  })

  test("eth_accounts answers [] itself: the node's own accounts cannot sign through flashgate, and are not listed", async () => {
    expect((await anvilCall<string[]>(anvil.rpcUrl, 'eth_accounts', [])).length).toBeGreaterThan(0)
    expect(await rpc(gateway.url, 'eth_accounts', [])).toEqual({ jsonrpc: '2.0', id: 1, result: [] })
    expect((await rpc(gateway.url, 'eth_accounts', ['0x1'])).error?.code).toBe(-32602)
  })

  test('uncle counts and uncles by index are answered from the index as anvil answers them; an unknown block is null, as geth and reth answer', async () => {
    const head = await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber', [])
    await waitForSameHead(gateway, anvil.rpcUrl)
    const block = await anvilCall<{ hash: string }>(anvil.rpcUrl, 'eth_getBlockByNumber', [head, false])
    for (const [method, params] of [
      ['eth_getUncleCountByBlockNumber', [head]],
      ['eth_getUncleCountByBlockHash', [block.hash]],
      ['eth_getUncleByBlockNumberAndIndex', [head, '0x0']],
      ['eth_getUncleByBlockHashAndIndex', [block.hash, '0x0']],
    ] as const) {
      const direct = await rpc(anvil.rpcUrl, method, [...params])
      expect(await rpc(gateway.url, method, [...params]), `${method} ${JSON.stringify(params)}`).toEqual(direct)
    }
    // anvil 1.7.1 answers -32001 "Resource not found" for an unknown hash here; geth and reth answer null, as
    // flashgate does for every unknown block (eth_getBlockTransactionCountByHash included, anvil too).
    const unknown = `0x${'12'.repeat(32)}`
    expect((await rpc(gateway.url, 'eth_getUncleCountByBlockHash', [unknown])).result).toBeNull()
    expect((await rpc(gateway.url, 'eth_getUncleByBlockHashAndIndex', [unknown, '0x0'])).result).toBeNull()
    expect((await rpc(gateway.url, 'eth_getUncleByBlockNumberAndIndex', [head, `0x1${'0'.repeat(16)}`])).error).toEqual({
      code: -32602,
      message: expect.stringContaining('64 bits'),
    })
  })

  test("an uncle count is the stored block's own `uncles`, and only an uncle that block names is asked of the upstream, by that block's hash", async () => {
    const number = await waitForSameHead(gateway, anvil.rpcUrl)
    const [stored] = await gateway.db.query<{ header: Record<string, unknown> }>(sql`select header from blocks where number = ${number}`)
    const uncle = `0x${'ab'.repeat(32)}`
    try {
      // A pre-merge chain's block naming one uncle (anvil mines none).
      await gateway.db.query(sql`update blocks set header = ${JSON.stringify({ ...stored!.header, uncles: [uncle] })}::json where number = ${number}`)
      gateway.resolvers.notify({ reorg: true })
      const hash = stored!.header.hash as string
      expect((await rpc(gateway.url, 'eth_getUncleCountByBlockNumber', [numberToHex(number)])).result).toBe('0x1')
      expect((await rpc(gateway.url, 'eth_getUncleCountByBlockHash', [hash])).result).toBe('0x1')
      const asked = () => gateway.resolvers.historyReads.eth_getUncleByBlockHashAndIndex ?? 0
      const before = asked()
      expect((await rpc(gateway.url, 'eth_getUncleByBlockNumberAndIndex', [numberToHex(number), '0x1'])).result).toBeNull()
      expect(asked()).toBe(before)
      // Index 0 exists: its header is the upstream's (anvil keeps none, so null), asked once by the block's hash.
      expect((await rpc(gateway.url, 'eth_getUncleByBlockNumberAndIndex', [numberToHex(number), '0x0'])).result).toBeNull()
      expect(asked()).toBe(before + 1)
    } finally {
      await gateway.db.query(sql`update blocks set header = ${JSON.stringify(stored!.header)}::json where number = ${number}`)
      gateway.resolvers.notify({ reorg: true })
    }
  })

  test('what real clients ask of a node besides is answered as the node answers it: raw transactions, sender and nonce, protocol, coinbase, mining, peers, pool status', async () => {
    const account = privateKeyToAccount(PRIVATE_KEY)
    const wallet = createWalletClient({ account, chain: foundry, transport: http(gateway.url) })
    const hash = await wallet.sendTransaction({ to: RECIPIENT, value: 1n })
    await anvilReceipt(anvil.rpcUrl, hash)
    const { nonce } = await client.getTransaction({ hash })
    const calls: [string, unknown[]][] = [
      ['eth_getRawTransactionByHash', [hash]],
      ['eth_getRawTransactionByHash', [`0x${'ab'.repeat(32)}`]],
      ['eth_getTransactionBySenderAndNonce', [account.address, numberToHex(nonce)]],
      ['eth_protocolVersion', []],
      ['eth_coinbase', []],
      ['eth_mining', []],
      ['eth_hashrate', []],
      ['net_peerCount', []],
      ['txpool_status', []],
    ]
    for (const [method, params] of calls) {
      const [ours, theirs] = await Promise.all([rpc(gateway.url, method, params), rpc(anvil.rpcUrl, method, params)])
      expect(ours, method).toEqual(theirs)
    }
    expect((await rpc(gateway.url, 'eth_getRawTransactionByHash', [hash])).result).toMatch(/^0x02/)
  })

  test('the allowlist answers on the dedicated endpoint too, and inside batches', async () => {
    const response = await fetch(gateway.dedicatedUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'eth_gasPrice', params: [] },
        { jsonrpc: '2.0', id: 2, method: 'eth_syncing', params: [] },
        { jsonrpc: '2.0', id: 3, method: 'eth_blockNumber', params: [] },
      ]),
    })
    const answers = (await response.json()) as { id: number; result: unknown }[]
    expect(answers.map((answer) => answer.id)).toEqual([1, 2, 3])
    expect(answers[0]!.result).toMatch(/^0x[0-9a-f]+$/)
    expect(answers[1]!.result).toBe(false)
  })

  test("over a WebSocket upstream too, errors keep the node's code, message and data", async () => {
    const token = await deployToken(createWalletClient({ account: privateKeyToAccount(PRIVATE_KEY), chain: foundry, transport: http(gateway.url) }), client)
    const call = { to: token, data: `0xa9059cbb${RECIPIENT.slice(2).toLowerCase().padStart(64, '0')}${'0'.repeat(64)}` }
    const wsDatabase = await createTestDatabase()
    const wsGateway = await startTestGateway({ upstreamRpc: anvil.wsUrl, databaseUrl: wsDatabase.databaseUrl })
    try {
      await wsGateway.ingester.waitForBlock(0)
      const direct = await rpc(anvil.rpcUrl, 'eth_call', [call, 'latest'])
      expect(direct.error).toBeDefined()
      expect(await rpc(wsGateway.url, 'eth_call', [call, 'latest'])).toEqual(direct)
      expect(await rpc(wsGateway.url, 'eth_getCode', [token, 'latest'])).toEqual(await rpc(anvil.rpcUrl, 'eth_getCode', [token, 'latest']))
    } finally {
      await wsGateway.stop()
      await wsDatabase.drop()
    }
  })

  test('indexed methods are never forwarded', () => {
    for (const method of [
      'eth_getLogs',
      'eth_getBlockReceipts',
      'eth_getBalance',
      'eth_getTransactionCount',
      'eth_getBlockByNumber',
      'eth_getBlockTransactionCountByNumber',
      'eth_getTransactionByBlockNumberAndIndex',
      'eth_getUncleCountByBlockNumber',
      'eth_getUncleCountByBlockHash',
      'eth_getUncleByBlockNumberAndIndex',
      'eth_getUncleByBlockHashAndIndex',
    ])
      expect(PASS_THROUGH_METHODS.has(method)).toBe(false)
  })
})

// Last: it stops the gateway's ingester.
test("a block's transaction count, transactions by index, uncle count and uncles by index name the block every other method names: at `latest`, the index's head, not a newer block the node has", async () => {
  const send = () => anvilCall<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from: account0, to: RECIPIENT, value: '0x1' }])
  const account0 = privateKeyToAccount(PRIVATE_KEY).address
  const indexedHash = await send()
  // Its block sealed first (anvil answers with the hash before): else the index could match anvil's head one
  // block early, and that block land after the ingester stopped.
  await anvilReceipt(anvil.rpcUrl, indexedHash)
  const indexed = await waitForSameHead(gateway, anvil.rpcUrl)
  await gateway.ingester.stop()
  // The node moves on to a block of two transactions that the index never sees.
  await anvilCall(anvil.rpcUrl, 'evm_setAutomine', [false])
  try {
    await send()
    await send()
    await anvilCall(anvil.rpcUrl, 'evm_mine', [])
  } finally {
    await anvilCall(anvil.rpcUrl, 'evm_setAutomine', [true])
  }
  expect(Number(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber', []))).toBe(indexed + 1)
  const latest = (await rpc(gateway.dedicatedUrl, 'eth_getBlockByNumber', ['latest', false])).result as { number: string; hash: string }
  expect(Number(latest.number)).toBe(indexed)
  for (const [method, params, reference] of [
    ['eth_getBlockTransactionCountByNumber', ['latest'], [latest.number]],
    ['eth_getTransactionByBlockNumberAndIndex', ['latest', '0x0'], [latest.number, '0x0']],
    ['eth_getTransactionByBlockNumberAndIndex', ['latest', '0x1'], [latest.number, '0x1']],
    ['eth_getBlockTransactionCountByHash', [latest.hash], [latest.hash]],
    ['eth_getTransactionByBlockHashAndIndex', [latest.hash, '0x0'], [latest.hash, '0x0']],
    ['eth_getUncleCountByBlockNumber', ['latest'], [latest.number]],
    ['eth_getUncleByBlockNumberAndIndex', ['latest', '0x0'], [latest.number, '0x0']],
  ] as const) {
    const ours = await rpc(gateway.dedicatedUrl, method, [...params])
    expect(ours, `${method} ${JSON.stringify(params)}`).toEqual(await rpc(anvil.rpcUrl, method, [...reference]))
  }
  expect(((await rpc(gateway.dedicatedUrl, 'eth_getTransactionByBlockNumberAndIndex', ['latest', '0x0'])).result as { hash: string }).hash).toBe(indexedHash)
  // A block the index does not hold yet is not known, as by eth_getBlockByNumber.
  for (const method of ['eth_getBlockTransactionCountByNumber', 'eth_getUncleCountByBlockNumber', 'eth_getBlockByNumber'] as const)
    expect(
      (
        await rpc(
          gateway.dedicatedUrl,
          method,
          method === 'eth_getBlockByNumber' ? [`0x${(indexed + 1).toString(16)}`, false] : [`0x${(indexed + 1).toString(16)}`],
        )
      ).result,
    ).toBeNull()
})

test('eth_syncing: false while the index follows the node; the index’s progress, as a syncing node reports its own, while it trails', async () => {
  // A gateway of its own, whose ingester stops: the node goes on without it.
  const followerDatabase = await createTestDatabase()
  const follower = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: followerDatabase.databaseUrl })
  try {
    await waitForSameHead(follower, anvil.rpcUrl)
    expect((await rpc(follower.url, 'eth_syncing', [])).result).toBe(false)
    await follower.ingester.stop()
    const indexed = Number((await rpc(follower.url, 'eth_blockNumber', [])).result)
    await anvilCall(anvil.rpcUrl, 'anvil_mine', ['0x5'])
    const nodeHead = Number(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber', []))
    expect(nodeHead - indexed).toBeGreaterThan(2)
    expect((await rpc(follower.url, 'eth_syncing', [])).result).toEqual({
      startingBlock: '0x0',
      currentBlock: numberToHex(indexed),
      highestBlock: numberToHex(nodeHead),
    })
  } finally {
    await follower.stop()
    await followerDatabase.drop()
  }
})
