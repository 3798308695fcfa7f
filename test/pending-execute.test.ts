import { pino } from 'pino'
import { type Address, getAbiItem, type Hex, toEventSelector } from 'viem'
import { entryPoint07Abi } from 'viem/account-abstraction'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Devnet, type StartDevnetOptions, startDevnet } from '../src/devnet/devnet.js'
import { DEVNET_REGISTRY_ADDRESS } from '../src/devnet/registry-contract.js'
import { createTrafficGenerator, type TrafficGenerator } from '../src/devnet/traffic.js'
import type { ExecutorStatus } from '../src/pending/execute/index.js'
import type { PendingBlock } from '../src/pending/state.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { result, startTestGateway, type TestGateway, withoutBlockHash } from './fixtures/gateway.js'

// `--pending-source execute` on today's frames (no receipts, no balances) with no flashblocks-aware node
// asked: every receipt and log flashgate executed, and every balance it left, equals what the sealed block
// says at the reference node (anvil), field by field (block hash aside), over many flashblocks of
// Base-shaped traffic (token transfers, multi-hop swaps, batches, reverts, ETH transfers, ERC-8021 suffixes).

type Json = Record<string, unknown>

const USER_OPERATION_EVENT = toEventSelector(getAbiItem({ abi: entryPoint07Abi, name: 'UserOperationEvent' }))

/**
 * The long runs go in one pass each: execution does not depend on the index's driver. The 1,000 flashblocks in
 * the Postgres pass, the demo in the PGlite one (this file runs alone, after the rest: its time is the pass's).
 */
const RUNS: { name: string; devnet: StartDevnetOptions; demo?: boolean; flashblocks: number; pass?: 'pglite' | 'postgres' }[] = [
  { name: 'Base timing and mix (250 transactions a block)', devnet: { profile: 'base' }, flashblocks: 60 },
  // The demo of `npm start`: contract deployments, ERC-4337 user operations (signature checks by the ecrecover
  // precompile), registry calls.
  { name: 'the demo traffic', devnet: { blockTimeMs: 1_000, flashblockIntervalMs: 100 }, demo: true, flashblocks: 300, pass: 'pglite' },
  {
    name: 'over 1,000 flashblocks of a quicker Base-shaped chain',
    devnet: { profile: 'base', blockTimeMs: 400, flashblockIntervalMs: 40, profileTransactionsPerBlock: 30 },
    flashblocks: 1_000,
    pass: 'postgres',
  },
]

const THIS_PASS = process.env.DATABASE_URL === undefined ? 'pglite' : 'postgres'

for (const run of RUNS)
  describe.skipIf(run.pass !== undefined && run.pass !== THIS_PASS)(`pending source execute: ${run.name}`, () => {
    let devnet: Devnet
    let database: TestDatabase
    let gateway: TestGateway
    let traffic: TrafficGenerator | undefined
    /** Pending blocks followed from their index 0, and the flashblocks applied to each. */
    const followed = new Map<number, { block: PendingBlock; flashblocks: number }>()

    beforeAll(async () => {
      devnet = await startDevnet({ port: 0, flashblocksPort: 0, ...run.devnet })
      database = await createTestDatabase()
      gateway = await startTestGateway({
        upstreamRpc: devnet.rpcUrl,
        flashblocksWs: devnet.flashblocksUrl,
        databaseUrl: database.databaseUrl,
        pendingSource: 'execute',
        ...(run.demo && { builderCodeRegistry: DEVNET_REGISTRY_ADDRESS, registrationRateLimit: 0 }),
      })
      if (run.demo) {
        traffic = createTrafficGenerator({ rpcUrl: devnet.rpcUrl, gatewayUrl: gateway.url, logger: pino({ level: 'silent' }), ratePerSecond: 8 })
        await traffic.start()
      }
      gateway.pending!.events.on('transactions', (block) => {
        const entry = followed.get(block.number)
        if (entry === undefined) {
          if (block.lastIndex === 0) followed.set(block.number, { block, flashblocks: 1 })
        } else if (entry.block === block) entry.flashblocks++
      })
    }, 60_000)

    afterAll(async () => {
      await traffic?.stop()
      await gateway?.stop()
      await devnet?.stop()
      await database?.drop()
    })

    test('every executed receipt, log and balance equals the sealed block', { timeout: 240_000 }, async () => {
      const total = () => [...followed.values()].reduce((sum, entry) => sum + entry.flashblocks, 0)
      let transactions = 0
      let logs = 0
      let balances = 0
      let nonces = 0
      let reverted = 0
      let late = 0
      let userOperations = 0
      const checked = new Set<number>()
      const check = async (number: number) => {
        const { block } = followed.get(number)!
        const at = `0x${number.toString(16)}`
        const sealed = await result<Json[]>(devnet.rpcUrl, 'eth_getBlockReceipts', [at])
        // The feed showed the whole block: the same transactions, in order.
        expect(block.transactions.map((transaction) => transaction.hash)).toEqual(sealed.map((receipt) => receipt.transactionHash))
        // A receipt executed after its block was sealed and indexed is never published (null): it was too late
        // to pre-confirm anything. Every one that was published equals the sealed one.
        const executed = block.receipts.map((receipt, index) => (receipt === null ? null : sealed[index]!))
        expect(block.receipts.map((receipt) => (receipt === null ? null : withoutBlockHash(receipt)))).toEqual(
          executed.map((receipt) => (receipt === null ? null : withoutBlockHash(receipt))),
        )
        late += executed.filter((receipt) => receipt === null).length
        transactions += sealed.length
        logs += sealed.reduce((sum, receipt) => sum + (receipt.logs as unknown[]).length, 0)
        userOperations += sealed.flatMap((receipt) => receipt.logs as { topics: Hex[] }[]).filter((log) => log.topics[0] === USER_OPERATION_EVENT).length
        reverted += sealed.filter((receipt) => receipt.status === '0x0').length
        // Every sender's next nonce after the pre-confirmed block is the sealed block's.
        const nextNonces = new Map<Address, number>()
        for (const transaction of block.transactions) if (transaction.type !== 0x7e) nextNonces.set(transaction.from, transaction.nonce + 1)
        const senders = [...nextNonces.keys()]
        const sealedNonces = await Promise.all(senders.map((sender) => result<Hex>(devnet.rpcUrl, 'eth_getTransactionCount', [sender, at])))
        expect(senders.map((sender) => nextNonces.get(sender))).toEqual(sealedNonces.map(Number))
        nonces += senders.length
        // Every balance the executed transactions left is the sealed block's (all of them, when none was late).
        if (executed.includes(null)) return
        const addresses = [...block.balances.keys()] as Address[]
        const expected = await Promise.all(addresses.map((address) => result<Hex>(devnet.rpcUrl, 'eth_getBalance', [address, at])))
        expect(addresses.map((address) => `0x${block.balances.get(address)!.toString(16)}`)).toEqual(expected)
        balances += addresses.length
      }

      // Blocks are checked as they seal, until enough flashblocks were followed and at least one block was
      // executed whole before its seal (on a busy machine every receipt of a block can come too late, and its
      // balances cannot be compared: the test then follows further blocks rather than check nothing).
      const deadline = Date.now() + 200_000
      await expect.poll(total, { timeout: 200_000, interval: 100 }).toBeGreaterThanOrEqual(run.flashblocks)
      while (balances === 0 && Date.now() < deadline) {
        // The newest block may still be building: check the ones sealed since.
        const sealedSince = [...followed.keys()]
          .sort((a, b) => a - b)
          .slice(0, -1)
          .filter((number) => !checked.has(number))
        if (sealedSince.length === 0) {
          await new Promise((resolve) => setTimeout(resolve, 200))
          continue
        }
        await gateway.ingester.waitForBlock(sealedSince.at(-1)!, 30_000)
        for (const number of sealedSince) {
          await check(number)
          checked.add(number)
        }
      }
      const status = gateway.pending!.status()
      expect(status.divergences).toEqual({ transactions: 0, parent: 0, receipt: 0 })
      // Most were published before their block sealed (how many is the bench's business, not a test's: a
      // receipt executed after the seal is simply never shown).
      expect(late).toBeLessThan(transactions / 2)
      const readiness = (await (await fetch(`${gateway.url}/readyz`)).json()) as { pending: { source: string; execution: ExecutorStatus } }
      expect(readiness.pending.source).toBe('execute')
      const { execution } = readiness.pending
      expect(execution.failedBlocks).toBe(0)
      expect(execution.executedTransactions).toBeGreaterThanOrEqual(transactions)
      // Blocks after the first build on the state the one before left, read from the node only for what is new;
      // one whose predecessor was not executed to its end before it opened (a busy machine) starts from the cache
      // caught up with the sealed blocks instead. None after the first reads its parent state afresh.
      expect(execution.carriedBlocks).toBeGreaterThanOrEqual(1)
      expect(execution.carriedBlocks + execution.canonicalBlocks).toBeGreaterThanOrEqual(checked.size - 1)
      const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
      expect(metrics).toContain('flashgate_pending_source{source="execute"} 1')
      expect(metrics).toMatch(/flashgate_pending_execution_blocks_total\{outcome="carried"\} [1-9]/)
      expect(metrics).toMatch(/flashgate_pending_executed_transactions_total [1-9]/)
      // Enough was checked: the profile's blocks are full of transfers, swaps and reverts; the demo's are lighter.
      expect(transactions).toBeGreaterThan(checked.size * (run.demo ? 4 : 10))
      expect(logs).toBeGreaterThan(run.demo ? transactions / 2 : transactions)
      if (!run.demo) expect(reverted).toBeGreaterThan(0)
      // The demo's smart accounts acted through the EntryPoint (their signatures checked by ecrecover).
      if (run.demo) expect(userOperations).toBeGreaterThan(0)
      // Balances are compared for the blocks whose every receipt was published before the seal.
      expect(balances).toBeGreaterThan(0)
      expect(nonces).toBeGreaterThan(0)
      console.log(
        `${run.name}: ${checked.size} blocks, ${total()} flashblocks, ${transactions} transactions (${late} executed after the seal), ${logs} logs, ${balances} balances, ${nonces} nonces, ${reverted} reverted: all equal; ` +
          `${execution.upstreamReads} upstream reads, ${execution.carriedBlocks} blocks on carried state, ${execution.canonicalBlocks} caught up with sealed diffs, ${execution.freshBlocks} read afresh`,
      )
    })
  })
