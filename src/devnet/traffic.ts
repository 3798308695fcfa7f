import { randomBytes } from 'node:crypto'
import { Attribution } from 'ox/erc8021'
import {
  type Address,
  type Hex,
  bytesToHex,
  createPublicClient,
  createTestClient,
  createWalletClient,
  encodeFunctionData,
  getAddress,
  http,
  concat,
  parseGwei,
} from 'viem'
import { attributionSuffix } from '../attribution/index.js'
import type { DevnetLogger } from './anvil.js'
import { entryPoint07Abi, entryPoint07Address } from 'viem/account-abstraction'
import { registryAbi } from '../attribution/registry.js'
import { deployToken, tokenAbi } from './contracts.js'
import { DEVNET_OPERATOR, DEVNET_REGISTRY_ADDRESS, REGISTRY_DEPLOY_BYTECODE } from './registry-contract.js'
import { deploySmartAccounts, entryPointNonce, executeCall, type SmartAccount, signedUserOperation } from './smart-accounts.js'

export const DEFAULT_TRAFFIC_RATE_PER_SECOND = 4
/** Dev accounts that send; each has at most one send in flight, so anvil assigns nonces without races. */
const SENDER_COUNT = 5
/** Fresh addresses that receive repeatedly, so that the demo has non-dev-account holders. */
const FRESH_RECIPIENTS = 5
/** While the upstream is down every tick fails; one log line per this interval is enough. */
const ERROR_LOG_INTERVAL_MS = 5_000
// Explicit gas skips an eth_estimateGas round-trip per send. Fees are left to anvil: it fills the same
// fees for every tx of one pending block, which matters because anvil 1.7.1's default fee ordering
// drops a tx whose fee outranks its sender's previous pending tx.
const CALL_GAS = 100_000n
const VALUE_GAS = 30_000n
const MAX_MULTI_LOGS = 5
const MAX_VALUE_WEI = parseGwei('1000000') // 0.001 ETH
/** viem's default (4 s) would hold start() for two blocks while waiting for the token's receipt. */
const RECEIPT_POLLING_INTERVAL_MS = 250
/** Share of an agent's transactions that carry its builder code as an ERC-8021 suffix. */
const ATTRIBUTED_SHARE = 0.6
/** Share of those that also carry a wallet's code, stacked after the agent's, which nobody registered. */
const STACKED_SHARE = 0.15
const DEMO_WALLET_CODE = 'demo_wallet'
/** Smart-account agents (ERC-4337): their user operations go through the operator, bundled. */
const SMART_AGENTS = 2
const BUNDLE_INTERVAL_MS = 3_000
const MAX_OPERATIONS_PER_BUNDLE = 3
const BUNDLE_GAS = 2_500_000n
const REGISTRY_GAS = 300_000n
/** The first of the EOA agents whose codes the demo also registers on chain; the others stay unregistered there. */
const ON_CHAIN_EOA_AGENTS = 3

export type TrafficGeneratorOptions = {
  rpcUrl: string
  /** The gateway whose REST API registers each sender as an agent, whose builder code it then sends. */
  gatewayUrl?: string
  logger: DevnetLogger
  ratePerSecond?: number
}

export type TrafficGenerator = {
  /** Deploys the demo token (waiting for its block), then starts sending. Never rejects. */
  start: () => Promise<void>
  /** Stops sending and waits for the sends in flight. */
  stop: () => Promise<void>
}

type Tx = { to: Address; data?: Hex; value?: bigint; gas: bigint }

/** Registers `wallet` as an agent through the gateway's public API and returns its builder code. */
async function registerAgent(gatewayUrl: string, wallet: Address): Promise<string> {
  const response = await fetch(`${gatewayUrl}/v1/agents/builder-codes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ walletAddress: wallet }),
  })
  const body = (await response.json()) as { builderCode?: string; error?: { message: string } }
  if (body.builderCode === undefined) throw new Error(`registration refused: ${body.error?.message ?? response.status}`)
  return body.builderCode
}

/** Demo traffic for `flashgate dev`: token transfers, logs with 0..4 topics and ETH transfers. */
export function createTrafficGenerator({
  rpcUrl,
  gatewayUrl,
  logger,
  ratePerSecond = DEFAULT_TRAFFIC_RATE_PER_SECOND,
}: TrafficGeneratorOptions): TrafficGenerator {
  const transport = http(rpcUrl, { retryCount: 0 })
  const publicClient = createPublicClient({ transport, pollingInterval: RECEIPT_POLLING_INTERVAL_MS })
  const walletClient = createWalletClient({ transport })
  const busySenders = new Set<Address>()
  const inFlight = new Set<Promise<void>>()
  let timer: NodeJS.Timeout | undefined
  let stopped = false
  let senders: Address[] = []
  let recipients: Address[] = []
  let token: Address | undefined
  const agentCodes = new Map<Address, string>()
  const testClient = createTestClient({ mode: 'anvil', transport })
  let smartAccounts: SmartAccount[] = []
  let bundleTimer: NodeJS.Timeout | undefined
  let bundling = false
  let setUp: Promise<void> | null = null
  let lastErrorLogAt = 0
  let suppressedErrors = 0

  function logError(error: unknown, msg: string) {
    const now = Date.now()
    if (now - lastErrorLogAt < ERROR_LOG_INTERVAL_MS) {
      suppressedErrors++
      return
    }
    logger.warn({ err: errorReason(error), suppressed: suppressedErrors }, msg)
    lastErrorLogAt = now
    suppressedErrors = 0
  }

  function planTx(): Tx {
    const to = pick(recipients)
    const roll = Math.random()
    if (token && roll < 0.45) {
      const amount = BigInt(1 + Math.floor(Math.random() * 1_000_000))
      return { to: token, data: encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [to, amount] }), gas: CALL_GAS }
    }
    if (token && roll < 0.65) {
      const topicCount = Math.floor(Math.random() * 5)
      const topic = () => bytesToHex(randomBytes(32))
      const value = BigInt(Math.floor(Math.random() * 1_000_000))
      const data = encodeFunctionData({ abi: tokenAbi, functionName: 'emitLogs', args: [topicCount, topic(), topic(), topic(), value] })
      return { to: token, data, gas: CALL_GAS }
    }
    if (token && roll < 0.7) {
      const n = BigInt(2 + Math.floor(Math.random() * (MAX_MULTI_LOGS - 1)))
      return { to: token, data: encodeFunctionData({ abi: tokenAbi, functionName: 'multi', args: [to, n] }), gas: CALL_GAS }
    }
    const value = BigInt(Math.floor(Math.random() * Number(MAX_VALUE_WEI)))
    // Now and then a brand-new address, so that new accounts keep appearing.
    const recipient = Math.random() < 0.2 ? randomAddress() : to
    return { to: recipient, value, gas: VALUE_GAS }
  }

  /** The agent's builder code on most of its transactions, now and then with a wallet's code stacked after. */
  function planSuffix(sender: Address): Hex | undefined {
    const code = agentCodes.get(sender)
    if (code === undefined || Math.random() >= ATTRIBUTED_SHARE) return undefined
    const suffix = attributionSuffix([code])
    return Math.random() < STACKED_SHARE ? concat([suffix, Attribution.toDataSuffix({ walletCode: DEMO_WALLET_CODE })]) : suffix
  }

  function tick() {
    const idle = senders.filter((sender) => !busySenders.has(sender))
    if (idle.length === 0) return
    const sender = pick(idle)
    const tx = planTx()
    busySenders.add(sender)
    const send = walletClient
      .sendTransaction({ account: sender, chain: null, ...tx, dataSuffix: planSuffix(sender) })
      .then(
        () => undefined,
        (error: unknown) => logError(error, 'traffic: send failed'),
      )
      .finally(() => {
        busySenders.delete(sender)
        inFlight.delete(send)
      })
    inFlight.add(send)
  }

  async function start() {
    if (timer || stopped) return
    try {
      const accounts = (await walletClient.getAddresses()).map((account) => getAddress(account))
      senders = accounts.slice(0, SENDER_COUNT)
      recipients = [...accounts, ...Array.from({ length: FRESH_RECIPIENTS }, randomAddress)]
    } catch (error) {
      logger.warn({ err: errorReason(error) }, 'traffic: cannot list dev accounts; no traffic')
      return
    }
    if (senders.length === 0) {
      logger.warn({}, 'traffic: the node has no unlocked accounts; no traffic')
      return
    }
    try {
      token = await deployToken(createWalletClient({ transport, account: senders[0]! }), publicClient)
      logger.info({ token }, 'traffic: demo token deployed')
    } catch (error) {
      // Value transfers still make blocks; token traffic needs the contract.
      logError(error, 'traffic: token deployment failed; sending ETH transfers only')
    }
    if (gatewayUrl !== undefined) {
      try {
        for (const sender of senders) agentCodes.set(sender, await registerAgent(gatewayUrl, sender))
        logger.info({ agents: Object.fromEntries(agentCodes) }, 'traffic: agents registered')
      } catch (error) {
        logError(error, 'traffic: agent registration failed; sending without builder codes')
      }
    }
    if (stopped) return
    // The registry, the EntryPoint and the smart accounts take a few blocks: set up behind the EOA traffic.
    setUp = setUpOperator().catch((error: unknown) => logError(error, 'traffic: smart-account agents and registry not set up'))
    timer = setInterval(() => {
      try {
        tick()
      } catch (error) {
        logError(error, 'traffic: tick failed')
      }
    }, 1_000 / ratePerSecond)
    // Demo traffic must never be what keeps the process alive.
    timer.unref()
    logger.info({ ratePerSecond, senders: senders.length }, 'traffic: started')
  }

  async function stop() {
    stopped = true
    if (timer) clearInterval(timer)
    if (bundleTimer) clearInterval(bundleTimer)
    timer = undefined
    bundleTimer = undefined
    await setUp
    await Promise.allSettled([...inFlight])
  }

  const mined = (hash: Hex) => publicClient.waitForTransactionReceipt({ hash, timeout: 60_000 })

  /**
   * The operator's part (a dev account of its own, so that its nonces never race the senders'): deploys the
   * builder-codes registry as its first contract (where `flashgate dev` looks for it), the EntryPoint and
   * the smart-account agents, registers some agents' codes on chain, then bundles the agents' user operations.
   */
  async function setUpOperator() {
    const operator = (await walletClient.getAddresses()).map((account) => getAddress(account)).find((account) => account === DEVNET_OPERATOR)
    if (operator === undefined) {
      logger.warn({ operator: DEVNET_OPERATOR }, 'traffic: the node does not hold the operator account; no registry or smart accounts')
      return
    }
    let registry: Address | null = null
    const deployed = await publicClient.getCode({ address: DEVNET_REGISTRY_ADDRESS, blockTag: 'pending' })
    if (deployed !== undefined && deployed !== '0x') registry = DEVNET_REGISTRY_ADDRESS
    else if ((await publicClient.getTransactionCount({ address: operator, blockTag: 'pending' })) === 0) {
      await mined(
        await walletClient.deployContract({ account: operator, chain: null, abi: registryAbi, bytecode: REGISTRY_DEPLOY_BYTECODE, gas: REGISTRY_GAS * 2n }),
      )
      registry = DEVNET_REGISTRY_ADDRESS
      logger.info({ registry }, 'traffic: builder-codes registry deployed')
    } else logger.warn({}, 'traffic: the operator has sent before; the registry is not where flashgate dev looks, so none is deployed')
    if (stopped) return
    smartAccounts = await deploySmartAccounts({
      publicClient,
      walletClient,
      operator,
      setCode: (address, bytecode) => testClient.setCode({ address, bytecode }),
      count: SMART_AGENTS,
      mined,
    })
    if (gatewayUrl !== undefined) for (const account of smartAccounts) agentCodes.set(account.address, await registerAgent(gatewayUrl, account.address))
    logger.info({ accounts: smartAccounts.map((account) => account.address), entryPoint: entryPoint07Address }, 'traffic: smart-account agents deployed')
    if (registry !== null) {
      // Some EOA agents and every smart-account agent register on chain; the rest earn nothing yet.
      const onChain = [...senders.slice(0, ON_CHAIN_EOA_AGENTS), ...smartAccounts.map((account) => account.address)]
      const sent: Hex[] = []
      for (const agent of onChain) {
        const code = agentCodes.get(agent)
        if (code === undefined) continue
        const data = encodeFunctionData({ abi: registryAbi, functionName: 'register', args: [code, agent, agent] })
        sent.push(await walletClient.sendTransaction({ account: operator, chain: null, to: registry, data, gas: REGISTRY_GAS }))
      }
      for (const hash of sent) await mined(hash)
      logger.info({ codes: sent.length }, 'traffic: agents registered on chain')
    }
    if (stopped) return
    const chainId = await publicClient.getChainId()
    bundleTimer = setInterval(() => {
      if (bundling || stopped) return
      bundling = true
      const bundle = sendBundle(operator, chainId)
        .catch((error: unknown) => logError(error, 'traffic: bundle failed'))
        .finally(() => {
          bundling = false
          inFlight.delete(bundle)
        })
      inFlight.add(bundle)
    }, BUNDLE_INTERVAL_MS)
    bundleTimer.unref()
  }

  /** One `handleOps` of 1 to 3 user operations of the smart-account agents, most of them with a suffix. */
  async function sendBundle(operator: Address, chainId: number) {
    const count = 1 + Math.floor(Math.random() * MAX_OPERATIONS_PER_BUNDLE)
    const nonces = new Map<Address, bigint>()
    const operations = []
    for (let index = 0; index < count; index++) {
      const account = pick(smartAccounts)
      const nonce = nonces.get(account.address) ?? (await entryPointNonce(publicClient, account.address))
      nonces.set(account.address, nonce + 1n)
      const call = executeCall(pick(recipients), BigInt(Math.floor(Math.random() * Number(MAX_VALUE_WEI))), '0x')
      const suffix = planSuffix(account.address)
      operations.push(await signedUserOperation(account, chainId, nonce, suffix === undefined ? call : concat([call, suffix])))
    }
    const data = encodeFunctionData({ abi: entryPoint07Abi, functionName: 'handleOps', args: [operations, operator] })
    await walletClient.sendTransaction({ account: operator, chain: null, to: entryPoint07Address, data, gas: BUNDLE_GAS })
  }

  return { start, stop }
}

function pick<T>(items: readonly T[]): T {
  return items[Math.floor(Math.random() * items.length)]!
}

function randomAddress(): Address {
  return getAddress(bytesToHex(randomBytes(20)))
}

/** viem errors carry a one-line `shortMessage`; the full message repeats the request body. */
function errorReason(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  return (error as { shortMessage?: string }).shortMessage ?? error.message
}
