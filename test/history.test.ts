import type { Hash, Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { useFollowedChain } from './fixtures/followed-chain.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'

// An index that starts at block 20 of a chain of 40: what lies below it is the chain's history too. By
// default it is answered from the upstream, exactly as the node answers it; `--history refuse` says so.
const FIRST_INDEXED = 20

const followed = useFollowedChain({ seed: 0x4157, blocks: 40, gateway: { startBlock: String(FIRST_INDEXED) } })

async function answer(url: string, method: string, params: unknown[]) {
  return rpc(url, method, params)
}

describe('history older than the index', () => {
  test('blocks, transactions, receipts, block receipts and state below the first indexed block equal the node, earliest is genesis', async () => {
    const { anvil, gateway, facts } = followed()
    const old = facts.blockHashes.slice(1, FIRST_INDEXED)
    const oldTransactions: Hash[] = []
    for (const [method, params] of [
      ['eth_getBlockByNumber', ['0x5', false]],
      ['eth_getBlockByNumber', ['0x5', true]],
      ['eth_getBlockByNumber', ['earliest', false]],
      ['eth_getBlockByHash', [old[3], true]],
      ['eth_getBlockReceipts', ['0x7']],
      ['eth_getBlockReceipts', [{ blockHash: old[6] }]],
      ['eth_getBalance', [facts.accounts[0], '0x4']],
      ['eth_getTransactionCount', [facts.accounts[0], '0x4']],
      // A log range across the index's start: the older part from the node, the rest from the index.
      ['eth_getLogs', [{ fromBlock: '0x2', toBlock: `0x${(FIRST_INDEXED + 5).toString(16)}` }]],
      ['eth_getLogs', [{ fromBlock: '0x2', toBlock: '0x9', address: facts.contracts[0] }]],
      // By the hash of a block below the index: its logs, and state at it, as the node answers them.
      ['eth_getLogs', [{ blockHash: old[8] }]],
      ['eth_getLogs', [{ blockHash: old[8], address: facts.contracts[0] }]],
      ['eth_getBalance', [facts.accounts[0], { blockHash: old[4] }]],
      ['eth_getTransactionCount', [facts.accounts[0], { blockHash: old[4], requireCanonical: true }]],
    ] as const) {
      const [ours, node] = await Promise.all([answer(gateway.dedicatedUrl, method, [...params]), answer(anvil.rpcUrl, method, [...params])])
      expect(ours, `${method} ${JSON.stringify(params)}`).toEqual(node)
      expect(ours.error, `${method} ${JSON.stringify(params)}`).toBeUndefined()
      expect(ours.result).not.toBeNull()
    }
    for (let number = 1; number < FIRST_INDEXED && oldTransactions.length < 5; number++) {
      const block = (await answer(anvil.rpcUrl, 'eth_getBlockByNumber', [`0x${number.toString(16)}`, false])).result as { transactions: Hash[] }
      oldTransactions.push(...block.transactions)
    }
    expect(oldTransactions.length).toBeGreaterThan(0)
    for (const hash of oldTransactions.slice(0, 5))
      for (const method of ['eth_getTransactionByHash', 'eth_getTransactionReceipt']) {
        const [ours, node] = await Promise.all([answer(gateway.dedicatedUrl, method, [hash]), answer(anvil.rpcUrl, method, [hash])])
        expect(ours).toEqual(node)
      }
    // GraphQL sees one chain too.
    const graphql = (await (
      await fetch(`${gateway.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ block(number: "5") { number hash } }' }),
      })
    ).json()) as { data: { block: { number: string; hash: Hex } | null } }
    expect(graphql.data.block).toEqual({ number: '5', hash: facts.blockHashes[5] })
    // Unknown stays unknown.
    expect((await answer(gateway.dedicatedUrl, 'eth_getTransactionByHash', [`0x${'ee'.repeat(32)}`])).result).toBeNull()
    expect((await answer(gateway.dedicatedUrl, 'eth_getLogs', [{ blockHash: `0x${'ee'.repeat(32)}` }])).error).toMatchObject({ code: -32000 })
    expect((await answer(gateway.dedicatedUrl, 'eth_getBalance', [facts.accounts[0], { blockHash: `0x${'ee'.repeat(32)}` }])).error).toMatchObject({
      code: -32001,
    })
    expect(gateway.resolvers.historyReads.eth_getBlockByNumber).toBeGreaterThan(0)
    expect(await (await fetch(`${gateway.url}/metrics`)).text()).toMatch(/flashgate_history_upstream_reads_total\{method="eth_getBlockByNumber"\} [1-9]/)
  })

  test('a hash neither the index nor the node has costs the node one round trip, not one per poll; a known one is still found', async () => {
    const { gateway, facts } = followed()
    const unknown = `0x${'ab'.repeat(32)}` as Hash
    const reads = () => ({ ...gateway.resolvers.historyReads })
    const before = reads()
    for (let poll = 0; poll < 5; poll++) {
      expect((await answer(gateway.dedicatedUrl, 'eth_getTransactionReceipt', [unknown])).result).toBeNull()
      expect((await answer(gateway.dedicatedUrl, 'eth_getTransactionByHash', [unknown])).result).toBeNull()
      expect((await answer(gateway.dedicatedUrl, 'eth_getBlockByHash', [unknown, false])).result).toBeNull()
    }
    const after = reads()
    for (const method of ['eth_getTransactionReceipt', 'eth_getTransactionByHash', 'eth_getBlockByHash'])
      expect((after[method] ?? 0) - (before[method] ?? 0), method).toBe(1)
    // An old block's hash is still answered from the node.
    expect((await answer(gateway.dedicatedUrl, 'eth_getBlockByHash', [facts.blockHashes[3], false])).result).toMatchObject({ hash: facts.blockHashes[3] })
  })

  describe('--history refuse', () => {
    let database: TestDatabase
    let refusing: TestGateway
    beforeAll(async () => {
      database = await createTestDatabase()
      refusing = await startTestGateway({
        upstreamRpc: followed().anvil.rpcUrl,
        databaseUrl: database.databaseUrl,
        startBlock: String(FIRST_INDEXED),
        history: 'refuse',
      })
      await refusing.ingester.waitForBlock(followed().facts.head)
    })
    afterAll(async () => {
      await refusing?.stop()
      await database?.drop()
    })

    test('a read below the index is a clear error naming the first indexed block, never a silent null', async () => {
      for (const [method, params] of [
        ['eth_getBlockByNumber', ['0x5', false]],
        ['eth_getBlockByNumber', ['earliest', false]],
        ['eth_getBlockReceipts', ['0x7']],
        ['eth_getBalance', [followed().facts.accounts[0], '0x4']],
        ['eth_getLogs', [{ fromBlock: '0x2', toBlock: 'latest' }]],
      ] as const) {
        const { error } = await answer(refusing.dedicatedUrl, method, [...params])
        expect(error, method).toMatchObject({ code: -32000, message: expect.stringContaining(`before block 0x${FIRST_INDEXED.toString(16)}`) })
      }
      // The range the index can answer, as words a retrying client parses and as data.
      const { error } = (await answer(refusing.dedicatedUrl, 'eth_getLogs', [{ fromBlock: '0x2', toBlock: '0x18' }])) as {
        error?: { message: string; data?: unknown }
      }
      expect(error?.message).toContain('Try with this block range [0x14, 0x18].')
      expect(error?.data).toMatchObject({ from: '0x14', to: '0x18' })
    })
  })
})
