import { ClientError, GraphQLClient } from 'graphql-request'
import { pino } from 'pino'
import type { RpcBlock, RpcLog, RpcTransaction, RpcTransactionReceipt } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createResolvers } from '../src/resolvers/index.js'
import { MAX_COMPLEXITY_IN_FLIGHT } from '../src/schema/admission.js'
import { createGraphqlServer, type GraphqlServer } from '../src/schema/index.js'
import { type Anvil, startAnvil } from './fixtures/anvil.js'
import { type GeneratedChain, generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
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
import { countStatements } from './fixtures/statements.js'

const SEED = 4004
const BLOCKS = 30
/** Small enough that the whole chain's logs overflow one `eth_getLogs`, so paging is exercised. */
const MAX_LOGS = 40

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let chain: GeneratedChain
let head: number
let client: GraphQLClient
let yoga: GraphqlServer

async function call<result>(method: string, params: unknown[]): Promise<result> {
  const answer = await rpc(gateway.dedicatedUrl, method, params)
  if (answer.error) throw new Error(`${method}: ${answer.error.message}`)
  return answer.result as result
}

/** One GraphQL request through `yoga.fetch`, without a port: the whole JSON answer. */
async function yogaQuery(query: string, variables?: Record<string, unknown>) {
  const response = await yoga.fetch('http://flashgate.test/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  })
  return (await response.json()) as { data?: Record<string, any> | null; errors?: { message: string; extensions?: { code?: string } }[] }
}

/**
 * A GraphQL server over the gateway's database with other limits (fresh resolvers: nothing cached), and one
 * request through it, without a port: the whole JSON answer.
 */
function serverWith(limits: Partial<typeof gateway.resolvers.limits>) {
  const resolvers = createResolvers({ db: gateway.db, upstream: null })
  const server = createGraphqlServer({ resolvers, limits: { ...resolvers.limits, ...limits }, maxBodyBytes: 1_048_576, logger: pino({ level: 'silent' }) })
  const request = async (query: string, variables?: Record<string, unknown>) => {
    const response = await server.fetch('http://flashgate.test/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
    })
    return (await response.json()) as { data?: Record<string, any>; errors?: unknown }
  }
  return { server, request }
}

/** Every log of the chain, walked page by page through GraphQL. */
async function allLogPages(filter: Record<string, unknown>, first: number) {
  const logs: Record<string, unknown>[] = []
  let after: string | null = null
  let pages = 0
  for (;;) {
    const page: any = await client.request(
      `query ($filter: LogFilter!, $first: Int!, $after: String) { logs(filter: $filter, first: $first, after: $after) { nodes { ${LOG_FIELDS} } pageInfo { endCursor hasNextPage } } }`,
      { filter, first, after },
    )
    logs.push(...page.logs.nodes)
    pages++
    if (!page.logs.pageInfo.hasNextPage) return { logs, pages }
    after = page.logs.pageInfo.endCursor
  }
}

beforeAll(async () => {
  anvil = await startAnvil()
  chain = await generateChain(anvil.rpcUrl, { seed: SEED, blocks: BLOCKS })
  head = Number(chain.headNumber)
  database = await createTestDatabase()
  gateway = await startTestGateway({
    upstreamRpc: anvil.rpcUrl,
    databaseUrl: database.databaseUrl,
    maxLogs: MAX_LOGS,
    maxBlockRange: 1_000,
    publicMaxLogs: MAX_LOGS,
    publicMaxBlockRange: 1_000,
  })
  await gateway.ingester.waitForBlock(head)
  client = new GraphQLClient(`${gateway.url}/graphql`)
  yoga = createGraphqlServer({
    resolvers: gateway.resolvers,
    limits: gateway.resolvers.limits,
    maxBodyBytes: 1_048_576,
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
  })
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('GraphQL answers what JSON-RPC answers for the same chain', () => {
  test('block by number, by hash and by tag, and blocks(from, to)', async () => {
    const middle = Math.floor(head / 2)
    const reference = await call<RpcBlock>('eth_getBlockByNumber', [hex(middle), false])
    const latest = await call<RpcBlock>('eth_getBlockByNumber', ['latest', false])
    const data: any = await client.request(
      `query ($number: BigInt, $hash: Hash) {
        byNumber: block(number: $number) { ${BLOCK_FIELDS} }
        byHash: block(hash: $hash) { ${BLOCK_FIELDS} }
        byTag: block(tag: LATEST) { ${BLOCK_FIELDS} }
        byDefault: block { number }
        pending: block(tag: PENDING) { number }
        unknown: block(number: "999999") { number }
        blocks(from: { number: 1 }, to: { tag: LATEST }) { number hash }
        chainId
        blockNumber
      }`,
      { number: String(middle), hash: reference.hash },
    )
    expect(data.byNumber).toEqual(expectedBlock(reference))
    expect(data.byHash).toEqual(expectedBlock(reference))
    expect(data.byTag).toEqual(expectedBlock(latest))
    expect(data.byDefault.number).toBe(String(head))
    // No Flashblocks feed: `PENDING` answers as `LATEST`.
    expect(data.pending.number).toBe(String(head))
    expect(data.unknown).toBeNull()
    expect(data.blocks.map((block: { number: string }) => Number(block.number))).toEqual(Array.from({ length: head }, (_, index) => index + 1))
    const fifth = await call<RpcBlock>('eth_getBlockByNumber', ['0x5', false])
    expect(data.blocks[4].hash).toBe(fifth.hash)
    expect(data.chainId).toBe(decimal(await call<string>('eth_chainId', [])))
    expect(data.blockNumber).toBe(String(head))
  })

  test('every transaction and receipt by hash, and every block’s receipts, with nested blocks and logs', async () => {
    const blocks = await Promise.all(Array.from({ length: head + 1 }, (_, number) => call<RpcBlock>('eth_getBlockByNumber', [hex(number), false])))
    const hashes = blocks.flatMap((block) => block.transactions as string[])
    expect(hashes.length).toBeGreaterThan(BLOCKS)
    for (const hash of hashes.slice(0, 40)) {
      const [transaction, receipt] = await Promise.all([
        call<RpcTransaction>('eth_getTransactionByHash', [hash]),
        call<RpcTransactionReceipt>('eth_getTransactionReceipt', [hash]),
      ])
      const data: any = await client.request(
        `query ($hash: Hash!) {
          transaction(hash: $hash) { ${TRANSACTION_FIELDS} block { hash } receipt { status } logs { logIndex } }
          receipt(hash: $hash) { ${RECEIPT_FIELDS} transaction { hash } block { number } }
        }`,
        { hash },
      )
      const { block, receipt: nestedReceipt, logs, ...fields } = data.transaction
      expect(fields).toEqual(expectedTransaction(transaction))
      expect(block.hash).toBe(transaction.blockHash)
      expect(nestedReceipt.status).toBe(Number(receipt.status))
      expect(logs.map((log: { logIndex: number }) => log.logIndex)).toEqual(receipt.logs.map((log) => Number(log.logIndex)))
      const { transaction: nestedTransaction, block: receiptBlock, ...receiptFields } = data.receipt
      expect(receiptFields).toEqual(expectedReceipt(receipt))
      expect(nestedTransaction.hash).toBe(hash)
      expect(receiptBlock.number).toBe(decimal(receipt.blockNumber))
    }
    for (const number of [1, Math.floor(head / 2), head]) {
      const reference = await call<RpcTransactionReceipt[]>('eth_getBlockReceipts', [hex(number)])
      const data: any = await client.request(
        `query ($n: BigInt!) { receipts(block: { number: $n }) { ${RECEIPT_FIELDS} } block(number: $n) { receipts { transactionHash } logs { logIndex } } }`,
        {
          n: String(number),
        },
      )
      expect(data.receipts).toEqual(reference.map(expectedReceipt))
      expect(data.block.receipts.map((receipt: { transactionHash: string }) => receipt.transactionHash)).toEqual(
        reference.map((receipt) => receipt.transactionHash),
      )
      expect(data.block.logs.length).toBe(reference.flatMap((receipt) => receipt.logs).length)
    }
    expect((await client.request<any>(`{ receipts(block: { number: "999999" }) { transactionHash } }`)).receipts).toBeNull()
    expect((await client.request<any>(`{ transaction(hash: "0x${'ab'.repeat(32)}") { hash } }`)).transaction).toBeNull()
  })

  test('logs(filter) has eth_getLogs semantics, and pages past the result cap that eth_getLogs refuses', async () => {
    // The whole chain overflows one eth_getLogs of at most MAX_LOGS results …
    const refused = await rpc(gateway.url, 'eth_getLogs', [{ fromBlock: 'earliest', toBlock: 'latest' }])
    expect(refused.error?.message).toMatch(/more than 40 results/)
    // … and pages of GraphQL walk every log, equal to the reference node's.
    const everything = (await rpc(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: 'earliest', toBlock: 'latest' }])).result as RpcLog[]
    expect(everything.length).toBeGreaterThan(MAX_LOGS * 2)
    const { logs, pages } = await allLogPages({ fromBlock: { tag: 'EARLIEST' }, toBlock: { tag: 'LATEST' } }, 17)
    expect(pages).toBe(Math.ceil(everything.length / 17))
    expect(logs).toEqual(everything.map(expectedLog))

    // Address and topic filters (OR lists, null wildcards), one block by hash: the same logs as eth_getLogs.
    const topic = chain.topics[0]!
    const filters: [Record<string, unknown>, Record<string, unknown>][] = [
      [
        { address: chain.contracts[0], fromBlock: '0x1', toBlock: 'latest' },
        { addresses: [chain.contracts[0]], fromBlock: { number: 1 }, toBlock: { tag: 'LATEST' } },
      ],
      [
        { address: chain.contracts, topics: [null, [topic, chain.topics[1]]], fromBlock: '0x1' },
        { addresses: chain.contracts, topics: [null, [topic, chain.topics[1]]], fromBlock: { number: 1 } },
      ],
      [
        { topics: [topic], fromBlock: hex(2), toBlock: hex(head - 1) },
        { topics: [[topic]], fromBlock: { number: 2 }, toBlock: { number: head - 1 } },
      ],
    ]
    const busiest = everything.reduce((counts, log) => counts.set(log.blockHash!, (counts.get(log.blockHash!) ?? 0) + 1), new Map<string, number>())
    const blockHash = [...busiest.entries()].sort((a, b) => b[1] - a[1])[0]![0]
    filters.push([{ blockHash }, { blockHash }])
    for (const [rpcFilter, graphqlFilter] of filters) {
      const reference = (await rpc(anvil.rpcUrl, 'eth_getLogs', [rpcFilter])).result as RpcLog[]
      const paged = await allLogPages(graphqlFilter, MAX_LOGS)
      expect(paged.logs, JSON.stringify(graphqlFilter)).toEqual(reference.map(expectedLog))
    }
    // A filter that fits is exactly what flashgate's own eth_getLogs answers.
    const fits = await call<RpcLog[]>('eth_getLogs', [{ blockHash }])
    const data: any = await client.request(`query ($h: Hash!) { logs(filter: { blockHash: $h }) { nodes { ${LOG_FIELDS} } pageInfo { hasNextPage } } }`, {
      h: blockHash,
    })
    expect(data.logs.nodes).toEqual(fits.map(expectedLog))
    expect(data.logs.pageInfo.hasNextPage).toBe(false)
  })

  test('account(address, block): balance, transactionCount, logs and transactions', async () => {
    const sender = chain.senders[0]!
    const contract = chain.contracts[0]!
    for (const number of [0, Math.floor(head / 2), head]) {
      const data: any = await client.request(
        `query ($a: Address!, $n: BigInt!) { account(address: $a, block: { number: $n }) { address balance transactionCount } }`,
        {
          a: sender,
          n: String(number),
        },
      )
      expect(data.account.balance).toBe(decimal(await call<string>('eth_getBalance', [sender, hex(number)])))
      expect(data.account.transactionCount).toBe(decimal(await call<string>('eth_getTransactionCount', [sender, hex(number)])))
    }
    const latest: any = await client.request(
      `query ($a: Address!) { account(address: $a) { balance } pending: account(address: $a, block: { tag: PENDING }) { balance transactionCount } }`,
      { a: sender },
    )
    expect(latest.account.balance).toBe(decimal(await call<string>('eth_getBalance', [sender, 'latest'])))
    expect(latest.pending.transactionCount).toBe(decimal(await call<string>('eth_getTransactionCount', [sender, 'pending'])))

    // The account's transactions: every transaction of the chain it sent or received, in chain order.
    const blocks = await Promise.all(
      Array.from({ length: head + 1 }, (_, number) => call<RpcBlock<'latest', true>>('eth_getBlockByNumber', [hex(number), true])),
    )
    const involved = blocks
      .flatMap((block) => block.transactions)
      .filter((transaction) => transaction.from === sender.toLowerCase() || transaction.to === sender.toLowerCase())
    const transactions: string[] = []
    let after: string | null = null
    for (;;) {
      const page: any = await client.request(
        `query ($a: Address!, $after: String) { account(address: $a) { transactions(first: 7, after: $after) { nodes { hash from to } pageInfo { endCursor hasNextPage } } } }`,
        { a: sender, after },
      )
      transactions.push(...page.account.transactions.nodes.map((node: { hash: string }) => node.hash))
      if (!page.account.transactions.pageInfo.hasNextPage) break
      after = page.account.transactions.pageInfo.endCursor
    }
    expect(transactions).toEqual(involved.map((transaction) => transaction.hash))

    const reference = (await rpc(anvil.rpcUrl, 'eth_getLogs', [{ address: contract, fromBlock: 'earliest', toBlock: hex(head - 3) }])).result as RpcLog[]
    const logs: unknown[] = []
    after = null
    for (;;) {
      const page: any = await client.request(
        `query ($a: Address!, $n: BigInt!, $after: String) { account(address: $a, block: { number: $n }) { logs(after: $after) { nodes { ${LOG_FIELDS} } pageInfo { endCursor hasNextPage } } } }`,
        { a: contract, n: String(head - 3), after },
      )
      logs.push(...page.account.logs.nodes)
      if (!page.account.logs.pageInfo.hasNextPage) break
      after = page.account.logs.pageInfo.endCursor
    }
    expect(reference.length).toBeGreaterThan(MAX_LOGS)
    expect(logs).toEqual(reference.map(expectedLog))
  })

  test("an account's history paged while the head moves reads the window of its first page: nothing skipped, nothing added", async () => {
    // A window of 5 blocks; the account asked at a block that moves up one block a page, as `LATEST` does.
    const { request } = serverWith({ maxBlockRange: 5 })
    type Page = { nodes: Record<string, string>[]; pageInfo: { endCursor: string; hasNextPage: boolean } }
    const post = async (query: string, variables: Record<string, unknown>) => (await request(query, variables)).data!.account as Record<string, Page>
    const first = Math.floor(head / 2)
    const walk = async (field: 'transactions' | 'logs', address: string, selection: string) => {
      const items: string[] = []
      let after: string | null = null
      for (let page = 0; ; page++) {
        const account = await post(
          `query ($a: Address!, $n: BigInt!, $after: String) { account(address: $a, block: { number: $n }) { ${field}(first: 1, after: $after) { nodes { ${selection} } pageInfo { endCursor hasNextPage } } } }`,
          { a: address, n: String(Math.min(head, first + page)), after },
        )
        items.push(...account[field]!.nodes.map((node) => Object.values(node).join(':')))
        if (!account[field]!.pageInfo.hasNextPage) return items
        after = account[field]!.pageInfo.endCursor
      }
    }
    const window = [first - 4, first].map(hex)
    const blocks = await Promise.all(
      Array.from({ length: 5 }, (_, offset) => call<RpcBlock<'latest', true>>('eth_getBlockByNumber', [hex(first - 4 + offset), true])),
    )
    const sender = chain.senders[0]!.toLowerCase()
    const sent = blocks.flatMap((block) => block.transactions).filter((transaction) => transaction.from === sender || transaction.to === sender)
    expect(sent.length).toBeGreaterThan(1)
    expect(await walk('transactions', sender, 'hash')).toEqual(sent.map((transaction) => transaction.hash))
    const contract = chain.contracts[0]!
    const logs = (await rpc(anvil.rpcUrl, 'eth_getLogs', [{ address: contract, fromBlock: window[0], toBlock: window[1] }])).result as RpcLog[]
    expect(logs.length).toBeGreaterThan(1)
    expect(await walk('logs', contract, 'blockNumber logIndex')).toEqual(logs.map((log) => `${Number(log.blockNumber)}:${Number(log.logIndex)}`))
  })

  test('queries that take memory by their complexity run a few at a time; all are answered, cheap ones at once', async () => {
    const aliases = Array.from(
      { length: 15 },
      (_, at) =>
        `a${at}: logs(filter: { fromBlock: { number: ${at} }, toBlock: { tag: LATEST } }, first: 1000) { nodes { address block { number } transaction { from } } }`,
    ).join(' ')
    const heavy = `{ ${aliases} }`
    // Resolvers over the same database, with room for 1,000 logs a page.
    const { server: roomy, request } = serverWith({ maxLogs: 1_000 })
    const post = (query: string) => request(query) as Promise<{ data?: Record<string, { nodes: unknown[] }>; errors?: unknown }>
    const answers = Promise.all(Array.from({ length: 6 }, () => post(heavy)))
    // A cheap query is not held behind them.
    expect((await post('{ blockNumber }')).data).toEqual({ blockNumber: String(head) })
    for (const answer of await answers) {
      expect(answer.errors).toBeUndefined()
      expect(answer.data!.a0!.nodes.length).toBeGreaterThan(MAX_LOGS)
    }
    const figures = roomy.complexityGate.figures()
    // Each weighs ~90,000: two ran at once at most, and the gate is empty again.
    expect(figures.peak).toBeGreaterThan(MAX_COMPLEXITY_IN_FLIGHT / 2)
    expect(figures.peak).toBeLessThanOrEqual(MAX_COMPLEXITY_IN_FLIGHT)
    expect(figures.waited).toBeGreaterThan(0)
    expect(figures).toMatchObject({ running: 0, waiting: 0 })
  })

  test('100 logs with their blocks, transactions and receipts cost a constant number of SQL statements', async () => {
    const query = `query ($first: Int!) { logs(filter: { fromBlock: { tag: EARLIEST }, toBlock: { tag: LATEST } }, first: $first) {
      nodes { logIndex block { number timestamp transactionCount } transaction { hash from value } receipt { status gasUsed } }
    } }`
    // Resolvers over the same database, with room for 100 logs in one page.
    const resolvers = createResolvers({ db: gateway.db, upstream: null })
    const roomy = createGraphqlServer({ resolvers, limits: resolvers.limits, maxBodyBytes: 1_048_576, logger: pino({ level: 'silent' }) })
    const measure = async (first: number) => {
      // Every measurement reads the head afresh (it is cached for 100 ms), so that none gets it for free.
      resolvers.chain.invalidate()
      const counter = countStatements(gateway.db)
      try {
        const response = await roomy.fetch('http://flashgate.test/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query, variables: { first } }),
        })
        const answer = (await response.json()) as { data: any; errors?: unknown }
        expect(answer.errors).toBeUndefined()
        expect(answer.data!.logs.nodes).toHaveLength(first)
        return counter.count
      } finally {
        counter.stop()
      }
    }
    // The gateway's own ingester polls the same database; it pauses so that only the query's statements count.
    await gateway.ingester.stop()
    let few: number
    let many: number
    try {
      ;[few, many] = [await measure(5), await measure(100)]
    } finally {
      gateway.ingester.start()
    }
    console.info(`SQL statements: ${few} for 5 nested logs, ${many} for 100`)
    expect(many).toBe(few)
    expect(many).toBeLessThanOrEqual(8)
  }, 30_000)
})

describe('GraphQL errors', () => {
  async function expectError(query: string, code: string | undefined, message?: RegExp, variables?: Record<string, unknown>) {
    const answer = await yogaQuery(query, variables)
    const error = answer.errors?.[0]
    expect(error, query.slice(0, 200)).toBeDefined()
    expect(error!.extensions?.code, `${query.slice(0, 200)}: ${error!.message}`).toBe(code)
    if (message) expect(error!.message).toMatch(message)
    // The server keeps serving.
    expect((await yogaQuery('{ blockNumber }')).data?.blockNumber).toBe(String(head))
    return error!
  }

  test('invalid arguments are BAD_USER_INPUT with a message naming the problem', async () => {
    await expectError(`{ account(address: "0x1234") { balance } }`, 'BAD_USER_INPUT', /Address.*20-byte/)
    await expectError(`query ($a: Address!) { account(address: $a) { balance } }`, 'BAD_USER_INPUT', /20-byte/, { a: '0xnothex' })
    await expectError(`{ transaction(hash: "0xabc") { hash } }`, 'BAD_USER_INPUT', /32-byte/)
    await expectError(`{ block(tag: NEWEST) { number } }`, 'GRAPHQL_VALIDATION_FAILED', /NEWEST/)
    await expectError(`{ block(number: "1", tag: LATEST) { number } }`, 'BAD_USER_INPUT', /at most one/)
    await expectError(`{ blocks(from: { number: 1, tag: LATEST }) { number } }`, 'GRAPHQL_VALIDATION_FAILED', /exactly one/)
    await expectError(
      `{ logs(filter: { blockHash: "0x${'11'.repeat(32)}", fromBlock: { number: 1 } }) { nodes { logIndex } } }`,
      'BAD_USER_INPUT',
      /BlockHash and FromBlock/,
    )
    await expectError(`{ logs(filter: { topics: [null, null, null, null, null] }) { nodes { logIndex } } }`, 'BAD_USER_INPUT', /exceed max topics/)
    await expectError(`{ logs(filter: {}, after: "bogus") { nodes { logIndex } } }`, 'BAD_USER_INPUT', /cursor/)
    await expectError(`{ logs(filter: { fromBlock: { number: 5 }, toBlock: { number: 2 } }) { nodes { logIndex } } }`, 'BAD_USER_INPUT', /invalid block range/)
    // Integers: what is wrong with them, in GraphQL's terms (decimal), not JSON-RPC's (hex).
    expect((await expectError(`{ block(number: "-1") { number } }`, 'BAD_USER_INPUT')).message).toMatch(/non-negative integer, got a negative one/)
    expect((await expectError(`{ block(number: "1${'0'.repeat(80)}") { number } }`, 'BAD_USER_INPUT')).message).toMatch(/integer exceeds 256 bits/)
    expect((await expectError(`{ block(number: "1.5") { number } }`, 'BAD_USER_INPUT')).message).toMatch(/non-negative integer as a decimal string/)
    expect((await expectError(`{ block(number: "18446744073709551616") { number } }`, 'BAD_USER_INPUT')).message).toBe(
      'invalid argument block.number: block number larger than int64 (at most 9223372036854775807)',
    )
    expect((await expectError(`{ logs(filter: { fromBlock: { number: "9223372036854775808" } }) { nodes { logIndex } } }`, 'BAD_USER_INPUT')).message).toBe(
      'invalid argument filter.fromBlock.number: block number larger than int64 (at most 9223372036854775807)',
    )
    // Lists past their limits name the limit and GraphQL's field, in the words eth_getLogs uses (not zod's "Invalid input").
    const addresses = Array.from({ length: 1_001 }, (_, index) => `"0x${index.toString(16).padStart(40, '0')}"`).join(', ')
    const tooMany = await expectError(`{ logs(filter: { addresses: [${addresses}] }) { nodes { logIndex } } }`, 'BAD_USER_INPUT')
    expect(tooMany.message).toBe('invalid argument filter.addresses: too many addresses: at most 1000 per filter')
    const topics = Array.from({ length: 1_001 }, (_, index) => `"0x${index.toString(16).padStart(64, '0')}"`).join(', ')
    const tooManyTopics = await expectError(`{ logs(filter: { topics: [[${topics}]] }) { nodes { logIndex } } }`, 'BAD_USER_INPUT')
    expect(tooManyTopics.message).toBe('invalid argument filter.topics.0: too many topic alternatives: at most 1000 per position')
  })

  test('every refusal carries extensions.code: variables of the wrong value or missing are BAD_USER_INPUT, an operation the schema has not is a validation error', async () => {
    await expectError(`query ($t: BlockTag) { block(tag: $t) { number } }`, 'BAD_USER_INPUT', /Variable "\$t" got invalid value "latest"/, { t: 'latest' })
    await expectError(
      `query ($a: Address!) { account(address: $a) { balance } }`,
      'BAD_USER_INPUT',
      /Variable "\$a" of required type "Address!" was not provided/,
    )
    await expectError(`mutation { x }`, 'GRAPHQL_VALIDATION_FAILED')
  })

  test('a range beyond the limits or the head, and unknown blocks, get the eth_getLogs errors with a range that fits', async () => {
    await expectError(`{ logs(filter: { fromBlock: { number: 0 }, toBlock: { number: 5000 } }) { nodes { logIndex } } }`, 'BLOCK_RANGE_BEYOND_HEAD')
    await expectError(`{ blocks(from: { number: 0 }, to: { number: 500 }) { number } }`, 'BLOCK_RANGE_BEYOND_HEAD')
    const wholeChain = await yogaQuery(`{ blocks(from: { tag: EARLIEST }, to: { number: ${head} }) { number } }`)
    expect(wholeChain.errors).toBeUndefined()
    await expectError(`{ logs(filter: { blockHash: "0x${'11'.repeat(32)}" }) { nodes { logIndex } } }`, 'UNKNOWN_BLOCK')
    await expectError(`{ account(address: "0x${'22'.repeat(20)}", block: { number: 99999 }) { balance } }`, 'HEADER_NOT_FOUND')
    await expectError(`{ logs(filter: {}, first: 50) { nodes { logIndex } } }`, 'LIMIT_EXCEEDED', /at most 40/)
  })

  test("a body over the public policy's size is 413 REQUEST_ENTITY_TOO_LARGE, as JSON-RPC's public endpoint refuses it", async () => {
    const post = (variables: Record<string, string>) =>
      fetch(`${gateway.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ blockNumber }', variables }),
      })
    const filler = (bytes: number) => ({ filler: 'x'.repeat(bytes) })
    const refused = await post(filler(1_048_576))
    expect(refused.status).toBe(413)
    expect(((await refused.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('REQUEST_ENTITY_TOO_LARGE')
    const under = await post(filler(1_048_576 - 200))
    expect(under.status).toBe(200)
    expect(((await under.json()) as { data: { blockNumber: string } }).data.blockNumber).toBe(String(head))
  })

  test('a too-deep, too-costly, too-aliased or too-long query is refused before it reaches the database', async () => {
    const deep = `{ block { transactions { block { transactions { block { transactions { block { transactions { block { transactions { hash } } } } } } } } } } }`
    expect((await expectError(deep, 'QUERY_TOO_COMPLEX', /depth/)).message).toMatch(/depth 11 exceeds the limit of 10/)
    await expectError(
      `{ logs(filter: {}, first: 10000) { nodes { block { transactions { logs { address } } } } } }`,
      'QUERY_TOO_COMPLEX',
      /complexity \d+ exceeds the limit of 100000/,
    )
    // A block's lists weigh what a Base block holds (hundreds of transactions, thousands of logs), so a short
    // query that goes from each log back to its block's logs is refused, while one block's logs are not.
    await expectError(`{ block { logs { block { logs { logIndex } } } } }`, 'QUERY_TOO_COMPLEX', /complexity \d+ exceeds the limit of 100000/)
    await expectError(`{ block { transactions { block { receipts { status } } } } }`, 'QUERY_TOO_COMPLEX', /complexity/)
    expect(await yogaQuery(`{ block { logs { logIndex address } transactions { hash } } }`)).toMatchObject({ data: { block: { logs: expect.any(Array) } } })
    const aliases = Array.from({ length: 20 }, (_, index) => `b${index}: blockNumber`).join(' ')
    await expectError(`{ ${aliases} }`, 'GRAPHQL_VALIDATION_FAILED', /Aliases limit of 15 exceeded/)
    const long = `{ ${Array.from({ length: 6_000 }, () => 'blockNumber').join(' ')} }`
    await expectError(long, 'GRAPHQL_PARSE_FAILED', /Token limit of 5000 exceeded/)
    // Too wide: one field 301 or 1,500 times (past ~1,000, graphql-js's own merge check gives up), directly or
    // spread through fragments, is the breadth limit, counted as the complexity plugin counts it.
    for (const times of [301, 1_500]) {
      const wide = `{ block { ${'number '.repeat(times)}} }`
      expect((await expectError(wide, 'QUERY_TOO_COMPLEX', /breadth/)).message).toBe(`query breadth ${times + 1} exceeds the limit of 300`)
    }
    const spread = `{ block { ...A ...A } } fragment A on Block { ${'number '.repeat(800)}}`
    expect((await expectError(spread, 'QUERY_TOO_COMPLEX', /breadth/)).message).toBe('query breadth 1601 exceeds the limit of 300')
  })

  test('an unexpected failure is masked: no SQL or stack in the answer', async () => {
    const broken = createGraphqlServer({
      resolvers: { ...gateway.resolvers, blocksByNumbers: () => Promise.reject(new Error('relation "blocks" does not exist')) },
      limits: gateway.resolvers.limits,
      maxBodyBytes: 1_048_576,
      logger: pino({ level: 'silent' }),
    })
    const response = await broken.fetch('http://flashgate.test/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ blocks(from: { number: 1 }, to: { number: 2 }) { number } }' }),
    })
    const answer = (await response.json()) as { errors: { message: string; extensions?: unknown }[] }
    expect(answer.errors[0]!.message).toBe('Unexpected error.')
    expect(JSON.stringify(answer)).not.toMatch(/relation|blocks" does not/)
  })

  test('graphql-request sees expected errors as ClientError with extensions.code', async () => {
    const error = await client
      .request(`{ logs(filter: { fromBlock: { number: 0 }, toBlock: { number: 5000 } }) { nodes { logIndex } } }`)
      .catch((error: unknown) => error)
    expect(error).toBeInstanceOf(ClientError)
    expect((error as ClientError).response.errors?.[0]?.extensions?.code).toBe('BLOCK_RANGE_BEYOND_HEAD')
  })
})
