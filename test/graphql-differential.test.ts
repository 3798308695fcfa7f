// GraphQL against JSON-RPC, as a user of the published `graphql-request` client sees them: on a generated
// anvil chain (legacy, EIP-2930, EIP-1559 and EIP-7702 transactions, contract creations, reverts, logs with
// 0-4 topics, empty blocks), generated queries at every block argument form must answer what the gateway's
// JSON-RPC answers for the same thing (itself held equal to anvil by test/differential.test.ts), field by
// field after converting hex quantities to decimal strings; a refusal must carry the JSON-RPC error's code and
// words; and no input a client can send may be answered `Unexpected error.`.
import fc from 'fast-check'
import { ClientError, GraphQLClient } from 'graphql-request'
import { createWalletClient, type Hex, http, type RpcBlock, type RpcLog, type RpcTransaction, type RpcTransactionReceipt } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { DEV_MNEMONIC } from '../src/devnet/anvil.js'
import { type Anvil, startAnvil } from './fixtures/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { result, rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { type ChainFacts, readChainFacts } from './fixtures/queries.js'

const SEED = 3303
const BLOCKS = 14
/** GraphQL's page cap (the public policy's result limit): the chain's logs take several pages. */
const PUBLIC_MAX_LOGS = 12
const MAX_BLOCK_RANGE = 1_000
/** anvil's funded accounts the generated chain does not send from: 7 sends the EIP-7702 transaction for 8. */
const DELEGATION_SENDER = 7
const AUTHORITY = 8

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let facts: ChainFacts
let client: GraphQLClient

type GraphqlError = { message: string; extensions?: { code?: string; jsonRpcCode?: number } }
type Answer = { data?: any; errors?: GraphqlError[] }

/** A query through graphql-request: its data, or the errors it threw as a `ClientError`. */
async function graphql(query: string, variables?: Record<string, unknown>): Promise<Answer> {
  try {
    return { data: await client.request<any>(query, variables) }
  } catch (error) {
    if (!(error instanceof ClientError)) throw error
    return { data: error.response.data, errors: error.response.errors as GraphqlError[] }
  }
}

/** The gateway's JSON-RPC (its dedicated endpoint: no result cap, the same block range as GraphQL's). */
async function jsonRpc(method: string, params: unknown[]) {
  return rpc(gateway.dedicatedUrl, method, params)
}

const decimal = (value: string | number | null | undefined) => (value === null || value === undefined ? null : BigInt(value).toString())
const hex = (number: number) => `0x${number.toString(16)}`

const BLOCK_FIELDS = `number hash parentHash timestamp miner gasUsed gasLimit baseFeePerGas extraData stateRoot transactionsRoot receiptsRoot logsBloom size transactionCount transactionHashes`
const TRANSACTION_FIELDS = `hash from to value nonce input gas gasPrice maxFeePerGas maxPriorityFeePerGas type chainId blockNumber blockHash transactionIndex`
const LOG_FIELDS = `address topics data blockNumber blockHash blockTimestamp transactionHash transactionIndex logIndex removed`
const RECEIPT_FIELDS = `transactionHash transactionIndex blockNumber blockHash from to contractAddress status gasUsed cumulativeGasUsed effectiveGasPrice type logsBloom logs { ${LOG_FIELDS} }`

function expectedBlock(block: RpcBlock) {
  return {
    number: decimal(block.number),
    hash: block.hash,
    parentHash: block.parentHash,
    timestamp: decimal(block.timestamp),
    miner: block.miner,
    gasUsed: decimal(block.gasUsed),
    gasLimit: decimal(block.gasLimit),
    baseFeePerGas: decimal(block.baseFeePerGas),
    extraData: block.extraData,
    stateRoot: block.stateRoot,
    transactionsRoot: block.transactionsRoot,
    receiptsRoot: block.receiptsRoot,
    logsBloom: block.logsBloom,
    size: decimal(block.size),
    transactionCount: block.transactions.length,
    transactionHashes: block.transactions.map((transaction) => (typeof transaction === 'string' ? transaction : transaction.hash)),
  }
}

function expectedTransaction(transaction: RpcTransaction) {
  const fields = transaction as unknown as Record<string, string | null | undefined>
  return {
    hash: transaction.hash,
    from: transaction.from,
    to: transaction.to,
    value: decimal(transaction.value),
    nonce: decimal(transaction.nonce),
    input: transaction.input,
    gas: decimal(transaction.gas),
    gasPrice: decimal(fields.gasPrice),
    maxFeePerGas: decimal(fields.maxFeePerGas),
    maxPriorityFeePerGas: decimal(fields.maxPriorityFeePerGas),
    type: Number(transaction.type),
    chainId: decimal(fields.chainId),
    blockNumber: decimal(transaction.blockNumber),
    blockHash: transaction.blockHash,
    transactionIndex: transaction.transactionIndex === null ? null : Number(transaction.transactionIndex),
  }
}

function expectedLog(log: RpcLog) {
  return {
    address: log.address,
    topics: log.topics,
    data: log.data,
    blockNumber: decimal(log.blockNumber),
    blockHash: log.blockHash,
    blockTimestamp: decimal(log.blockTimestamp),
    transactionHash: log.transactionHash,
    transactionIndex: Number(log.transactionIndex),
    logIndex: Number(log.logIndex),
    removed: false,
  }
}

function expectedReceipt(receipt: RpcTransactionReceipt) {
  return {
    transactionHash: receipt.transactionHash,
    transactionIndex: Number(receipt.transactionIndex),
    blockNumber: decimal(receipt.blockNumber),
    blockHash: receipt.blockHash,
    from: receipt.from,
    to: receipt.to,
    contractAddress: receipt.contractAddress ?? null,
    status: Number(receipt.status),
    gasUsed: decimal(receipt.gasUsed),
    cumulativeGasUsed: decimal(receipt.cumulativeGasUsed),
    effectiveGasPrice: decimal(receipt.effectiveGasPrice),
    type: Number(receipt.type),
    logsBloom: receipt.logsBloom,
    logs: receipt.logs.map(expectedLog),
  }
}

/** A GraphQL refusal must carry the JSON-RPC error's code and words, and never be the masked unexpected one. */
function expectSameError(errors: GraphqlError[] | undefined, rpcError: { code: number; message: string } | undefined, label: string) {
  expect(errors, `${label}: JSON-RPC refused with ${JSON.stringify(rpcError)}, GraphQL answered`).toBeDefined()
  const [error] = errors!
  expect(error!.message, label).not.toBe('Unexpected error.')
  expect({ code: error!.extensions?.jsonRpcCode, message: error!.message }, label).toEqual({ code: rpcError!.code, message: rpcError!.message })
}

/** A block argument in its three GraphQL forms, with the JSON-RPC argument that means the same. */
type BlockForm = { input: Record<string, unknown>; rpc: unknown; label: string }

const TAGS = ['EARLIEST', 'LATEST', 'SAFE', 'FINALIZED', 'PENDING'] as const

function blockForm(): fc.Arbitrary<BlockForm> {
  const unknownHash = `0x${'5a'.repeat(32)}`
  return fc.oneof(
    fc.integer({ min: 0, max: facts.head + 3 }).map((number) => ({ input: { number: String(number) }, rpc: hex(number), label: `number ${number}` })),
    fc.constantFrom(...facts.blockHashes, unknownHash).map((hash) => ({ input: { hash }, rpc: { blockHash: hash }, label: `hash ${hash.slice(0, 10)}` })),
    fc.constantFrom(...TAGS).map((tag) => ({ input: { tag }, rpc: tag.toLowerCase(), label: tag })),
  )
}

/** `eth_getBlockByNumber` or `ByHash` for a block argument, with full transactions. */
function rpcBlock(form: BlockForm) {
  return typeof form.rpc === 'object' && form.rpc !== null
    ? jsonRpc('eth_getBlockByHash', [(form.rpc as { blockHash: string }).blockHash, true])
    : jsonRpc('eth_getBlockByNumber', [form.rpc, true])
}

beforeAll(async () => {
  anvil = await startAnvil()
  const chain = await generateChain(anvil.rpcUrl, { seed: SEED, blocks: BLOCKS })
  // An EIP-7702 transaction (a sponsored delegation to the first token), then an empty block.
  const sender = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: DELEGATION_SENDER })
  const authority = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: AUTHORITY })
  const wallet = createWalletClient({ account: sender, transport: http(anvil.rpcUrl) })
  const authorization = await authority.signAuthorization!({ contractAddress: chain.contracts[0]!, chainId: 31337, nonce: 0 })
  await wallet.sendTransaction({ chain: null, to: authority.address, data: '0x', authorizationList: [authorization], gas: 200_000n })
  await result(anvil.rpcUrl, 'evm_mine')
  await result(anvil.rpcUrl, 'evm_mine')
  facts = await readChainFacts(anvil.rpcUrl, {
    accounts: [...chain.senders, ...chain.recipients.slice(0, 6), sender.address, authority.address],
    contracts: chain.contracts,
  })
  database = await createTestDatabase()
  gateway = await startTestGateway({
    upstreamRpc: anvil.rpcUrl,
    databaseUrl: database.databaseUrl,
    publicMaxLogs: PUBLIC_MAX_LOGS,
    publicMaxBlockRange: MAX_BLOCK_RANGE,
    maxBlockRange: MAX_BLOCK_RANGE,
  })
  await gateway.ingester.waitForBlock(facts.head)
  client = new GraphQLClient(`${gateway.url}/graphql`)
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('GraphQL answers what JSON-RPC answers, field by field', () => {
  test('block, receipts and account at every block argument form (number, hash, each tag)', async () => {
    const nonEmpty = { blocks: 0, receipts: 0, balances: 0 }
    await fc.assert(
      fc.asyncProperty(blockForm(), fc.constantFrom(...facts.accounts, ...facts.contracts), async (form, address) => {
        const blockArgs = Object.entries(form.input)
          .map(([key, value]) => (key === 'tag' ? `${key}: ${value}` : `${key}: ${JSON.stringify(value)}`))
          .join(', ')
        const answer = await graphql(
          `query ($block: BlockInput!) {
            block(${blockArgs}) { ${BLOCK_FIELDS} transactions { ${TRANSACTION_FIELDS} } receipts { ${RECEIPT_FIELDS} } logs { ${LOG_FIELDS} } }
            receipts(block: $block) { ${RECEIPT_FIELDS} }
          }`,
          { block: form.input },
        )
        const label = form.label
        expect(answer.errors, label).toBeUndefined()
        const block = (await rpcBlock(form)).result as RpcBlock<'latest', true> | null
        if (block === null) expect(answer.data.block, label).toBeNull()
        else {
          nonEmpty.blocks += block.transactions.length > 0 ? 1 : 0
          const { transactions, receipts, logs, ...header } = answer.data.block
          expect(header, label).toEqual(expectedBlock(block))
          expect(transactions, label).toEqual(block.transactions.map(expectedTransaction))
          const blockReceipts = (await jsonRpc('eth_getBlockReceipts', [block.hash])).result as RpcTransactionReceipt[]
          expect(receipts, label).toEqual(blockReceipts.map(expectedReceipt))
          expect(logs, label).toEqual(blockReceipts.flatMap((receipt) => receipt.logs).map(expectedLog))
        }
        const receipts = await jsonRpc('eth_getBlockReceipts', [form.rpc])
        expect(receipts.error, label).toBeUndefined()
        nonEmpty.receipts += ((receipts.result as unknown[] | null) ?? []).length > 0 ? 1 : 0
        expect(answer.data.receipts, label).toEqual((receipts.result as RpcTransactionReceipt[] | null)?.map(expectedReceipt) ?? null)

        // The account's state: either both answer, the same, or both refuse, with the same code and words.
        const state = await graphql(`query ($block: BlockInput!, $a: Address!) { account(address: $a, block: $block) { address balance transactionCount } }`, {
          block: form.input,
          a: address,
        })
        const [balance, nonce] = await Promise.all([jsonRpc('eth_getBalance', [address, form.rpc]), jsonRpc('eth_getTransactionCount', [address, form.rpc])])
        if (balance.error !== undefined) {
          expect(nonce.error, label).toEqual(balance.error)
          expectSameError(state.errors, balance.error, `account at ${label}`)
        } else {
          nonEmpty.balances += balance.result !== '0x0' ? 1 : 0
          expect(state.errors, label).toBeUndefined()
          expect(state.data.account, label).toEqual({
            address: address.toLowerCase(),
            balance: decimal(balance.result as Hex),
            transactionCount: decimal(nonce.result as Hex),
          })
        }
      }),
      { numRuns: 120, seed: SEED },
    )
    expect(nonEmpty.blocks).toBeGreaterThan(10)
    expect(nonEmpty.receipts).toBeGreaterThan(10)
    expect(nonEmpty.balances).toBeGreaterThan(10)
  })

  test('every transaction and receipt by hash, and unknown hashes', async () => {
    const types = new Set<number>()
    for (const hash of [...facts.transactionHashes, `0x${'ab'.repeat(32)}`]) {
      const answer = await graphql(
        `query ($h: Hash!) { transaction(hash: $h) { ${TRANSACTION_FIELDS} block { hash } receipt { transactionHash } logs { logIndex } } receipt(hash: $h) { ${RECEIPT_FIELDS} } }`,
        { h: hash },
      )
      expect(answer.errors, hash).toBeUndefined()
      const [transaction, receipt] = await Promise.all([jsonRpc('eth_getTransactionByHash', [hash]), jsonRpc('eth_getTransactionReceipt', [hash])])
      if (transaction.result === null) {
        expect(answer.data, hash).toEqual({ transaction: null, receipt: null })
        continue
      }
      const expected = transaction.result as RpcTransaction
      types.add(Number(expected.type))
      const { block, receipt: nested, logs, ...fields } = answer.data.transaction
      expect(fields, hash).toEqual(expectedTransaction(expected))
      expect(block, hash).toEqual({ hash: expected.blockHash })
      expect(nested, hash).toEqual({ transactionHash: hash })
      expect(answer.data.receipt, hash).toEqual(expectedReceipt(receipt.result as RpcTransactionReceipt))
      expect(logs, hash).toEqual((receipt.result as RpcTransactionReceipt).logs.map((log) => ({ logIndex: Number(log.logIndex) })))
    }
    // Legacy, EIP-2930, EIP-1559 and EIP-7702.
    expect(types).toEqual(new Set([0, 1, 2, 4]))
  })
})
