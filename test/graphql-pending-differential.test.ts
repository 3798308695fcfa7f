// GraphQL's PENDING against JSON-RPC's `pending` while a Flashblocks devnet feed runs: the pre-confirmed block,
// its receipts and logs, and an account's pending balance and nonce read the same through both. The pending
// view moves every flashblock, so each comparison is kept only when JSON-RPC answered the same just before
// and just after the GraphQL query (nothing moved in between), and enough of them must be kept.
import { setTimeout as sleep } from 'node:timers/promises'
import { GraphQLClient } from 'graphql-request'
import { type Address, encodeFunctionData, type Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { tokenAbi } from '../src/devnet/contracts.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { deployDevnetToken, result, startTestGateway, type TestGateway } from './fixtures/gateway.js'

const ROUNDS = 40
const ZERO_HASH = `0x${'00'.repeat(32)}`

let devnet: Devnet
let database: TestDatabase
let gateway: TestGateway
let client: GraphQLClient
let token: Address

const decimal = (value: string | null | undefined) => (value === null || value === undefined ? null : BigInt(value).toString())

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 100 })
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
  const deployed = await deployDevnetToken(devnet.rpcUrl, DEV_ACCOUNTS[0]!.address)
  token = deployed.address
  await gateway.ingester.waitForBlock(deployed.blockNumber, 10_000)
  client = new GraphQLClient(`${gateway.url}/graphql`)
})

afterAll(async () => {
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
})

/** The pending answers of JSON-RPC, in GraphQL's representation. */
async function rpcPending(sender: string) {
  const [block, receipts, logs, balance, nonce] = await Promise.all([
    result<Record<string, any>>(gateway.dedicatedUrl, 'eth_getBlockByNumber', ['pending', false]),
    result<Record<string, any>[]>(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['pending']),
    result<Record<string, any>[]>(gateway.dedicatedUrl, 'eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending' }]),
    result<Hex>(gateway.dedicatedUrl, 'eth_getBalance', [sender, 'pending']),
    result<Hex>(gateway.dedicatedUrl, 'eth_getTransactionCount', [sender, 'pending']),
  ])
  const log = (entry: Record<string, any>) => ({
    blockNumber: decimal(entry.blockNumber),
    blockHash: entry.blockHash,
    transactionHash: entry.transactionHash,
    logIndex: Number(entry.logIndex),
    topics: entry.topics,
    data: entry.data,
  })
  return {
    block: {
      number: decimal(block.number),
      hash: block.hash,
      parentHash: block.parentHash,
      gasUsed: decimal(block.gasUsed),
      transactionHashes: block.transactions,
    },
    receipts: receipts.map((receipt) => ({
      transactionHash: receipt.transactionHash,
      blockNumber: decimal(receipt.blockNumber),
      blockHash: receipt.blockHash,
      status: Number(receipt.status),
      gasUsed: decimal(receipt.gasUsed),
      cumulativeGasUsed: decimal(receipt.cumulativeGasUsed),
      logs: receipt.logs.map(log),
    })),
    logs: logs.map(log),
    account: { balance: decimal(balance), transactionCount: decimal(nonce) },
  }
}

const LOG = 'blockNumber blockHash transactionHash logIndex topics data'

async function graphqlPending(sender: string) {
  const data: any = await client.request(
    `query ($a: Address!) {
      block(tag: PENDING) { number hash parentHash gasUsed transactionHashes }
      receipts(block: { tag: PENDING }) { transactionHash blockNumber blockHash status gasUsed cumulativeGasUsed logs { ${LOG} } }
      logs(filter: { fromBlock: { tag: PENDING }, toBlock: { tag: PENDING } }, first: 100) { nodes { ${LOG} } }
      account(address: $a, block: { tag: PENDING }) { balance transactionCount }
    }`,
    { a: sender },
  )
  return { block: data.block, receipts: data.receipts, logs: data.logs.nodes, account: data.account }
}

describe('PENDING through GraphQL is pending through JSON-RPC, while flashblocks arrive', () => {
  test('the pre-confirmed block, its receipts and logs, and a sender’s pending balance and nonce', async () => {
    const sender = DEV_ACCOUNTS[2]!.address.toLowerCase()
    let kept = 0
    let withTransactions = 0
    for (let round = 0; round < ROUNDS; round++) {
      const data = encodeFunctionData({
        abi: tokenAbi,
        functionName: 'emitLogs',
        args: [round % 4, `0x${'aa'.repeat(32)}`, `0x${'bb'.repeat(32)}`, `0x${'cc'.repeat(32)}`, BigInt(round)],
      })
      await result(devnet.rpcUrl, 'eth_sendTransaction', [{ from: sender, to: token, data, gas: '0x30000' }])
      await sleep(30)
      const before = await rpcPending(sender)
      const answer = await graphqlPending(sender)
      const after = await rpcPending(sender)
      if (JSON.stringify(before) !== JSON.stringify(after)) continue
      kept++
      if (before.receipts.length > 0 && before.receipts[0]!.blockHash === ZERO_HASH) withTransactions++
      expect(answer, `round ${round}`).toEqual(before)
    }
    expect(kept).toBeGreaterThan(ROUNDS / 4)
    expect(withTransactions).toBeGreaterThan(3)
  })
})
