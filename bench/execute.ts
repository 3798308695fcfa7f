import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import pino from 'pino'
import { type Hex, keccak256, parseGwei, type RpcBlock, toHex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { type Anvil, DEV_MNEMONIC, startAnvil } from '../src/devnet/anvil.js'
import { type AnvilClient, createAnvilClient } from '../src/devnet/anvil-client.js'
import { createFlashblockExecutor } from '../src/pending/execute/index.js'
import { type FlashblockWireMessage, flashblockMessage } from '../src/pending/message.js'
import { createPendingState } from '../src/pending/state.js'
import { createUpstream } from '../src/upstream/index.js'
import { startDelayProxy } from '../test/fixtures/delay-proxy.js'
import { nearestRank } from './quantile.js'

/**
 * `npm run bench -- --execute`: what executing flashblocks ourselves (issue 16) costs, per EVM candidate:
 * - `ethereumjs`: flashgate's executor (src/pending/execute/), fed the flashblocks through a real pending
 *   state as the feed would, timed per flashblock (the EVM's work, and frame → receipts visible);
 * - `anvil`: an anvil forked from the upstream and driven as the devnet's sequencer drives its own
 *   (src/devnet/sequencer.ts): per block, a fork reset at the parent; per flashblock, the block so far
 *   re-mined on a snapshot of the parent (anvil cannot add to a block it has mined).
 *
 * The upstream is a real anvil behind a loopback proxy that counts the calls the executor makes (its state
 * reads) and can hold each answer back, as a provider far away would. Each flashblock's transactions are
 * ETH transfers from ten dev accounts, half to fresh addresses (state the executor must ask for).
 * `cold` is a block's first flashblock, `warm` the later ones; for ethereumjs the first block reads its
 * whole state from the upstream and later blocks start from the state the one before left.
 */

const USAGE = 'npm run bench -- --execute [--engines ethereumjs,anvil] [--sizes 10,50,200] [--blocks 3] [--upstream-delay-ms 0,20] [--results PATH]'
const ENGINES = ['ethereumjs', 'anvil'] as const
type Engine = (typeof ENGINES)[number]
const RESULTS_PATH = fileURLToPath(new URL('./results/execute.json', import.meta.url))
const FLASHBLOCKS_PER_BLOCK = 10
const SENDERS = 10
/** Room for 200 transfers in each of 10 flashblocks. */
const GAS_LIMIT = 100_000_000n

type Figures = {
  engine: Engine
  transactionsPerFlashblock: number
  upstreamDelayMs: number
  cold: Percentiles
  warm: Percentiles
  /** anvil: the fork reset per block. ethereumjs: from a frame applied to its receipts visible in pending. */
  resetMs?: Percentiles
  visibleMs?: Percentiles
  upstreamCallsPerFlashblock: number
  upstreamRoundTripsPerFlashblock?: number
}
type Percentiles = { p50: number; p99: number; samples: number }

function percentiles(samples: number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (q: number) => (sorted.length === 0 ? 0 : nearestRank(sorted, q))
  const round = (value: number) => Math.round(value * 100) / 100
  return { p50: round(at(0.5)), p99: round(at(0.99)), samples: sorted.length }
}

export async function runExecuteBench(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      engines: { type: 'string' },
      sizes: { type: 'string' },
      blocks: { type: 'string' },
      'upstream-delay-ms': { type: 'string' },
      results: { type: 'string' },
    },
  })
  const engines = (values.engines ?? ENGINES.join(',')).split(',') as Engine[]
  const sizes = (values.sizes ?? '10,50,200').split(',').map(Number)
  const blocks = Number(values.blocks ?? 3)
  const delays = (values['upstream-delay-ms'] ?? '0,20').split(',').map(Number)
  if ([...sizes, blocks, ...delays].some((value) => !Number.isInteger(value) || value < 0) || engines.some((engine) => !ENGINES.includes(engine))) {
    console.error(USAGE)
    return 2
  }
  const startedAt = new Date().toISOString()
  const figures: Figures[] = []
  for (const engine of engines) {
    const upstream = await startAnvil({ noMining: engine === 'ethereumjs', extraArgs: ['--gas-limit', GAS_LIMIT.toString()] })
    const proxy = await startDelayProxy(upstream.rpcUrl)
    let executor: Anvil | null = null
    try {
      if (engine === 'anvil')
        executor = await startAnvil({ noMining: true, extraArgs: ['--fork-url', proxy.url, '--order', 'fifo', '--gas-limit', GAS_LIMIT.toString()] })
      for (const delay of delays)
        for (const size of sizes) {
          proxy.setDelay(delay)
          const measured =
            engine === 'anvil' ? await measure(upstream, executor!, proxy, size, blocks, delay) : await measureEthereumjs(upstream, proxy, size, blocks, delay)
          figures.push(measured)
          console.log(
            `${engine.padEnd(10)} ${String(size).padStart(3)} tx/flashblock, upstream +${delay} ms: first flashblock of a block p50 ${measured.cold.p50} / p99 ${measured.cold.p99} ms; ` +
              `later ones p50 ${measured.warm.p50} / p99 ${measured.warm.p99} ms; ${measured.upstreamCallsPerFlashblock} upstream calls per flashblock` +
              (measured.upstreamRoundTripsPerFlashblock === undefined ? '' : ` in ${measured.upstreamRoundTripsPerFlashblock} round trips`) +
              (measured.visibleMs ? `; frame → receipts visible p50 ${measured.visibleMs.p50} / p99 ${measured.visibleMs.p99} ms` : ''),
          )
        }
    } finally {
      await executor?.stop()
      await proxy.stop()
      await upstream.stop()
    }
  }
  const resultsPath = values.results ?? RESULTS_PATH
  writeFileSync(resultsPath, `${JSON.stringify({ startedAt, flashblocksPerBlock: FLASHBLOCKS_PER_BLOCK, figures }, null, 1)}\n`)
  console.log(`results written to ${resultsPath}`)
  return 0
}

/** Ten dev accounts' ETH transfers for one block, signed before the clock starts (the feed delivers them signed). */
async function signTransfers(node: AnvilClient, parent: number, size: number, block: number): Promise<Hex[]> {
  const senders = Array.from({ length: SENDERS }, (_, index) => mnemonicToAccount(DEV_MNEMONIC, { addressIndex: index }))
  const chainId = Number(await node.request<Hex>('eth_chainId'))
  const nonces = await Promise.all(senders.map((sender) => node.request<Hex>('eth_getTransactionCount', [sender.address, toHex(parent)]).then(Number)))
  const raws: Hex[] = []
  for (let index = 0; index < size * FLASHBLOCKS_PER_BLOCK; index++) {
    const from = index % SENDERS
    const to =
      index % 2 === 0
        ? senders[(from + 1) % SENDERS]!.address
        : (`0x${(0xbe00000000n + BigInt(block * 100_000 + index)).toString(16).padStart(40, '0')}` as Hex)
    raws.push(
      await senders[from]!.signTransaction({
        type: 'eip1559',
        chainId,
        nonce: nonces[from]!++,
        to,
        value: 1n,
        gas: 21_000n,
        maxFeePerGas: parseGwei('50'),
        maxPriorityFeePerGas: 1n,
      }),
    )
  }
  return raws
}

/**
 * flashgate's executor behind a real pending state: each block's transactions go to the upstream's pool (it
 * mines them after the block's last flashblock), and its flashblocks are applied as the feed would; the
 * next block names the hash the last diff gave as its parent, so it builds on the state this one left.
 */
async function measureEthereumjs(
  upstream: Anvil,
  proxy: Awaited<ReturnType<typeof startDelayProxy>>,
  size: number,
  blocks: number,
  delay: number,
): Promise<Figures> {
  const node = createAnvilClient(upstream.rpcUrl)
  const logger = pino({ level: 'silent' })
  const state = createPendingState({ logger })
  const viaProxy = createUpstream({ rpcUrl: proxy.url })
  const executor = createFlashblockExecutor({
    state,
    chainId: Number(await node.request<Hex>('eth_chainId')),
    request: (method, params) => viaProxy.batchedRequest(method, params),
    logger,
  })
  state.setHydrate(executor.hydrate)
  const cold: number[] = []
  const warm: number[] = []
  const visible: number[] = []
  const callsBefore = proxy.calls()
  const roundTripsBefore = proxy.roundTrips()
  let flashblocks = 0
  try {
    for (let block = 0; block < blocks; block++) {
      const parent = Number(await node.request<Hex>('eth_blockNumber'))
      const header = await node.request<RpcBlock<'latest', false>>('eth_getBlockByNumber', [toHex(parent), false])
      const raws = await signTransfers(node, parent, size, block)
      const sent = await node.forwardInOrder(raws.map((raw, id) => ({ jsonrpc: '2.0', id, method: 'eth_sendRawTransaction', params: [raw] })))
      const refused = sent.find((answer) => answer.error !== undefined)
      if (refused !== undefined) throw new Error(`the upstream refused a transaction: ${refused.error!.message}`)
      const number = parent + 1
      const payloadId = toHex(number, { size: 8 })
      // The feed's hash of the block: the next block names it as its parent, so the executor carries the state
      // over. (The upstream seals the block after its last flashblock, as a node a little behind the sequencer.)
      const sealedHash = keccak256(toHex(number))
      for (let index = 0; index < FLASHBLOCKS_PER_BLOCK; index++) {
        const wire: FlashblockWireMessage = {
          payload_id: payloadId,
          index,
          ...(index === 0 && {
            base: {
              parent_beacon_block_root: header.parentBeaconBlockRoot ?? `0x${'00'.repeat(32)}`,
              parent_hash: block === 0 ? header.hash! : keccak256(toHex(parent)),
              fee_recipient: header.miner,
              prev_randao: header.mixHash,
              block_number: toHex(number),
              gas_limit: toHex(GAS_LIMIT),
              timestamp: toHex(Number(header.timestamp) + 2),
              extra_data: '0x',
              base_fee_per_gas: header.baseFeePerGas ?? '0x0',
            },
          }),
          diff: {
            state_root: `0x${'00'.repeat(32)}`,
            receipts_root: `0x${'00'.repeat(32)}`,
            logs_bloom: `0x${'00'.repeat(256)}`,
            gas_used: '0x0',
            block_hash: sealedHash,
            transactions: raws.slice(index * size, (index + 1) * size),
            withdrawals: [],
          },
          metadata: { block_number: number, access_list: null },
        }
        const message = flashblockMessage.parse(wire)
        const started = performance.now()
        await state.apply(message)
        await executor.idle()
        ;(index === 0 ? cold : warm).push(executor.status().lastFlashblockMs ?? Number.NaN)
        await state.settled()
        visible.push(performance.now() - started)
        flashblocks++
      }
      const pendingBlock = state.blocks(parent).find((candidate) => candidate.number === number)
      const missing = pendingBlock?.receipts.filter((receipt) => receipt === null).length ?? raws.length
      if (missing > 0) throw new Error(`block ${number}: ${missing} of ${raws.length} transactions have no executed receipt`)
      state.confirm({ number, hash: sealedHash, transactionHashes: pendingBlock!.transactions.map((transaction) => transaction.hash) })
      await node.request('evm_mine', [Number(header.timestamp) + 2])
    }
  } finally {
    executor.stop()
  }
  return {
    engine: 'ethereumjs',
    transactionsPerFlashblock: size,
    upstreamDelayMs: delay,
    cold: percentiles(cold),
    warm: percentiles(warm),
    visibleMs: percentiles(visible),
    upstreamCallsPerFlashblock: Math.round(((proxy.calls() - callsBefore) / flashblocks) * 10) / 10,
    upstreamRoundTripsPerFlashblock: Math.round(((proxy.roundTrips() - roundTripsBefore) / flashblocks) * 10) / 10,
  }
}

async function measure(
  upstream: Anvil,
  executor: Anvil,
  proxy: Awaited<ReturnType<typeof startDelayProxy>>,
  size: number,
  blocks: number,
  delay: number,
): Promise<Figures> {
  const node = createAnvilClient(upstream.rpcUrl)
  const exec = createAnvilClient(executor.rpcUrl)
  const cold: number[] = []
  const warm: number[] = []
  const resets: number[] = []
  let upstreamCalls = 0
  let flashblocks = 0
  for (let block = 0; block < blocks; block++) {
    // The parent: one more block on the upstream, so that each block forks from a new height.
    await node.request('evm_mine')
    const parent = Number(await node.request<Hex>('eth_blockNumber'))
    const header = await node.request<{ timestamp: Hex; baseFeePerGas: Hex }>('eth_getBlockByNumber', [toHex(parent), false])
    const raws = await signTransfers(node, parent, size, block)
    let started = performance.now()
    await exec.request('anvil_reset', [{ forking: { jsonRpcUrl: proxy.url, blockNumber: parent } }])
    let snapshot = await exec.request<Hex>('evm_snapshot')
    resets.push(performance.now() - started)
    const timestamp = Number(header.timestamp) + 2
    for (let index = 0; index < FLASHBLOCKS_PER_BLOCK; index++) {
      const callsBefore = proxy.calls()
      started = performance.now()
      if (index > 0) {
        await exec.request('evm_revert', [snapshot])
        snapshot = await exec.request<Hex>('evm_snapshot')
      }
      await exec.request('anvil_setNextBlockBaseFeePerGas', [header.baseFeePerGas])
      await exec.request('evm_setBlockGasLimit', [toHex(GAS_LIMIT)])
      const sent = raws.slice(0, (index + 1) * size)
      const answers = await exec.forwardInOrder(sent.map((raw, id) => ({ jsonrpc: '2.0', id, method: 'eth_sendRawTransaction', params: [raw] })))
      const refused = answers.find((answer) => answer.error !== undefined)
      if (refused !== undefined) throw new Error(`the executor refused a transaction: ${refused.error!.message}`)
      await exec.request('evm_mine', [timestamp])
      const receipts = await exec.request<unknown[]>('eth_getBlockReceipts', ['latest'])
      if (receipts.length !== sent.length) throw new Error(`mined ${receipts.length} of ${sent.length} transactions`)
      ;(index === 0 ? cold : warm).push(performance.now() - started)
      upstreamCalls += proxy.calls() - callsBefore
      flashblocks++
    }
    // Leave the executor's pool empty for the next reset.
    await exec.request('evm_revert', [snapshot])
  }
  return {
    engine: 'anvil',
    transactionsPerFlashblock: size,
    upstreamDelayMs: delay,
    cold: percentiles(cold),
    warm: percentiles(warm),
    resetMs: percentiles(resets),
    upstreamCallsPerFlashblock: Math.round((upstreamCalls / flashblocks) * 10) / 10,
  }
}
