import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { generateQueries, readChainFacts, wholeChainQueries } from './fixtures/queries.js'
import { createRandom } from './fixtures/random.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

const QUERIES_AFTER_REORG = 400

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
const reorgs: { ancestor: number; removedLogs: number }[] = []

async function filterOf(method: string, params: unknown[] = []): Promise<string> {
  return (await rpc(gateway.url, method, params)).result as string
}

async function changesOf(filter: string): Promise<unknown[]> {
  const answer = await rpc(gateway.url, 'eth_getFilterChanges', [filter])
  expect(answer.error).toBeUndefined()
  return answer.result as unknown[]
}

async function graphql<data>(query: string, variables: Record<string, unknown>) {
  const response = await fetch(`${gateway.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  })
  return (await response.json()) as { data?: data; errors?: { message: string; extensions?: { code?: string } }[] }
}

async function expectSameChain() {
  await waitForSameHead(gateway, anvil.rpcUrl)
  const senders = (await anvilCall<string[]>(anvil.rpcUrl, 'eth_accounts')).slice(0, 8) as `0x${string}`[]
  const facts = await readChainFacts(anvil.rpcUrl, { accounts: senders, contracts: [] })
  const logs = await anvilCall<{ address: `0x${string}` }[]>(anvil.rpcUrl, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }])
  facts.contracts = [...new Set(logs.map((log) => log.address))]
  const outcome = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, [
    ...wholeChainQueries(facts),
    ...generateQueries(createRandom(facts.head), facts, QUERIES_AFTER_REORG),
  ])
  return { facts, outcome }
}

beforeAll(async () => {
  anvil = await startAnvil()
  await generateChain(anvil.rpcUrl, { seed: 1, blocks: 15 })
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  gateway.ingester.events.on('reorg', ({ ancestor, removedLogs }) => reorgs.push({ ancestor, removedLogs }))
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('reorgs', () => {
  test('a longer competing branch replaces the indexed one, and the removed logs are reported', async () => {
    const ancestor = Number.parseInt(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber'), 16)
    const snapshot = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
    const filters = { blocks: await filterOf('eth_newBlockFilter'), logs: await filterOf('eth_newFilter', [{}]) }
    await generateChain(anvil.rpcUrl, { seed: 2, blocks: 6 })
    await waitForSameHead(gateway, anvil.rpcUrl)
    const fromAncestor = { fromBlock: `0x${(ancestor + 1).toString(16)}`, toBlock: 'latest' }
    const orphaned = (await rpc(gateway.url, 'eth_getLogs', [fromAncestor])).result as unknown[]
    expect(orphaned.length).toBeGreaterThan(0)
    expect(await changesOf(filters.logs)).toEqual(orphaned)
    const orphanedHead = Number.parseInt(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber'), 16)
    expect(await changesOf(filters.blocks)).toHaveLength(orphanedHead - ancestor)
    // Installed on the branch about to be replaced: as in geth, it hears of the replaced logs it matches too.
    const emitter = (orphaned[0] as { address: string }).address
    const byEmitter = (logs: unknown[]) => logs.filter((log) => (log as { address: string }).address === emitter)
    const emitterFilter = await filterOf('eth_newFilter', [{ address: emitter, fromBlock: fromAncestor.fromBlock }])
    expect(byEmitter(orphaned).length).toBeLessThan(orphaned.length)

    // GraphQL pages: one cursor in a block about to be replaced, one below the fork.
    const page = (filter: string, after: string | null) =>
      graphql<{ logs: { pageInfo: { endCursor: string } } }>(
        `query ($after: String) { logs(filter: ${filter}, first: 1, after: $after) { pageInfo { endCursor } } }`,
        {
          after,
        },
      )
    const replacedRange = `{ fromBlock: { number: ${ancestor + 1} }, toBlock: { tag: LATEST } }`
    const keptRange = `{ fromBlock: { number: 0 }, toBlock: { number: ${ancestor} } }`
    const inReplaced = (await page(replacedRange, null)).data!.logs.pageInfo.endCursor
    const belowFork = (await page(keptRange, null)).data!.logs.pageInfo.endCursor

    expect(await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])).toBe(true)
    await generateChain(anvil.rpcUrl, { seed: 3, blocks: 9 })
    const { outcome } = await expectSameChain()
    // The next page after a replaced block is refused, not a mix of two branches; below the fork, pages go on.
    expect((await page(replacedRange, inReplaced)).errors?.[0]?.extensions?.code).toBe('CURSOR_REORGED')
    expect((await page(keptRange, belowFork)).errors).toBeUndefined()
    expect(outcome.compared).toBeGreaterThan(QUERIES_AFTER_REORG)
    expect(reorgs.at(-1)).toEqual({ ancestor, removedLogs: orphaned.length })
    // Filters polled across the reorg deliver the new branch from its fork: every block of it, all its logs.
    const branchHead = Number.parseInt(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber'), 16)
    const branch = await Promise.all(
      Array.from({ length: branchHead - ancestor }, (_, offset) =>
        anvilCall<{ hash: string }>(anvil.rpcUrl, 'eth_getBlockByNumber', [`0x${(ancestor + 1 + offset).toString(16)}`, false]),
      ),
    )
    expect(await changesOf(filters.blocks)).toEqual(branch.map((block) => block.hash))
    // A log filter first takes back the logs it delivered from the replaced blocks (geth: `removed: true`, in
    // the order they came), then delivers the new branch's.
    const replacement = await anvilCall<unknown[]>(anvil.rpcUrl, 'eth_getLogs', [fromAncestor])
    const takenBack = (logs: unknown[]) => logs.map((log) => ({ ...(log as object), removed: true }))
    expect(await changesOf(filters.logs)).toEqual([...takenBack(orphaned), ...replacement])
    expect(await changesOf(emitterFilter)).toEqual([...takenBack(byEmitter(orphaned)), ...byEmitter(replacement)])
    expect(await changesOf(filters.logs)).toEqual([])
  })

  test('a branch of the same height, and then a shorter one, replace the head', async () => {
    const before = reorgs.length
    const ancestor = Number.parseInt(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber'), 16)
    const snapshot = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
    await generateChain(anvil.rpcUrl, { seed: 4, blocks: 3 })
    await waitForSameHead(gateway, anvil.rpcUrl)
    const height = Number.parseInt(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber'), 16)
    const fromAncestor = { fromBlock: `0x${(ancestor + 1).toString(16)}`, toBlock: 'latest' }
    const logsAbove = async () => (await rpc(gateway.url, 'eth_getLogs', [fromAncestor])).result as object[]
    const takenBack = (logs: object[]) => logs.map((log) => ({ ...log, removed: true }))
    // A log filter that knows the blocks about to be replaced (installed at their head, as in geth).
    const logFilter = await filterOf('eth_newFilter', [{}])
    const first = await logsAbove()
    expect(first.length).toBeGreaterThan(0)

    // Same height, other blocks.
    await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])
    const again = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
    await generateChain(anvil.rpcUrl, { seed: 5, blocks: 3 })
    expect(Number.parseInt(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber'), 16)).toBe(height)
    await expectSameChain()
    const second = await logsAbove()
    expect(await changesOf(logFilter)).toEqual([...takenBack(first), ...second])

    // Shorter: back to the ancestor plus one new empty block.
    await anvilCall(anvil.rpcUrl, 'evm_revert', [again])
    await anvilCall(anvil.rpcUrl, 'evm_mine')
    const { facts } = await expectSameChain()
    expect(facts.head).toBe(ancestor + 1)
    expect(await changesOf(logFilter)).toEqual(takenBack(second))
    expect(reorgs.length).toBeGreaterThanOrEqual(before + 2)
    expect(reorgs.slice(before).every((reorg) => reorg.ancestor === ancestor)).toBe(true)
  })
})
