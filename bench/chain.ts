import { type Address, encodeFunctionData, type Hex, numberToHex, pad } from 'viem'
import { TOKEN_DEPLOY_BYTECODE, tokenAbi } from '../src/devnet/contracts.js'
import { createRandom, type Random } from '../test/fixtures/random.js'
import { createRpcClient, type RpcCall, type RpcClient } from './rpc.js'

/** Token contracts deployed, and how many dev accounts deploy them (round robin). */
const TOKEN_COUNT = 20
const DEPLOYER_COUNT = 5
/** Per block: bulk `multi()` txs, each emitting this many Transfer logs. */
const MULTI_TXS_PER_BLOCK = 2
const LOGS_PER_MULTI = 80
/** Per block: one single-log `transfer()`, one plain ETH transfer, and one rare `emitLogs()` (Custom topic0). */
const SINGLE_LOG_TXS_PER_BLOCK = 2
export const LOGS_PER_BLOCK = MULTI_TXS_PER_BLOCK * LOGS_PER_MULTI + SINGLE_LOG_TXS_PER_BLOCK
/** EOAs that receive tokens and ETH (and so have balances that change over the chain). */
const USER_COUNT = 200
/** Explicit gas: no estimation round trip, and every tx is accepted into the pool as sent. */
const GAS_PER_LOG = 2_500
const CALL_BASE_GAS = 60_000
const ETH_TRANSFER_GAS = 21_000
const DEPLOY_GAS = 1_000_000
/** Largest wei amount of a plain ETH transfer (0.001 ETH): dev accounts never run dry. */
const MAX_ETH_TRANSFER_WEI = 10n ** 15n
const PROGRESS_EVERY_BLOCKS = 500

export type BenchChain = {
  /** Last block; traffic runs from `firstTrafficBlock` to `head`. */
  head: number
  firstTrafficBlock: number
  tokens: Address[]
  senders: Address[]
  users: Address[]
  logs: number
  transactions: number
  /** Logs with the rare Custom topic0, spread over all tokens. */
  rareLogs: number
  seconds: number
}

type Tx = { from: Address; to?: Address; data?: Hex; value?: bigint; gas: number }

/**
 * Builds a chain of about `targetLogs` logs on an anvil started with `--no-mining`: each block's txs go
 * out as one JSON-RPC batch of `eth_sendTransaction` (unlocked dev accounts, explicit nonce and gas), then
 * one `evm_mine` seals them.
 */
export async function generateChain({
  rpcUrl,
  targetLogs,
  seed,
  log,
}: {
  rpcUrl: string
  targetLogs: number
  seed: number
  log: (line: string) => void
}): Promise<BenchChain> {
  const started = performance.now()
  const rpc = createRpcClient(rpcUrl)
  const random = createRandom(seed)
  const senders = await rpc.call<Address[]>('eth_accounts')
  const users = Array.from({ length: USER_COUNT }, () => random.hex(20) as Address)
  const nonces = new Map<Address, number>()
  for (const [index, nonce] of (await rpc.batch<Hex>(senders.map((a) => ({ method: 'eth_getTransactionCount', params: [a, 'latest'] })))).entries())
    nonces.set(senders[index]!, Number(nonce))

  const toCall = (tx: Tx): RpcCall => {
    const nonce = nonces.get(tx.from)!
    nonces.set(tx.from, nonce + 1)
    return {
      method: 'eth_sendTransaction',
      params: [
        {
          from: tx.from,
          to: tx.to,
          data: tx.data,
          value: tx.value === undefined ? undefined : numberToHex(tx.value),
          gas: numberToHex(tx.gas),
          nonce: numberToHex(nonce),
        },
      ],
    }
  }
  const mineBlock = async (txs: Tx[]) => {
    await rpc.batch(txs.map(toCall))
    await rpc.call('evm_mine')
  }

  const deployments = Array.from({ length: TOKEN_COUNT }, (_, index) => ({
    from: senders[index % DEPLOYER_COUNT]!,
    data: TOKEN_DEPLOY_BYTECODE,
    gas: DEPLOY_GAS,
  }))
  const hashes = await rpc.batch<Hex>(deployments.map(toCall))
  await rpc.call('evm_mine')
  const receipts = await rpc.batch<{ status: Hex; contractAddress: Address | null }>(
    hashes.map((hash) => ({ method: 'eth_getTransactionReceipt', params: [hash] })),
  )
  const tokens = receipts.map((receipt, index) => {
    if (receipt?.status !== '0x1' || !receipt.contractAddress) throw new Error(`token deployment ${hashes[index]} failed`)
    return receipt.contractAddress
  })

  const firstTrafficBlock = Number(await rpc.call<Hex>('eth_blockNumber')) + 1
  const blocks = Math.max(1, Math.ceil(targetLogs / LOGS_PER_BLOCK))
  let transactions = TOKEN_COUNT
  for (let block = 0; block < blocks; block++) {
    const txs = blockTraffic(random, senders, tokens, users)
    await mineBlock(txs)
    transactions += txs.length
    if ((block + 1) % PROGRESS_EVERY_BLOCKS === 0) {
      const seconds = (performance.now() - started) / 1000
      log(`  chain: ${block + 1}/${blocks} blocks, ${((block + 1) * LOGS_PER_BLOCK).toLocaleString('en-US')} logs, ${seconds.toFixed(0)} s`)
    }
  }

  const head = Number(await rpc.call<Hex>('eth_blockNumber'))
  await checkChain(rpc, firstTrafficBlock, head, random)
  return {
    head,
    firstTrafficBlock,
    tokens,
    senders,
    users,
    logs: blocks * LOGS_PER_BLOCK,
    transactions,
    rareLogs: blocks,
    seconds: (performance.now() - started) / 1000,
  }
}

function blockTraffic(random: Random, senders: Address[], tokens: Address[], users: Address[]): Tx[] {
  const txs: Tx[] = []
  for (let index = 0; index < MULTI_TXS_PER_BLOCK; index++) {
    const data = encodeFunctionData({ abi: tokenAbi, functionName: 'multi', args: [random.pick(users), BigInt(LOGS_PER_MULTI)] })
    txs.push({ from: random.pick(senders), to: random.pick(tokens), data, gas: CALL_BASE_GAS + LOGS_PER_MULTI * GAS_PER_LOG })
  }
  const amount = BigInt(random.int(1, 1_000_000))
  txs.push({
    from: random.pick(senders),
    to: random.pick(tokens),
    data: encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [random.pick(users), amount] }),
    gas: CALL_BASE_GAS,
  })
  const topicCount = random.int(1, 4)
  const topic = () => pad(random.hex(random.int(1, 32)))
  txs.push({
    from: random.pick(senders),
    to: random.pick(tokens),
    data: encodeFunctionData({ abi: tokenAbi, functionName: 'emitLogs', args: [topicCount, topic(), topic(), topic(), amount] }),
    gas: CALL_BASE_GAS,
  })
  txs.push({
    from: random.pick(senders),
    to: random.pick(users),
    value: BigInt(random.int(1, Number(MAX_ETH_TRANSFER_WEI / 1000n))) * 1000n,
    gas: ETH_TRANSFER_GAS,
  })
  return txs
}

/** Every tx of a few sampled blocks succeeded and the blocks hold the logs we meant to emit. */
async function checkChain(rpc: RpcClient, first: number, head: number, random: Random) {
  const sample = [first, head, ...Array.from({ length: 8 }, () => random.int(first, head))]
  const blocks = await rpc.batch<{ status: Hex; logs: unknown[] }[]>(
    sample.map((number) => ({ method: 'eth_getBlockReceipts', params: [numberToHex(number)] })),
  )
  blocks.forEach((receipts, index) => {
    const logs = receipts.reduce((sum, receipt) => sum + receipt.logs.length, 0)
    if (receipts.some((receipt) => receipt.status !== '0x1') || logs !== LOGS_PER_BLOCK)
      throw new Error(`generated block ${sample[index]} is not as sent: ${receipts.length} txs, ${logs} logs (expected ${LOGS_PER_BLOCK})`)
  })
}
