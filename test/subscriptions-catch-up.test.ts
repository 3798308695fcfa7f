import { type Address, encodeFunctionData, type Hash } from 'viem'
import { afterAll, beforeAll, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import type { Anvil } from '../src/devnet/anvil.js'
import { tokenAbi } from '../src/devnet/contracts.js'
import { createResolvers, type Resolvers } from '../src/resolvers/index.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, startManualAnvilWithToken } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

/**
 * The event stream reads heads and logs from the database, so a process that hears of the chain late, or
 * once for many changes, still announces every block once, and takes back what a reorg undid: here a
 * second resolver set over the gateway's database stands for a process that does not ingest, and is told
 * of changes only when the test says so (on PGlite and Postgres alike).
 */

const SENDER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'
const RECIPIENT = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8'
const GAS = '0x30000'

let anvil: Anvil
let database: TestDatabase
let gateway: Gateway
let token: Address

/** Every `head` and `logs` event of a stream, as JSON, in order. */
function record(resolvers: Resolvers) {
  const events: string[] = []
  const unsubscribe = [
    resolvers.events.subscribe('head', (block) => events.push(`head ${JSON.stringify(block)}`)),
    resolvers.events.subscribe('logs', (logs) => events.push(`logs ${JSON.stringify(logs)}`)),
  ]
  return {
    events,
    heads: () => events.filter((event) => event.startsWith('head ')).map((event) => (JSON.parse(event.slice(5)) as { hash: Hash }).hash),
    close: () => {
      for (const stop of unsubscribe) stop()
    },
  }
}

async function mine(transfers: number[]): Promise<Hash> {
  for (const amount of transfers) {
    const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(amount)] })
    await anvilCall(anvil.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: token, data, gas: GAS }])
  }
  await anvilCall(anvil.rpcUrl, 'evm_mine')
  return (await anvilCall<{ hash: Hash }>(anvil.rpcUrl, 'eth_getBlockByNumber', ['latest', false])).hash
}

beforeAll(async () => {
  ;({ anvil, token } = await startManualAnvilWithToken(SENDER))
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, upstreamWs: anvil.wsUrl, databaseUrl: database.databaseUrl })
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

test('told of a commit and a reorg late and only once, the stream announces each block once and the logs the reorg undid with removed: true, as the ingester’s own stream does', async () => {
  const elsewhere = createResolvers({ db: gateway.db, upstream: null })
  const onIngester = record(gateway.resolvers)
  const onElsewhere = record(elsewhere)
  try {
    const snapshot = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
    const undone = [await mine([1, 2]), await mine([3])]
    await waitForSameHead(gateway, anvil.rpcUrl)
    // One late word for two commits.
    elsewhere.notify({ reorg: false })
    await expect.poll(() => onElsewhere.heads()).toEqual(undone)

    await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])
    const replacing = [await mine([4]), await mine([]), await mine([5, 6])]
    await waitForSameHead(gateway, anvil.rpcUrl)
    // Not a word of the rewind: the new blocks do not link to the last one announced.
    elsewhere.notify({ reorg: false })
    await expect.poll(() => onElsewhere.heads()).toEqual([...undone, ...replacing])
    await expect.poll(() => onIngester.heads()).toEqual([...undone, ...replacing])
    expect(onElsewhere.events.filter((event) => event.includes('"removed":true'))).toHaveLength(1)
    expect(onElsewhere.events).toEqual(onIngester.events)
  } finally {
    onIngester.close()
    onElsewhere.close()
  }
})
