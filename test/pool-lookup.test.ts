import { parseGwei } from 'viem'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, signedTransfer } from './fixtures/flashblocks.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

const SENDER = DEV_ACCOUNTS[3]!

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway

beforeAll(async () => {
  anvil = await startAnvil()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  await gateway?.stop()
  await database?.drop()
  await anvil?.stop()
})

test('a forwarded transaction whose nonce the chain took with another is no longer found by hash, as the node finds it no more', async () => {
  const nonce = Number(await anvilCall<string>(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER.address, 'latest']))
  await waitForSameHead(gateway, anvil.rpcUrl)
  // Sent through flashgate behind a gap: the node queues it, flashgate finds it as a node finds it in its pool.
  const queued = await signedTransfer({ from: 3, nonce: nonce + 1, value: 7n })
  expect((await rpc(gateway.url, 'eth_sendRawTransaction', [queued.raw])).result).toBe(queued.hash)
  expect(await rpc(gateway.url, 'eth_getTransactionByHash', [queued.hash])).toMatchObject({ result: { hash: queued.hash, blockNumber: null } })

  // Elsewhere, a replacement at its nonce (a higher fee) and the nonce before it: both mined, the first never.
  const replacement = await SENDER.signTransaction({
    type: 'eip1559',
    chainId: 31337,
    nonce: nonce + 1,
    to: DEV_ACCOUNTS[1]!.address,
    value: 8n,
    gas: 21_000n,
    maxFeePerGas: parseGwei('5'),
    maxPriorityFeePerGas: parseGwei('3'),
  })
  await anvilCall(anvil.rpcUrl, 'eth_sendRawTransaction', [replacement])
  await anvilCall(anvil.rpcUrl, 'eth_sendRawTransaction', [(await signedTransfer({ from: 3, nonce })).raw])
  // anvil mines each as it comes, the queued one promoted a moment after the one before it.
  await expect.poll(async () => Number(await anvilCall<string>(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER.address, 'latest']))).toBe(nonce + 2)
  await waitForSameHead(gateway, anvil.rpcUrl)

  expect(await anvilCall(anvil.rpcUrl, 'eth_getTransactionByHash', [queued.hash])).toBeNull()
  expect((await rpc(gateway.url, 'eth_getTransactionByHash', [queued.hash])).result).toBeNull()
})

test('a transaction sent elsewhere and still in the node’s pool is found by hash, as the node finds it', async () => {
  const nonce = Number(await anvilCall<string>(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER.address, 'latest']))
  // Straight to the node, behind a gap: it stays in the node's queue, and flashgate never saw it sent.
  const queued = await signedTransfer({ from: 3, nonce: nonce + 5, value: 9n })
  await anvilCall(anvil.rpcUrl, 'eth_sendRawTransaction', [queued.raw])
  const atNode = await anvilCall<Record<string, unknown>>(anvil.rpcUrl, 'eth_getTransactionByHash', [queued.hash])
  expect(atNode).toMatchObject({ hash: queued.hash, blockNumber: null })
  expect((await rpc(gateway.url, 'eth_getTransactionByHash', [queued.hash])).result).toEqual(atNode)
  // Its receipt does not exist yet, here as at the node.
  expect((await rpc(gateway.url, 'eth_getTransactionReceipt', [queued.hash])).result).toBeNull()
})
