import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { Attribution } from 'ox/erc8021'
import { pino } from 'pino'
import { type Address, concat, type Hex } from 'viem'
import { startGateway } from '../src/app.js'
import { attributionSuffix, generateBuilderCode } from '../src/attribution/index.js'
import { REGISTRY_ADDRESSES, registryEvents } from '../src/attribution/registry.js'
import { attributedActions } from '../src/attribution/user-operations.js'
import { serveConfigSchema } from '../src/config.js'
import { createDb } from '../src/db/index.js'
import { type BlockRows, toRows } from '../src/ingest/block-data.js'
import { createBlockFetcher } from '../src/ingest/fetch-block.js'
import { createStore } from '../src/ingest/store.js'
import { startAnvil } from '../src/devnet/anvil.js'
import { createUpstream } from '../src/upstream/index.js'
import { createCleanup } from './cleanup.js'
import { createBenchDatabase } from './databases.js'
import { killLoadWorkers, type LoadReport, runLoad, writeBodies } from './load.js'
import { DEFAULT_ADMIN_DATABASE_URL } from './options.js'
import { createRpcClient } from './rpc.js'
import { setUpUserOperations } from './user-operations.js'

/**
 * `npm run bench:attribution`: builder-code registration throughput for repeat wallets, and what attribution
 * adds to a backfill (decoding every transaction's calldata, COPYing the rows). Postgres unless --pglite.
 */

/** Wallets registered before the run; the load then repeats them (the idempotent, read-mostly path). */
const REGISTRATION_WALLETS = 1_000
const REGISTRATION_DURATION_S = 10
const REGISTRATION_CONNECTIONS = 16
/** Targets from issue 5. */
const TARGET_REQUESTS_PER_SECOND = 3_000
const TARGET_P99_MS = 25
const TARGET_ATTRIBUTION_SHARE = 0.05
/** The attribution chain: blocks of plain transfers, about half of them carrying a suffix. */
const CHAIN_BLOCKS = 300
const TRANSACTIONS_PER_BLOCK = 60
const ATTRIBUTED_SHARE = 0.5
const STACKED_SHARE = 0.1
const CODE_POOL = 50
const SENDERS = 10
const TRANSFER_GAS = 40_000
/** ERC-4337 bundles per block, of this many user operations each, every operation with a suffix (issue 15). */
const BUNDLES_PER_BLOCK = 2
const OPERATIONS_PER_BUNDLE = 4
const SMART_ACCOUNTS = 16
const BUNDLE_GAS = 2_000_000
const WRITE_BATCH_BLOCKS = 100
const FETCH_CONCURRENCY = 8
const RESULTS_PATH = fileURLToPath(new URL('./results/attribution.json', import.meta.url))

const log = (line: string) => console.log(line)

export type AttributionBenchResults = {
  database: string
  registration: LoadReport & { wallets: number; connections: number; meetsTarget: boolean }
  indexing: {
    blocks: number
    transactions: number
    attributedTransactions: number
    /** User operations attributed (in bundles to the EntryPoint), beside the transactions. */
    userOperations: number
    attributionRows: number
    backfillSeconds: number
    decodeSeconds: number
    writeSecondsWithAttribution: number
    writeSecondsWithout: number
    /** Decoding plus the extra write time, over the whole backfill. */
    attributionShare: number
    meetsTarget: boolean
  }
}

async function generateAttributedChain(rpcUrl: string) {
  const rpc = createRpcClient(rpcUrl)
  const accounts = (await rpc.call<Address[]>('eth_accounts')).slice(0, SENDERS)
  const codes = Array.from({ length: CODE_POOL }, generateBuilderCode)
  const bundler = accounts[0]!
  const userOperations = await setUpUserOperations(rpc, bundler, SMART_ACCOUNTS)
  const nonces = new Map<Address, number>(
    await Promise.all(
      accounts.map(async (account) => [account, Number.parseInt(await rpc.call<Hex>('eth_getTransactionCount', [account, 'pending']), 16)] as const),
    ),
  )
  let attributed = 0
  let operations = 0
  let sequence = 0
  for (let block = 0; block < CHAIN_BLOCKS; block++) {
    const calls = Array.from({ length: TRANSACTIONS_PER_BLOCK }, () => {
      const from = accounts[sequence++ % accounts.length]!
      const nonce = nonces.get(from)!
      nonces.set(from, nonce + 1)
      let data: Hex = '0x'
      if (Math.random() < ATTRIBUTED_SHARE) {
        attributed++
        data = attributionSuffix([codes[Math.floor(Math.random() * codes.length)]!])
        if (Math.random() < STACKED_SHARE) data = concat([data, Attribution.toDataSuffix({ walletCode: 'bench_wallet' })])
      }
      const to = `0x${(sequence % 997).toString(16).padStart(40, '0')}`
      return {
        method: 'eth_sendTransaction',
        params: [{ from, to, value: '0x1', data, gas: `0x${TRANSFER_GAS.toString(16)}`, nonce: `0x${nonce.toString(16)}` }],
      }
    })
    for (let bundle = 0; bundle < BUNDLES_PER_BLOCK; bundle++) {
      const nonce = nonces.get(bundler)!
      nonces.set(bundler, nonce + 1)
      const data = await userOperations.bundle(OPERATIONS_PER_BUNDLE, () => attributionSuffix([codes[Math.floor(Math.random() * codes.length)]!]))
      operations += OPERATIONS_PER_BUNDLE
      calls.push({
        method: 'eth_sendTransaction',
        params: [{ from: bundler, to: userOperations.entryPoint, data, value: '0x0', gas: `0x${BUNDLE_GAS.toString(16)}`, nonce: `0x${nonce.toString(16)}` }],
      })
    }
    await rpc.batch(calls)
    await rpc.call('evm_mine')
  }
  const head = Number.parseInt(await rpc.call<Hex>('eth_blockNumber'), 16)
  return { head, transactions: CHAIN_BLOCKS * (TRANSACTIONS_PER_BLOCK + BUNDLES_PER_BLOCK), attributed, userOperations: operations }
}

async function measureRegistration(databaseUrl: string, rpcUrl: string, workDir: string) {
  const config = serveConfigSchema.parse({ port: 0, databaseUrl, upstreamRpc: rpcUrl, startBlock: 'latest', registrationRateLimit: 1e9, logLevel: 'silent' })
  const gateway = await startGateway({ config, logger: pino({ level: 'warn' }) })
  try {
    const wallets = Array.from({ length: REGISTRATION_WALLETS }, (_, index) => `0x${(index + 1).toString(16).padStart(40, 'a')}`)
    const bodies = wallets.map((walletAddress) => JSON.stringify({ walletAddress }))
    for (const body of bodies) await fetch(`${gateway.url}/v1/agents/builder-codes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
    const report = await runLoad({
      mode: 'throughput',
      url: `${gateway.url}/v1/agents/builder-codes`,
      bodiesFile: writeBodies(workDir, 'registrations', bodies),
      durationS: REGISTRATION_DURATION_S,
      connections: REGISTRATION_CONNECTIONS,
    })
    const meetsTarget = report.failures === 0 && report.requestsPerSecond >= TARGET_REQUESTS_PER_SECOND && report.p99Ms < TARGET_P99_MS
    return { ...report, wallets: REGISTRATION_WALLETS, connections: REGISTRATION_CONNECTIONS, meetsTarget }
  } finally {
    await gateway.stop()
  }
}

async function timeWrites(databaseUrl: string, batches: BlockRows[][]): Promise<number> {
  const db = await createDb({ databaseUrl })
  try {
    const store = createStore({ db })
    const started = performance.now()
    for (const batch of batches) await store.writeBlocks(batch)
    return (performance.now() - started) / 1000
  } finally {
    await db.close()
  }
}

async function measureIndexing(
  options: { pglite: boolean; adminDatabaseUrl: string },
  rpcUrl: string,
  chain: { head: number; transactions: number; attributed: number; userOperations: number },
  defer: (label: string, step: () => Promise<void>) => void,
) {
  const backfillDatabase = await createBenchDatabase(options)
  defer('drop backfill database', backfillDatabase.drop)
  const config = serveConfigSchema.parse({ port: 0, databaseUrl: backfillDatabase.databaseUrl, upstreamRpc: rpcUrl, startBlock: '0', logLevel: 'silent' })
  const started = performance.now()
  const gateway = await startGateway({ config, logger: pino({ level: 'warn' }) })
  await gateway.ingester.waitForBlock(chain.head, 10 * 60_000)
  const backfillSeconds = (performance.now() - started) / 1000
  await gateway.stop()
  await backfillDatabase.drop()

  // The same blocks, fetched once (untimed); then decoding alone, and COPY with and without the rows.
  const fetcher = createBlockFetcher({ upstream: createUpstream({ rpcUrl }), capabilities: { blockReceipts: true, tracing: true } })
  const blocks = []
  for (let from = 0; from <= chain.head; from += FETCH_CONCURRENCY)
    blocks.push(
      ...(await Promise.all(Array.from({ length: Math.min(FETCH_CONCURRENCY, chain.head - from + 1) }, (_, index) => fetcher.fetchBlock(from + index)))),
    )
  let mark = performance.now()
  let decoded = 0
  let decodedOperations = 0
  // What ingest decodes: each transaction's own suffix and, for a bundle to an EntryPoint, its operations' (with their events).
  for (const block of blocks)
    block.block.transactions.forEach((transaction, index) => {
      for (const action of attributedActions(transaction, block.receipts[index] as never)) {
        if (action.kind === 'transaction') decoded++
        else decodedOperations++
      }
    })
  const decodeSeconds = (performance.now() - mark) / 1000
  // What ingest adds for the on-chain builder-codes registry (Base's address): every log's address checked.
  mark = performance.now()
  let registryEventCount = 0
  for (const block of blocks)
    registryEventCount += registryEvents(
      REGISTRY_ADDRESSES[8453]!,
      { number: Number(block.block.number), timestamp: Number(block.block.timestamp) },
      block.receipts.flatMap((receipt) => receipt.logs) as never,
    ).length
  const registrySeconds = (performance.now() - mark) / 1000
  const rows = blocks.map((data) => toRows(data))
  const batches: BlockRows[][] = []
  for (let index = 0; index < rows.length; index += WRITE_BATCH_BLOCKS) batches.push(rows.slice(index, index + WRITE_BATCH_BLOCKS))
  const withoutRows = batches.map((batch) => batch.map((block) => ({ ...block, attributions: [] })))
  const withoutDatabase = await createBenchDatabase(options)
  defer('drop write database', withoutDatabase.drop)
  const writeSecondsWithout = await timeWrites(withoutDatabase.databaseUrl, withoutRows)
  await withoutDatabase.drop()
  const withDatabase = await createBenchDatabase(options)
  defer('drop write database', withDatabase.drop)
  mark = performance.now()
  const writeSecondsWithAttribution = await timeWrites(withDatabase.databaseUrl, batches)
  await withDatabase.drop()
  const attributionShare = (decodeSeconds + registrySeconds + Math.max(0, writeSecondsWithAttribution - writeSecondsWithout)) / backfillSeconds
  return {
    blocks: chain.head + 1,
    transactions: chain.transactions,
    attributedTransactions: decoded,
    userOperations: decodedOperations,
    attributionRows: rows.reduce((sum, block) => sum + block.attributions.length, 0),
    backfillSeconds,
    decodeSeconds,
    registrySeconds,
    registryEventCount,
    writeSecondsWithAttribution,
    writeSecondsWithout,
    attributionShare,
    meetsTarget: attributionShare < TARGET_ATTRIBUTION_SHARE,
  }
}

/** Runs both measurements and prints them; the main bench may call this at its end. */
export async function runAttributionBench(options: { pglite: boolean; adminDatabaseUrl: string }): Promise<AttributionBenchResults> {
  const cleanup = createCleanup(log)
  try {
    const workDir = mkdtempSync(join(tmpdir(), 'flashgate-bench-attribution-'))
    cleanup.defer('work directory', () => rmSync(workDir, { recursive: true, force: true }))
    cleanup.defer('load workers', killLoadWorkers)
    const anvil = await startAnvil({ noMining: true, extraArgs: ['--order', 'fifo'] })
    cleanup.defer('anvil', anvil.stop)

    log(`attribution: registration load (${REGISTRATION_WALLETS} repeat wallets, ${REGISTRATION_CONNECTIONS} connections, ${REGISTRATION_DURATION_S} s)`)
    const registrationDatabase = await createBenchDatabase(options)
    cleanup.defer('drop registration database', registrationDatabase.drop)
    await createRpcClient(anvil.rpcUrl).call('evm_mine')
    const registration = await measureRegistration(registrationDatabase.databaseUrl, anvil.rpcUrl, workDir)
    await registrationDatabase.drop()
    log(
      `  ${Math.round(registration.requestsPerSecond)} req/s, p50 ${registration.p50Ms.toFixed(2)} ms, p99 ${registration.p99Ms.toFixed(2)} ms, ${registration.failures} failures (target ≥${TARGET_REQUESTS_PER_SECOND} req/s, p99 <${TARGET_P99_MS} ms: ${registration.meetsTarget ? 'met' : 'NOT met'})`,
    )

    log(
      `attribution: generating ${CHAIN_BLOCKS} blocks × ${TRANSACTIONS_PER_BLOCK} transfers, ${ATTRIBUTED_SHARE * 100}% with a suffix, and ${BUNDLES_PER_BLOCK} ERC-4337 bundles of ${OPERATIONS_PER_BUNDLE} user operations each`,
    )
    const chain = await generateAttributedChain(anvil.rpcUrl)
    const indexing = await measureIndexing(options, anvil.rpcUrl, chain, cleanup.defer)
    log(
      `  backfill ${indexing.backfillSeconds.toFixed(2)} s; decoding ${(indexing.decodeSeconds * 1000).toFixed(0)} ms (${indexing.attributedTransactions} transactions, ${indexing.userOperations} of ${chain.userOperations} user operations; ${((indexing.decodeSeconds * 1000) / indexing.blocks).toFixed(2)} ms a block); COPY ${indexing.writeSecondsWithAttribution.toFixed(2)} s with ${indexing.attributionRows} attribution rows vs ${indexing.writeSecondsWithout.toFixed(2)} s without`,
    )
    log(`  registry scan: ${((indexing.registrySeconds * 1000) / indexing.blocks).toFixed(3)} ms a block (${indexing.registryEventCount} events)`)
    log(
      `  attribution share of backfill: ${(indexing.attributionShare * 100).toFixed(2)}% (target <${TARGET_ATTRIBUTION_SHARE * 100}%: ${indexing.meetsTarget ? 'met' : 'NOT met'})`,
    )
    return { database: options.pglite ? 'PGlite' : 'Postgres', registration, indexing }
  } finally {
    await cleanup.run()
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { pglite: { type: 'boolean', default: false }, 'admin-database-url': { type: 'string' } },
  })
  const adminDatabaseUrl = values['admin-database-url'] ?? process.env.BENCH_ADMIN_DATABASE_URL ?? DEFAULT_ADMIN_DATABASE_URL
  const results = await runAttributionBench({ pglite: values.pglite, adminDatabaseUrl })
  writeFileSync(RESULTS_PATH, `${JSON.stringify({ startedAt: new Date().toISOString(), ...results }, null, 2)}\n`)
  log(`wrote ${RESULTS_PATH}`)
  process.exit(results.registration.meetsTarget && results.indexing.meetsTarget ? 0 : 1)
}
