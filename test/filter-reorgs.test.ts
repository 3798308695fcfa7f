// HTTP filters (eth_newFilter / eth_newBlockFilter + eth_getFilterChanges) across reorgs of 20 and 40 blocks on
// anvil, deeper than the 16 blocks a filter used to remember: viem's HTTP watchers and a raw poller end with
// exactly the chain's logs (each delivered log of a replaced block taken back once, each new one delivered once),
// and a block filter delivers exactly the new branch after the last old block it delivered. The same with the
// filters in this process's memory, in Redis (`--redis-url`), and in the primary of `serve --workers 2`.
import { type ChildProcess, spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { createPublicClient, encodeFunctionData, type Hex, http, parseAbiItem } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Anvil } from '../src/devnet/anvil.js'
import { tokenAbi } from '../src/devnet/contracts.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { result, startManualAnvilWithToken, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { freePort } from './fixtures/ports.js'
import { REDIS_URL } from './fixtures/redis.js'
import { createSharedPostgresDatabase, SHARED_POSTGRES_AVAILABLE } from './fixtures/shared-postgres.js'
import { anvilCall, until, waitForSameHead } from './fixtures/sync.js'

const SENDER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'
const RECIPIENT = '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc'
const POLL_MS = 100
/** Long enough for pollers every 100 ms to have polled several times. */
const SETTLE_MS = 1_500
/** 41 blocks of transfers mined, three gateways following, on a loaded two-core machine. */
const REORG_TEST_TIMEOUT_MS = 120_000
const TRANSFER = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)')

let anvil: Anvil
let token: Hex
let amount = 1
const BIN = fileURLToPath(new URL('../bin/flashgate.js', import.meta.url))
const redisPrefix = `flashgate-test:${randomUUID()}:`
/** Where the filters live: `memory` and `redis` in this process, `workers` in a `serve --workers 2` of its own. */
type Target = { name: string; url: string; synced(): Promise<unknown>; stop(): Promise<void>; database: TestDatabase }
const targets: Target[] = []

if (!SHARED_POSTGRES_AVAILABLE)
  console.warn('filter-reorgs: --workers 2 skipped, workers share one Postgres (set DATABASE_URL, or install the PostgreSQL server binaries)')

/** `flashgate serve --workers 2` following anvil; its filters are kept by the primary and polled through either worker. */
async function startWorkers(database: TestDatabase): Promise<Target> {
  const port = await freePort()
  let output = ''
  const child: ChildProcess = spawn(
    process.execPath,
    [
      BIN,
      'serve',
      '--workers',
      '2',
      '--port',
      String(port),
      '--database-url',
      database.databaseUrl,
      '--upstream-rpc',
      anvil.rpcUrl,
      '--upstream-ws',
      anvil.wsUrl,
      '--start-block',
      '0',
      '--public-rate-limit',
      '0',
      '--log-level',
      'warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  const url = `http://127.0.0.1:${port}`
  const synced = () =>
    until(
      async () => (await headOf(url).catch(() => -1)) === (await headOf(anvil.rpcUrl)),
      60_000,
      () => `serve --workers 2 did not reach anvil's head:\n${output}`,
    )
  const stop = async () => {
    if (child.exitCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
  }
  return { name: 'workers', url, synced, stop, database }
}

const quantity = (number: number) => `0x${number.toString(16)}`
const headOf = async (url: string) => Number(await anvilCall<Hex>(url, 'eth_blockNumber'))

/** `blocks` blocks of two token transfers each, each transfer a new amount (so a replaced block's logs differ). */
async function mineTransfers(blocks: number): Promise<void> {
  for (let block = 0; block < blocks; block++) {
    for (let index = 0; index < 2; index++) {
      const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(amount++)] })
      await anvilCall(anvil.rpcUrl, 'eth_sendTransaction', [{ from: SENDER, to: token, data, gas: '0x30000' }])
    }
    await anvilCall(anvil.rpcUrl, 'evm_mine')
  }
}

/** Replaces the newest `depth` blocks (the head's number stays) with as many of two new transfers each. */
async function reorgWithTransfers(depth: number): Promise<void> {
  const head = await headOf(anvil.rpcUrl)
  const nonce = Number(await anvilCall<Hex>(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER, quantity(head - depth)]))
  const transactions = Array.from({ length: depth * 2 }, (_, index) => [
    {
      from: SENDER,
      to: token,
      input: encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, BigInt(amount++)] }),
      gas: '0x30000',
      nonce: quantity(nonce + index),
    },
    Math.floor(index / 2),
  ])
  await anvilCall(anvil.rpcUrl, 'anvil_reorg', [depth, transactions])
}

type ClientLog = { blockHash: string; logIndex?: number | string | null; removed?: boolean }

/** What a client keeps of the logs it hears: added as they come, taken out when they come again `removed`. */
function logBook() {
  const kept = new Set<string>()
  /** Logs heard twice without being taken back between, and logs taken back that were not kept. */
  const faults: string[] = []
  const keyOf = (log: ClientLog) => `${log.blockHash}:${Number(log.logIndex)}`
  return {
    faults,
    take(log: ClientLog) {
      const key = keyOf(log)
      if (log.removed) {
        if (!kept.delete(key)) faults.push(`${key} taken back, not kept`)
      } else if (kept.has(key)) faults.push(`${key} heard twice`)
      else kept.add(key)
    },
    keys: () => [...kept].sort(),
  }
}

/** Polls `method` on a filter every POLL_MS until stopped, handing each change to `take`. */
function poller(url: string, id: Hex, take: (change: unknown) => void) {
  let polling = true
  const done = (async () => {
    while (polling) {
      for (const change of await result<unknown[]>(url, 'eth_getFilterChanges', [id])) take(change)
      await sleep(POLL_MS)
    }
  })()
  return async () => {
    polling = false
    await done
  }
}

type Watched = { books: Map<string, ReturnType<typeof logBook>>; blocks: Hex[] }
const watched = new Map<string, Watched>()
const stops: (() => unknown)[] = []
let from = 0

beforeAll(async () => {
  ;({ anvil, token } = await startManualAnvilWithToken(SENDER))
  await mineTransfers(3)
  for (const name of ['memory', 'redis']) {
    const database = await createTestDatabase()
    const gateway: TestGateway = await startTestGateway({
      upstreamRpc: anvil.rpcUrl,
      upstreamWs: anvil.wsUrl,
      databaseUrl: database.databaseUrl,
      ...(name === 'redis' && { redisUrl: REDIS_URL, redisPrefix }),
    })
    targets.push({ name, url: gateway.url, synced: () => waitForSameHead(gateway, anvil.rpcUrl), stop: () => gateway.stop(), database })
  }
  if (SHARED_POSTGRES_AVAILABLE) targets.push(await startWorkers(await createSharedPostgresDatabase()))
  for (const target of targets) await target.synced()
  from = (await headOf(anvil.rpcUrl)) + 1
  for (const { name, url } of targets) {
    const books = new Map<string, ReturnType<typeof logBook>>()
    const blocks: Hex[] = []
    watched.set(name, { books, blocks })
    const client = createPublicClient({ transport: http(url), pollingInterval: POLL_MS })
    for (const watcher of ['watchContractEvent', 'watchEvent', 'eth_getFilterChanges'] as const) books.set(watcher, logBook())
    const onLogs = (book: ReturnType<typeof logBook>) => (logs: unknown[]) => {
      for (const log of logs) book.take(log as ClientLog)
    }
    stops.push(client.watchContractEvent({ address: token, abi: tokenAbi, eventName: 'Transfer', onLogs: onLogs(books.get('watchContractEvent')!) }))
    stops.push(client.watchEvent({ address: token, event: TRANSFER, onLogs: onLogs(books.get('watchEvent')!) }))
    const logFilter = await result<Hex>(url, 'eth_newFilter', [{ address: token }])
    stops.push(poller(url, logFilter, (log) => books.get('eth_getFilterChanges')!.take(log as ClientLog)))
    const blockFilter = await result<Hex>(url, 'eth_newBlockFilter')
    stops.push(poller(url, blockFilter, (hash) => blocks.push(hash as Hex)))
  }
  // Every watcher has installed its filter before the first block it must hear of.
  await sleep(SETTLE_MS)
})

afterAll(async () => {
  for (const stop of stops) await stop()
  for (const { stop, database } of targets) {
    await stop()
    await database.drop()
  }
  await anvil?.stop()
  const redis = new Redis(REDIS_URL)
  const keys = await redis.keys(`${redisPrefix}*`)
  if (keys.length > 0) await redis.del(...keys)
  await redis.quit()
})

async function settled() {
  for (const target of targets) await target.synced()
  await sleep(SETTLE_MS)
}

describe('HTTP filters across deep reorgs, filters kept in memory, in Redis and by the primary of --workers 2', () => {
  test.each([20, 40])(
    "anvil_reorg %i deep: viem's watchContractEvent and watchEvent and a raw eth_getFilterChanges poller end with exactly the chain's logs; a block filter delivers exactly the new branch after the last old block",
    async (depth) => {
      // Every replaced block was mined after the filters were installed, so they delivered each.
      await mineTransfers(depth)
      await settled()
      const delivered = new Map([...watched].map(([name, { blocks }]) => [name, blocks.length]))
      const head = await headOf(anvil.rpcUrl)
      for (const { blocks } of watched.values()) expect(blocks.at(-1)).toBe(await blockHash(head))
      await reorgWithTransfers(depth)
      await mineTransfers(1)
      await settled()

      const logs = await anvilCall<ClientLog[]>(anvil.rpcUrl, 'eth_getLogs', [{ address: token, fromBlock: quantity(from), toBlock: 'latest' }])
      const chain = logs.map((log) => `${log.blockHash}:${Number(log.logIndex)}`).sort()
      const newBranch: Hex[] = []
      for (let number = head - depth + 1; number <= head + 1; number++) newBranch.push(await blockHash(number))
      for (const [name, { books, blocks }] of watched) {
        for (const [watcher, book] of books) {
          expect(book.faults, `${name} ${watcher}`).toEqual([])
          expect(book.keys(), `${name} ${watcher}`).toEqual(chain)
        }
        expect(blocks.slice(delivered.get(name)), `${name} block filter`).toEqual(newBranch)
      }
    },
    REORG_TEST_TIMEOUT_MS,
  )
})

async function blockHash(number: number): Promise<Hex> {
  return (await anvilCall<{ hash: Hex }>(anvil.rpcUrl, 'eth_getBlockByNumber', [quantity(number), false])).hash
}
