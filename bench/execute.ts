import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { type Hex, parseGwei, toHex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { type Anvil, DEV_MNEMONIC, startAnvil } from '../src/devnet/anvil.js'
import { createAnvilClient } from '../src/devnet/anvil-client.js'
import { startDelayProxy } from '../test/fixtures/delay-proxy.js'

/**
 * `npm run bench -- --execute`: what executing flashblocks ourselves (issue 16) would cost with one candidate
 * EVM, an anvil forked from the upstream and driven as the devnet's sequencer drives its own (src/devnet/
 * sequencer.ts): per block, a fork reset at the parent; per flashblock, the block so far re-mined on a
 * snapshot of the parent (anvil cannot add to a block it has mined) and its receipts read back.
 *
 * The upstream is a real anvil behind a loopback proxy that counts the calls the fork makes (its state
 * reads) and can hold each answer back, as a provider far away would. Each flashblock's transactions are
 * ETH transfers from ten dev accounts, half to fresh addresses (state the fork must ask for).
 */

const USAGE = 'npm run bench -- --execute [--sizes 10,50,200] [--blocks 3] [--upstream-delay-ms 0,20] [--results PATH]'
const RESULTS_PATH = fileURLToPath(new URL('./results/execute.json', import.meta.url))
const FLASHBLOCKS_PER_BLOCK = 10
const SENDERS = 10
/** Room for 200 transfers in each of 10 flashblocks. */
const GAS_LIMIT = 100_000_000n

type Figures = {
  transactionsPerFlashblock: number
  upstreamDelayMs: number
  cold: Percentiles
  warm: Percentiles
  resetMs: Percentiles
  upstreamCallsPerFlashblock: number
}
type Percentiles = { p50: number; p99: number; samples: number }

function percentiles(samples: number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0
  const round = (value: number) => Math.round(value * 100) / 100
  return { p50: round(at(0.5)), p99: round(at(0.99)), samples: sorted.length }
}

export async function runExecuteBench(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { sizes: { type: 'string' }, blocks: { type: 'string' }, 'upstream-delay-ms': { type: 'string' }, results: { type: 'string' } },
  })
  const sizes = (values.sizes ?? '10,50,200').split(',').map(Number)
  const blocks = Number(values.blocks ?? 3)
  const delays = (values['upstream-delay-ms'] ?? '0,20').split(',').map(Number)
  if ([...sizes, blocks, ...delays].some((value) => !Number.isInteger(value) || value < 0)) {
    console.error(USAGE)
    return 2
  }
  const startedAt = new Date().toISOString()
  const upstream = await startAnvil({})
  const proxy = await startDelayProxy(upstream.rpcUrl)
  let executor: Anvil | null = null
  try {
    executor = await startAnvil({ noMining: true, extraArgs: ['--fork-url', proxy.url, '--order', 'fifo', '--gas-limit', GAS_LIMIT.toString()] })
    const figures: Figures[] = []
    for (const delay of delays)
      for (const size of sizes) {
        proxy.setDelay(delay)
        figures.push(await measure(upstream, executor, proxy, size, blocks, delay))
        const last = figures.at(-1)!
        console.log(
          `${String(size).padStart(3)} tx/flashblock, upstream +${delay} ms: first flashblock of a block p50 ${last.cold.p50} / p99 ${last.cold.p99} ms; ` +
            `later ones p50 ${last.warm.p50} / p99 ${last.warm.p99} ms; fork reset p50 ${last.resetMs.p50} ms; ${last.upstreamCallsPerFlashblock} upstream calls per flashblock`,
        )
      }
    const resultsPath = values.results ?? RESULTS_PATH
    writeFileSync(
      resultsPath,
      `${JSON.stringify({ startedAt, engine: 'anvil fork (the bundled binary)', flashblocksPerBlock: FLASHBLOCKS_PER_BLOCK, figures }, null, 1)}\n`,
    )
    console.log(`results written to ${resultsPath}`)
    return 0
  } finally {
    await executor?.stop()
    await proxy.stop()
    await upstream.stop()
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
  const senders = Array.from({ length: SENDERS }, (_, index) => mnemonicToAccount(DEV_MNEMONIC, { addressIndex: index }))
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
    const chainId = Number(await node.request<Hex>('eth_chainId'))
    const nonces = await Promise.all(senders.map((sender) => node.request<Hex>('eth_getTransactionCount', [sender.address, toHex(parent)]).then(Number)))
    // Signed before the clock: the feed delivers them signed.
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
    transactionsPerFlashblock: size,
    upstreamDelayMs: delay,
    cold: percentiles(cold),
    warm: percentiles(warm),
    resetMs: percentiles(resets),
    upstreamCallsPerFlashblock: Math.round((upstreamCalls / flashblocks) * 10) / 10,
  }
}
