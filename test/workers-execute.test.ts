// `flashgate serve --workers 2 --pending-source execute`: the primary executes the flashblocks once for the
// machine; both workers serve the executed receipts, and run `pending` calls on the primary's executed state
// over the cluster link (a revert comes back as the node words it).
import { type ChildProcess, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { type Address, encodeFunctionData, type Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { tokenAbi } from '../src/devnet/contracts.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import type { TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { deployDevnetToken, result, rpc } from './fixtures/gateway.js'
import { freePort } from './fixtures/ports.js'
import { fromEachWorker as eachWorker, postToWorkers } from './fixtures/workers.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'
import { until as waitUntil } from './fixtures/sync.js'
import { isPostgresUrl } from '../src/db/index.js'

const BIN = fileURLToPath(new URL('../bin/flashgate.js', import.meta.url))
/** Long blocks: a mint sent early in one is pre-confirmed for seconds before it seals. */
const BLOCK_TIME_MS = 4_000
const FLASHBLOCK_INTERVAL_MS = 400
const ZERO_HASH = `0x${'00'.repeat(32)}`

let devnet: Devnet
let database: TestDatabase
let child: ChildProcess
let port: number
let output = ''

/** One request on a connection of its own: node:cluster hands each new connection to the next worker. */
const post = (body: unknown) => postToWorkers(port, '/', body)

const call = (method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', id: 1, method, params })

/** Asks until each of the two workers has answered once. */
const fromEachWorker = async (body: unknown) => [...(await eachWorker(() => post(body))).values()]

/** A check that fails (a worker not listening yet) counts as not yet. */
const until = (check: () => Promise<boolean>, timeoutMs: number, message: () => string) => waitUntil(() => check().catch(() => false), timeoutMs, message, 100)

/**
 * The same runs in CI's PGlite and Postgres passes (a Postgres database either way: `DATABASE_URL`'s, or a
 * throwaway cluster in the PGlite pass): the Postgres pass only, where no cluster has to be made for it.
 */
const SAME_IN_EVERY_PASS = !isPostgresUrl(process.env.DATABASE_URL ?? '')

describe.skipIf(!SHARED_POSTGRES_AVAILABLE || SAME_IN_EVERY_PASS)('serve --workers 2 --pending-source execute', () => {
  beforeAll(async () => {
    ;[devnet, database, port] = await Promise.all([
      startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: BLOCK_TIME_MS, flashblockIntervalMs: FLASHBLOCK_INTERVAL_MS }),
      createSharedPostgresDatabase(),
      freePort(),
    ])
    const args = ['serve', '--workers', '2', '--port', String(port), '--database-url', database.databaseUrl, '--upstream-rpc', devnet.rpcUrl]
    args.push('--flashblocks-ws', devnet.flashblocksUrl, '--pending-source', 'execute', '--start-block', '0', '--log-level', 'warn')
    child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
    await until(
      async () => /JSON-RPC/.test(output),
      60_000,
      () => `the gateway did not start:\n${output}`,
    )
  }, 90_000)

  afterAll(async () => {
    if (child !== undefined && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    }
    await devnet?.stop()
    await database?.drop()
  })

  test('both workers serve the executed receipt, and a pending call runs on the primary executed state', { timeout: 60_000 }, async () => {
    const token = (await deployDevnetToken(devnet.rpcUrl, DEV_ACCOUNTS[0]!.address)).address
    const recipient = `0x${'6d'.repeat(20)}` as Address
    const encode = (functionName: 'mint' | 'balanceOf' | 'transfer', args: readonly unknown[]) =>
      encodeFunctionData({ abi: tokenAbi, functionName, args: args as never })
    // Right after a block opens, so that the mint stays pre-confirmed for most of a block time.
    const head = Number(await result<Hex>(devnet.rpcUrl, 'eth_blockNumber'))
    await until(
      async () => Number(await result<Hex>(devnet.rpcUrl, 'eth_blockNumber')) > head,
      10_000,
      () => 'no new block',
    )
    const minted = await result<Hex>(devnet.rpcUrl, 'eth_sendTransaction', [
      { from: DEV_ACCOUNTS[1]!.address, to: token, data: encode('mint', [recipient, 11n]), gas: '0x30000' },
    ])
    const readiness = async () =>
      (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { pending: { source: string; execution: { pendingCalls: number } } }
    // Executed once on the primary, served by both workers.
    await until(
      async () => (await fromEachWorker(call('eth_getTransactionReceipt', [minted]))).every((answer) => answer.body.result?.blockHash === ZERO_HASH),
      5_000,
      () => 'the executed receipt did not reach both workers',
    )
    const before = (await readiness()).pending.execution.pendingCalls
    const balances = await fromEachWorker(call('eth_call', [{ to: token, data: encode('balanceOf', [recipient]) }, 'pending']))
    const reverts = await fromEachWorker(
      call('eth_call', [{ from: DEV_ACCOUNTS[1]!.address, to: token, data: encode('transfer', [recipient, 0n]) }, 'pending']),
    )
    // Still pre-confirmed when answered.
    const receipt = await post(call('eth_getTransactionReceipt', [minted]))
    expect(receipt.body.result.blockHash).toBe(ZERO_HASH)
    expect(balances.map((answer) => BigInt(answer.body.result))).toEqual([11n, 11n])
    for (const answer of reverts) expect(answer.body.error).toMatchObject({ code: 3, message: 'execution reverted: zero amount' })
    const atNode = await rpc(devnet.rpcUrl, 'eth_call', [{ to: token, data: encode('transfer', [recipient, 0n]) }, 'latest'])
    expect(reverts[0]!.body.error.data).toBe((atNode.error as { data?: string } | undefined)?.data)
    // Run by the primary's executor, for both workers (its figures reach them with the primary's status).
    await until(
      async () => (await readiness()).pending.execution.pendingCalls >= before + 4,
      5_000,
      () => 'the calls were not run by the executor',
    )
    expect((await readiness()).pending.source).toBe('execute')
  })
})
