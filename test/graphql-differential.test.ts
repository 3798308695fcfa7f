// GraphQL against JSON-RPC, as a user of the published `graphql-request` client sees them: on a generated
// anvil chain (legacy, EIP-2930, EIP-1559 and EIP-7702 transactions, contract creations, reverts, logs with
// 0-4 topics, empty blocks), generated queries at every block argument form must answer what the gateway's
// JSON-RPC answers for the same thing (itself held equal to anvil by test/differential.test.ts), field by
// field after converting hex quantities to decimal strings; a refusal must carry the JSON-RPC error's code and
// words; and no input a client can send may be answered `Unexpected error.`.
import fc from 'fast-check'
import { ClientError, GraphQLClient } from 'graphql-request'
import {
  createWalletClient,
  encodeFunctionData,
  type Hex,
  http,
  parseGwei,
  type RpcBlock,
  type RpcLog,
  type RpcTransaction,
  type RpcTransactionReceipt,
} from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { DEV_MNEMONIC } from '../src/devnet/anvil.js'
import { tokenAbi } from '../src/devnet/contracts.js'
import { type Anvil, startAnvil } from './fixtures/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { result, rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import {
  BLOCK_FIELDS,
  decimal,
  expectedBlock,
  expectedLog,
  expectedReceipt,
  expectedTransaction,
  hex,
  LOG_FIELDS,
  RECEIPT_FIELDS,
  TRANSACTION_FIELDS,
} from './fixtures/graphql-expected.js'
import { type ChainFacts, readChainFacts } from './fixtures/queries.js'

const SEED = 3303
const BLOCKS = 14
/** GraphQL's page cap (the public policy's result limit): the chain's logs take several pages. */
const PUBLIC_MAX_LOGS = 12
const MAX_BLOCK_RANGE = 1_000
/** anvil's funded accounts the generated chain does not send from: 7 sends the EIP-7702 transaction for 8, 9 sends to the pool. */
const DELEGATION_SENDER = 7
const AUTHORITY = 8
const POOL_SENDER = 9

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

/** Every page of `logs` (or an account's `logs`) from the first; the errors of the first page that refused. */
async function walkPages(query: string, variables: Record<string, unknown>, pick: (data: any) => { nodes: any[]; pageInfo: any }) {
  const nodes: any[] = []
  let after: string | null = null
  for (let page = 0; page < 500; page++) {
    const answer = await graphql(query, { ...variables, after })
    if (answer.errors !== undefined) return { nodes, errors: answer.errors, pages: page }
    const connection = pick(answer.data)
    nodes.push(...connection.nodes)
    expect(connection.nodes.length).toBeLessThanOrEqual(PUBLIC_MAX_LOGS)
    if (!connection.pageInfo.hasNextPage) return { nodes, errors: undefined, pages: page + 1 }
    after = connection.pageInfo.endCursor
  }
  throw new Error('more than 500 pages')
}

/** A range end of a log filter: a number (some past the head) or a tag; GraphQL's and JSON-RPC's forms. */
function rangeEnd(): fc.Arbitrary<BlockForm> {
  return fc.oneof(
    fc.integer({ min: 0, max: facts.head + 2 }).map((number) => ({ input: { number: String(number) }, rpc: hex(number), label: String(number) })),
    fc.constantFrom(...TAGS).map((tag) => ({ input: { tag }, rpc: tag.toLowerCase(), label: tag })),
  )
}

describe('logs: all pages together are one eth_getLogs answer', () => {
  test('generated filters, paged by generated sizes, equal eth_getLogs or are refused as it refuses them', async () => {
    const outcome = { answered: 0, nonEmpty: 0, refused: 0, multiPage: 0 }
    const topicChoice = (position: number) => {
      const seen = facts.topics[position]!.length > 0 ? facts.topics[position]! : [`0x${'77'.repeat(32)}`]
      return fc.oneof(fc.constant(null), fc.subarray(seen, { minLength: 1, maxLength: Math.min(3, seen.length) }), fc.constant([]))
    }
    const filter = fc.record({
      range: fc.oneof(
        fc.record({ fromBlock: fc.option(rangeEnd(), { nil: undefined }), toBlock: fc.option(rangeEnd(), { nil: undefined }) }),
        fc.constantFrom(...facts.blockHashes, `0x${'5a'.repeat(32)}`).map((blockHash) => ({ blockHash })),
      ),
      addresses: fc.option(fc.subarray([...facts.contracts, `0x${'66'.repeat(20)}`], { minLength: 0, maxLength: 3 }), { nil: undefined }),
      topics: fc.option(
        fc.integer({ min: 1, max: 4 }).chain((positions) => fc.tuple(...Array.from({ length: positions }, (_, position) => topicChoice(position)))),
        { nil: undefined },
      ),
    })
    await fc.assert(
      fc.asyncProperty(filter, fc.integer({ min: 1, max: PUBLIC_MAX_LOGS }), async ({ range, addresses, topics }, first) => {
        const graphqlFilter: Record<string, unknown> = { addresses, topics }
        const rpcFilter: Record<string, unknown> = { address: addresses, topics }
        if ('blockHash' in range) graphqlFilter.blockHash = rpcFilter.blockHash = range.blockHash
        else
          for (const end of ['fromBlock', 'toBlock'] as const)
            if (range[end] !== undefined) {
              graphqlFilter[end] = range[end].input
              rpcFilter[end] = range[end].rpc
            }
        const label = JSON.stringify({ graphqlFilter, first })
        const paged = await walkPages(
          `query ($filter: LogFilter!, $first: Int, $after: String) { logs(filter: $filter, first: $first, after: $after) { nodes { ${LOG_FIELDS} } pageInfo { endCursor hasNextPage } } }`,
          { filter: graphqlFilter, first },
          (data) => data.logs,
        )
        const reference = await jsonRpc('eth_getLogs', [rpcFilter])
        if (reference.error !== undefined) {
          outcome.refused++
          expect(paged.pages, label).toBe(0)
          expectSameError(paged.errors, reference.error, label)
          return
        }
        expect(paged.errors, label).toBeUndefined()
        expect(paged.nodes, label).toEqual((reference.result as RpcLog[]).map(expectedLog))
        outcome.answered++
        if (paged.nodes.length > 0) outcome.nonEmpty++
        if (paged.pages > 1) outcome.multiPage++
      }),
      { numRuns: 150, seed: SEED },
    )
    expect(outcome.nonEmpty).toBeGreaterThan(30)
    expect(outcome.multiPage).toBeGreaterThan(10)
    expect(outcome.refused).toBeGreaterThan(5)
  })

  test("an account's logs and transactions at every block argument form: the history eth_getLogs and the blocks give up to that block", async () => {
    const blocks = await Promise.all(
      Array.from(
        { length: facts.head + 1 },
        async (_, number) => (await jsonRpc('eth_getBlockByNumber', [hex(number), true])).result as RpcBlock<'latest', true>,
      ),
    )
    let compared = 0
    await fc.assert(
      fc.asyncProperty(
        blockForm(),
        fc.constantFrom(...facts.contracts, ...facts.accounts),
        fc.integer({ min: 1, max: PUBLIC_MAX_LOGS }),
        async (form, address, first) => {
          const label = `${address} at ${form.label}, first ${first}`
          const variables = { a: address, block: form.input, first }
          const logs = await walkPages(
            `query ($a: Address!, $block: BlockInput, $first: Int, $after: String) { account(address: $a, block: $block) { logs(first: $first, after: $after) { nodes { ${LOG_FIELDS} } pageInfo { endCursor hasNextPage } } } }`,
            variables,
            (data) => data.account.logs,
          )
          const transactions = await walkPages(
            `query ($a: Address!, $block: BlockInput, $first: Int, $after: String) { account(address: $a, block: $block) { transactions(first: $first, after: $after) { nodes { ${TRANSACTION_FIELDS} } pageInfo { endCursor hasNextPage } } } }`,
            variables,
            (data) => data.account.transactions,
          )
          // The block the history ends at, as JSON-RPC resolves the argument; an unknown one is refused as eth_getLogs refuses it.
          const end = (await rpcBlock(form)).result as RpcBlock | null
          if (end === null) {
            const reference =
              'hash' in form.input
                ? await jsonRpc('eth_getLogs', [{ address, blockHash: form.input.hash }])
                : await jsonRpc('eth_getLogs', [{ address, fromBlock: '0x0', toBlock: form.rpc }])
            expectSameError(logs.errors, reference.error, `logs of ${label}`)
            expectSameError(transactions.errors, reference.error, `transactions of ${label}`)
            return
          }
          const reference = await jsonRpc('eth_getLogs', [{ address, fromBlock: '0x0', toBlock: end.number }])
          expect(logs.errors, label).toBeUndefined()
          expect(logs.nodes, label).toEqual((reference.result as RpcLog[]).map(expectedLog))
          const lower = address.toLowerCase()
          const involved = blocks
            .slice(0, Number(end.number) + 1)
            .flatMap((block) => block.transactions)
            .filter((transaction) => transaction.from === lower || transaction.to === lower)
          expect(transactions.errors, label).toBeUndefined()
          expect(transactions.nodes, label).toEqual(involved.map(expectedTransaction))
          compared++
        },
      ),
      { numRuns: 60, seed: SEED },
    )
    expect(compared).toBeGreaterThan(30)
  })
})

describe('GraphQL errors a client can provoke', () => {
  test('a cursor past any position (a log or transaction index beyond 32 bits, a block beyond 2^53) is BAD_USER_INPUT, not an unexpected error', async () => {
    const cursor = (text: string) => Buffer.from(text).toString('base64url')
    for (const after of [cursor('1:9999999999'), cursor('1:2147483648'), cursor('9999999999999999:0'), cursor('9007199254740992:0')]) {
      for (const query of [
        `query ($after: String) { logs(filter: { fromBlock: { tag: EARLIEST } }, after: $after) { nodes { logIndex } } }`,
        `query ($after: String, $a: Address!) { account(address: $a) { logs(after: $after) { nodes { logIndex } } transactions(after: $after) { nodes { hash } } } }`,
      ]) {
        const answer = await graphql(query, { after, a: facts.contracts[0] })
        expect(answer.errors, `${query} after ${Buffer.from(after, 'base64url')}`).toBeDefined()
        for (const error of answer.errors!)
          expect(error, `${query} after ${Buffer.from(after, 'base64url')}`).toMatchObject({
            message: 'invalid argument after: not a cursor from this API',
            extensions: { code: 'BAD_USER_INPUT' },
          })
      }
    }
    // The largest position a page can end at is a cursor still.
    const answer = await graphql(`query ($after: String) { logs(filter: { fromBlock: { tag: EARLIEST } }, after: $after) { nodes { logIndex } } }`, {
      after: cursor('1:2147483647'),
    })
    expect(answer.errors).toBeUndefined()
  })
})

// Last: these send transactions and mine blocks.
describe('while transactions and blocks arrive', () => {
  test('pages walked while new blocks arrive are one eth_getLogs answer: from the block the first page started at to the head at the last', async () => {
    /** Mines a block of four transactions emitting logs (0 to 3 topics after the event's) and waits for the index to hold it. */
    const grow = async (seed: number) => {
      const from = (await result<Hex[]>(anvil.rpcUrl, 'eth_accounts'))[0]
      await result(anvil.rpcUrl, 'evm_setAutomine', [false])
      try {
        for (let count = 0; count < 4; count++) {
          const topic = `0x${(seed * 4 + count).toString(16).padStart(64, '0')}` as Hex
          const data = encodeFunctionData({ abi: tokenAbi, functionName: 'emitLogs', args: [count, topic, topic, topic, BigInt(seed)] })
          await result(anvil.rpcUrl, 'eth_sendTransaction', [{ from, to: facts.contracts[0], data, gas: '0x30000' }])
        }
        await result(anvil.rpcUrl, 'evm_mine')
      } finally {
        await result(anvil.rpcUrl, 'evm_setAutomine', [true])
      }
      const head = Number(await result<Hex>(anvil.rpcUrl, 'eth_blockNumber'))
      await gateway.ingester.waitForBlock(head)
      return head
    }
    const query = `query ($filter: LogFilter!, $after: String) { logs(filter: $filter, first: 2, after: $after) { nodes { ${LOG_FIELDS} } pageInfo { endCursor hasNextPage } } }`
    let seed = SEED
    for (const from of [{ tag: 'LATEST' }, { number: 'head' }, { tag: 'PENDING' }]) {
      const start = await grow(++seed)
      // A number stays; LATEST moves with the head; PENDING to PENDING is LATEST's block without a Flashblocks feed.
      const filter =
        'number' in from ? { fromBlock: { number: String(start) } } : from.tag === 'PENDING' ? { fromBlock: from, toBlock: from } : { fromBlock: from }
      const label = JSON.stringify(filter)
      const first = await graphql(query, { filter })
      expect(first.errors, label).toBeUndefined()
      expect(first.data.logs.pageInfo.hasNextPage, label).toBe(true)
      const nodes = [...first.data.logs.nodes]
      // The head moves on before the next page is asked for.
      const end = await grow(++seed)
      let after = first.data.logs.pageInfo.endCursor
      for (;;) {
        const page = await graphql(query, { filter, after })
        expect(page.errors, label).toBeUndefined()
        nodes.push(...page.data.logs.nodes)
        if (!page.data.logs.pageInfo.hasNextPage) break
        after = page.data.logs.pageInfo.endCursor
      }
      const reference = (await jsonRpc('eth_getLogs', [{ fromBlock: hex(start), toBlock: hex(end) }])).result as RpcLog[]
      expect(nodes, label).toEqual(reference.map(expectedLog))
    }
  })

  test('a transaction sent through the gateway and still in the pool reads as eth_getTransactionByHash answers it: no block yet', async () => {
    const account = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: POOL_SENDER })
    await result(anvil.rpcUrl, 'evm_setAutomine', [false])
    try {
      const nonce = Number(await result<Hex>(gateway.dedicatedUrl, 'eth_getTransactionCount', [account.address, 'pending']))
      const raw = await account.signTransaction({
        type: 'eip1559',
        chainId: 31337,
        nonce,
        to: facts.contracts[0]!,
        value: 5n,
        gas: 60_000n,
        maxFeePerGas: parseGwei('20'),
        maxPriorityFeePerGas: parseGwei('1'),
      })
      const hash = await result<Hex>(gateway.dedicatedUrl, 'eth_sendRawTransaction', [raw])
      const query = `query ($h: Hash!) { transaction(hash: $h) { ${TRANSACTION_FIELDS} block { number } receipt { status } logs { logIndex } } receipt(hash: $h) { status } }`
      const inPool = await result<RpcTransaction>(gateway.dedicatedUrl, 'eth_getTransactionByHash', [hash])
      expect(inPool.blockNumber).toBeNull()
      const answer = await graphql(query, { h: hash })
      expect(answer.errors).toBeUndefined()
      expect(answer.data).toEqual({ transaction: { ...expectedTransaction(inPool), block: null, receipt: null, logs: [] }, receipt: null })

      await result(anvil.rpcUrl, 'evm_mine')
      await gateway.ingester.waitForBlock(Number(await result<Hex>(anvil.rpcUrl, 'eth_blockNumber')))
      const mined = await result<RpcTransaction>(gateway.dedicatedUrl, 'eth_getTransactionByHash', [hash])
      const sealed = await graphql(query, { h: hash })
      expect(sealed.errors).toBeUndefined()
      expect(sealed.data.transaction).toMatchObject({ ...expectedTransaction(mined), block: { number: decimal(mined.blockNumber) }, receipt: { status: 1 } })
    } finally {
      await result(anvil.rpcUrl, 'evm_setAutomine', [true])
    }
  })
})
