import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'drizzle-orm'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDb } from '../src/db/index.js'
import { attachLogPartitions, logPartitions } from '../src/db/log-partitions.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain, type GeneratedChain } from './fixtures/chain.js'
import { compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, anvilReceipt, waitForSameHead } from './fixtures/sync.js'

/** Blocks kept: the chain below has ~3 times as many. */
const RETAIN = 15
/** The documented answer below the first retained block with `--history refuse` (HistoryUnavailableError). */
const HISTORY_REFUSED = -32000
const PARTITION_BLOCKS = 5
/** Blocks mined once the reader has started. */
const MORE = 5

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let chain: GeneratedChain

beforeAll(async () => {
  anvil = await startAnvil()
  chain = await generateChain(anvil.rpcUrl, { seed: 15, blocks: 44, txPerBlock: [2, 5] })
  database = await createTestDatabase()
  // Partitions of logs 5 blocks wide (the ingester's are 5,000): retention drops those wholly below the cut.
  const db = await createDb({ databaseUrl: database.databaseUrl })
  await attachLogPartitions(db, 0, Number(chain.headNumber) + 10, PARTITION_BLOCKS)
  await db.close()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, retainBlocks: RETAIN, history: 'refuse' })
  await waitForSameHead(gateway, anvil.rpcUrl)
}, 120_000)

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

const hex = (number: number) => `0x${number.toString(16)}`

test(`--retain-blocks ${RETAIN}: history is pruned while readers query the boundary; every answer is complete or the documented refusal, never partial`, async () => {
  // The cut moves while the reader runs: MORE blocks are mined once it has started, taking the first block
  // kept from `generated - RETAIN + 1` to `cut`, across the blocks the reader asks for (which are complete
  // before the move and refused after it, however long the set-up took).
  const generated = Number(chain.headNumber)
  const head = generated + MORE
  const cut = head - RETAIN + 1
  const [account] = chain.senders
  // Ranges across the cut, a block below it, and state below it: what a reader at the boundary asks.
  const calls = [
    { method: 'eth_getLogs', params: [{ fromBlock: hex(cut - 10), toBlock: hex(generated) }] },
    { method: 'eth_getLogs', params: [{ fromBlock: hex(cut - 1), toBlock: hex(cut + 3) }] },
    { method: 'eth_getBlockReceipts', params: [hex(cut - 2)] },
    { method: 'eth_getBlockByNumber', params: [hex(cut - 1), true] },
    { method: 'eth_getBalance', params: [account, hex(cut - 3)] },
  ]
  const expected = await Promise.all(calls.map(({ method, params }) => anvilCall(anvil.rpcUrl, method, params)))
  for (const answer of expected) expect(answer).not.toBeNull()

  const outcomes = { complete: 0, refused: 0, other: [] as string[] }
  let reading = true
  const reader = (async () => {
    for (let round = 0; reading; round++) {
      const index = round % calls.length
      const answer = await rpc(gateway.dedicatedUrl, calls[index]!.method, calls[index]!.params)
      if (answer.error?.code === HISTORY_REFUSED) outcomes.refused++
      else if (JSON.stringify(answer.result) === JSON.stringify(expected[index])) outcomes.complete++
      else outcomes.other.push(`${calls[index]!.method}: ${JSON.stringify(answer).slice(0, 300)}`)
      await sleep(5)
    }
  })()

  await expect.poll(() => outcomes.complete, { timeout: 10_000 }).toBeGreaterThan(0)
  await anvilCall(anvil.rpcUrl, 'anvil_mine', [hex(MORE)])
  const oldest = async () => Number((await gateway.db.query<{ n: string }>(sql`select min(number)::text as n from blocks`))[0]!.n)
  try {
    await expect.poll(oldest, { timeout: 45_000, interval: 200 }).toBe(cut)
  } finally {
    reading = false
    await reader
  }
  expect(outcomes.other).toEqual([])
  expect(outcomes.complete).toBeGreaterThan(0)
  expect(outcomes.refused).toBeGreaterThan(0)

  // Refusals name the first retained block and a range to retry with.
  const refusal = await rpc(gateway.dedicatedUrl, 'eth_getLogs', [{ fromBlock: hex(cut - 10), toBlock: hex(head) }])
  expect(refusal.error).toMatchObject({ code: HISTORY_REFUSED, message: expect.stringContaining(`Try with this block range [${hex(cut)}, ${hex(head)}]`) })
  expect((await rpc(gateway.dedicatedUrl, 'eth_getBlockByNumber', [hex(cut - 1), false])).error?.code).toBe(HISTORY_REFUSED)

  // Nothing below the cut is left, except each account's newest change below it (state at the cut).
  const [left] = await gateway.db.query<Record<string, string>>(sql`select
      (select count(*) from logs where block_number < ${cut})::text as logs,
      (select count(*) from block_transactions where block_number < ${cut})::text as block_transactions,
      (select count(*) from block_receipts where block_number < ${cut})::text as block_receipts,
      (select count(*) from transactions where block_number < ${cut})::text as transactions,
      (select count(*) from (select address from account_changes where block_number < ${cut} group by address having count(*) > 1) as twice)::text as superseded`)
  expect(left).toEqual({ logs: '0', block_transactions: '0', block_receipts: '0', transactions: '0', superseded: '0' })
  // The partitions of logs wholly below the cut were dropped, not emptied; the one the cut falls in stays.
  const partitions = await logPartitions(gateway.db)
  expect(partitions.length).toBeGreaterThan(0)
  expect(partitions[0]!.from).toBe(cut - (cut % PARTITION_BLOCKS))

  // What is kept still answers as the node does, state included.
  const kept = [cut, Math.floor((cut + head) / 2), head]
  const queries = [
    ...kept.flatMap((number) => [
      { method: 'eth_getBlockReceipts', params: [hex(number)] },
      { method: 'eth_getLogs', params: [{ fromBlock: hex(cut), toBlock: hex(number) }] },
    ]),
    ...[...chain.senders, ...chain.recipients].flatMap((address) =>
      kept.flatMap((number) => [
        { method: 'eth_getBalance', params: [address, hex(number)] },
        { method: 'eth_getTransactionCount', params: [address, hex(number)] },
      ]),
    ),
  ]
  const { errors } = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
  expect(errors).toBe(0)

  // Ingest goes on, and the first block follows the head.
  await anvilCall(anvil.rpcUrl, 'anvil_mine', ['0x4'])
  await waitForSameHead(gateway, anvil.rpcUrl)
  await expect.poll(async () => (await gateway.resolvers.chain.view()).firstBlock, { timeout: 10_000 }).toBe(cut + 4)
}, 120_000)

test('a later cut takes the change an earlier cut kept as an account’s newest, once a newer change falls below it too: one row per account below the cut, whatever the number of cuts', async () => {
  const superseded = async (cut: number) =>
    Number(
      (
        await gateway.db.query<{ n: string }>(
          sql`select count(*)::text as n from (select address from account_changes where block_number < ${cut} group by address having count(*) > 1) as twice`,
        )
      )[0]!.n,
    )
  const oldest = async () => Number((await gateway.db.query<{ n: string }>(sql`select min(number)::text as n from blocks`))[0]!.n)
  // The cut of now applied: each account's newest change below it kept…
  const first = (await waitForSameHead(gateway, anvil.rpcUrl)) - RETAIN + 1
  await expect.poll(oldest, { timeout: 45_000, interval: 200 }).toBe(first)
  // …each sender changes again, in blocks of their own above the first block kept…
  for (const sender of chain.senders)
    await anvilReceipt(anvil.rpcUrl, await anvilCall<string>(anvil.rpcUrl, 'eth_sendTransaction', [{ from: sender, to: chain.recipients[0], value: '0x1' }]))
  const changed = await waitForSameHead(gateway, anvil.rpcUrl)
  // …then the cut moves past those blocks, in a cut of its own.
  await anvilCall(anvil.rpcUrl, 'anvil_mine', [hex(RETAIN)])
  const head = await waitForSameHead(gateway, anvil.rpcUrl)
  const cut = head - RETAIN + 1
  expect(cut).toBeGreaterThan(changed)
  await expect.poll(oldest, { timeout: 45_000, interval: 200 }).toBe(cut)
  expect(await superseded(cut)).toBe(0)
  const queries = [...chain.senders, ...chain.recipients].flatMap((address) =>
    [cut, head].flatMap((number) => [
      { method: 'eth_getBalance', params: [address, hex(number)] },
      { method: 'eth_getTransactionCount', params: [address, hex(number)] },
    ]),
  )
  expect((await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)).errors).toBe(0)
}, 120_000)
