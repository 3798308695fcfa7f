import { pointFromScalar, signRecoverable } from 'tiny-secp256k1'
import {
  type Address,
  type Hash,
  type Hex,
  type TransactionSerializableEIP1559,
  bytesToHex,
  concat,
  getAddress,
  getContractAddress,
  hexToBytes,
  keccak256,
  numberToHex,
  parseEther,
  parseGwei,
  serializeTransaction,
  slice,
} from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { DEV_MNEMONIC, type DevnetLogger } from './anvil.js'
import type { JsonRpcRequest, JsonRpcResponse } from './anvil-client.js'
import { type BaseContracts, type BaseMix, createBaseMix, createRandom } from './base-mix.js'
import { TOKEN_DEPLOY_BYTECODE } from './contracts.js'
import { PRECONFIRMED_BLOCK_HASH } from './node-view.js'
import { POOL_DEPLOY_BYTECODE } from './pool.js'

// Load profiles drive the devnet with a chain-shaped stream of transactions (`--profile`). `base` deploys
// a few hot contracts, funds a long tail of senders from the dev accounts, then sends about
// BASE_TRANSACTIONS_PER_BLOCK transactions a block (mix in base-mix.ts), a share after every flashblock,
// so that each of a block's flashblocks carries some. Transactions are signed here, nonces tracked here,
// and handed to the sequencer as raw sends, as a node's clients would send them.

/** Base mainnet carries a few hundred transactions a block; 250 with ~1,500 logs is a busy devnet block. */
export const BASE_TRANSACTIONS_PER_BLOCK = 250
export const DEFAULT_PROFILE_SEED = 8021
const TOKEN_COUNT = 3
const POOL_COUNT = 2
/** Senders derived from the seed and funded at start; the dev accounts only fund and deploy. */
const PROFILE_SENDERS = 400
const SENDER_FUNDING_WEI = parseEther('100')
/** Dev accounts of the test mnemonic that anvil funds (10,000 ETH each). */
const FUNDED_DEV_ACCOUNTS = 10
// Fees as on Base: a base fee far below this cap and a tiny tip.
const MAX_FEE_PER_GAS = parseGwei('10')
const MAX_PRIORITY_FEE_PER_GAS = parseGwei('0.001')
const FUNDING_GAS = 21_000n
const DEPLOY_GAS = 1_000_000n
/** Each flashblock's share varies by up to this fraction either way. */
const SHARE_JITTER = 0.2
/** Funding and deployments must be sealed within this long, or start() fails. */
const SETUP_TIMEOUT_MS = 30_000
const SETUP_POLL_MS = 100
/** A send that fails is logged at most once per this interval (with a count of the others). */
const ERROR_LOG_INTERVAL_MS = 5_000

type Forward = (request: JsonRpcRequest) => Promise<JsonRpcResponse>

export type LoadProfileOptions = {
  /** The node's JSON-RPC, in process (the sequencer's `forward`). */
  forward: Forward
  /** Flashblocks per block: the share sent after each tick is a block's worth divided by this. */
  ticksPerBlock: number
  transactionsPerBlock?: number
  seed?: number
  logger?: DevnetLogger
}

export type LoadProfileStats = {
  /** Transactions the node accepted, and the logs they will leave. */
  sent: number
  plannedLogs: number
  /** Of those, with an ERC-8021 suffix. */
  attributed: number
  /** Sends the node refused or could not answer; their sender is retired (its nonces may have a gap). */
  failed: number
  retiredSenders: number
}

export type LoadProfile = {
  /** Deploys the contracts and funds the senders, waits until they are sealed, then sends on every tick. */
  start: () => Promise<void>
  /** The sequencer's tick hook: sends the next share (never waits; sends queue behind the tick). */
  onTick: () => void
  /** Stops sending and waits for the sends in flight. */
  stop: () => Promise<void>
  /** The hot contracts: tokens and pools (once start() has begun; their addresses follow from the deployer's nonces). */
  contracts: () => BaseContracts
  /** Every sender of the long tail. */
  senders: Address[]
  stats: () => LoadProfileStats
}

type Sender = { address: Address; key: Uint8Array; nonce: number; retired: boolean }

/** The `base` profile: Base-shaped blocks on the devnet (see the module comment). */
export function createBaseProfile(options: LoadProfileOptions): LoadProfile {
  const { forward, logger, ticksPerBlock, transactionsPerBlock = BASE_TRANSACTIONS_PER_BLOCK, seed = DEFAULT_PROFILE_SEED } = options
  const random = createRandom(seed ^ 0x5eed)
  const senders = Array.from({ length: PROFILE_SENDERS }, (_, index) => senderFromKey(derivedKey(seed, index)))
  const devAccounts = Array.from({ length: FUNDED_DEV_ACCOUNTS }, (_, addressIndex) => {
    const account = mnemonicToAccount(DEV_MNEMONIC, { addressIndex })
    return senderFromKey(account.getHdKey().privateKey!)
  })
  const stats: LoadProfileStats = { sent: 0, plannedLogs: 0, attributed: 0, failed: 0, retiredSenders: 0 }
  const inFlight = new Set<Promise<void>>()
  let chainId = 0
  let contracts: BaseContracts | undefined
  let mix: BaseMix | undefined
  let running = false
  let stopped = false
  /** Transactions due but not yet sent (a share that came while the previous one was still being sent). */
  let owed = 0
  let lastErrorLogAt = 0
  let unloggedErrors = 0

  let nextId = 0
  async function call<T>(method: string, params: unknown[]): Promise<T> {
    const response = await forward({ jsonrpc: '2.0', id: ++nextId, method, params })
    if (response.error) throw new Error(`${method}: ${response.error.message}`)
    return response.result as T
  }

  function sign(sender: Sender, tx: Omit<TransactionSerializableEIP1559, 'type' | 'chainId' | 'nonce' | 'maxFeePerGas' | 'maxPriorityFeePerGas'>): Hex {
    const unsigned: TransactionSerializableEIP1559 = {
      ...tx,
      type: 'eip1559',
      chainId,
      nonce: sender.nonce++,
      maxFeePerGas: MAX_FEE_PER_GAS,
      maxPriorityFeePerGas: MAX_PRIORITY_FEE_PER_GAS,
    }
    // libsecp256k1 signs in a fifth of the time of viem's pure-JS curve: 125 signatures a second matter here.
    const { signature, recoveryId } = signRecoverable(hexToBytes(keccak256(serializeTransaction(unsigned))), sender.key)
    return serializeTransaction(unsigned, { r: bytesToHex(signature.subarray(0, 32)), s: bytesToHex(signature.subarray(32)), yParity: recoveryId })
  }

  async function sendRaw(raws: Hex[]): Promise<JsonRpcResponse[]> {
    // In order: the sequencer's lock serves sends first come, first served, so each sender's nonces arrive in order.
    return Promise.all(
      raws.map((raw) =>
        forward({ jsonrpc: '2.0', id: ++nextId, method: 'eth_sendRawTransaction', params: [raw] }).catch(
          (error: unknown): JsonRpcResponse => ({
            jsonrpc: '2.0',
            id: null,
            error: { code: -32603, message: error instanceof Error ? error.message : String(error) },
          }),
        ),
      ),
    )
  }

  function logFailure(message: string, detail: object) {
    const now = Date.now()
    if (now - lastErrorLogAt < ERROR_LOG_INTERVAL_MS) return void unloggedErrors++
    logger?.warn({ ...detail, suppressed: unloggedErrors }, message)
    lastErrorLogAt = now
    unloggedErrors = 0
  }

  /** Deploys the tokens and pools from dev account 0 and funds the senders from all ten, in one go. */
  async function setUp(): Promise<void> {
    chainId = Number(await call<Hex>('eth_chainId', []))
    const accounts = [...devAccounts, ...senders]
    const nonces = await Promise.all(accounts.map((account) => call<Hex>('eth_getTransactionCount', [account.address, 'pending'])))
    accounts.forEach((account, index) => {
      account.nonce = Number(nonces[index])
    })
    const deployer = devAccounts[0]!
    const deployments = [...Array(TOKEN_COUNT).fill(TOKEN_DEPLOY_BYTECODE), ...Array(POOL_COUNT).fill(POOL_DEPLOY_BYTECODE)] as Hex[]
    const addresses = deployments.map((_, index) => getContractAddress({ from: deployer.address, nonce: BigInt(deployer.nonce + index) }))
    contracts = { tokens: addresses.slice(0, TOKEN_COUNT), pools: addresses.slice(TOKEN_COUNT) }
    mix = createBaseMix({ seed, contracts, senderCount: senders.length })
    const setup = deployments.map((bytecode) => ({ from: deployer, raw: sign(deployer, { data: bytecode, gas: DEPLOY_GAS }) }))
    senders.forEach((sender, index) => {
      const funder = devAccounts[index % devAccounts.length]!
      setup.push({ from: funder, raw: sign(funder, { to: sender.address, value: SENDER_FUNDING_WEI, gas: FUNDING_GAS }) })
    })
    const responses = await sendRaw(setup.map(({ raw }) => raw))
    const refused = responses.find((response) => response.error)
    if (refused?.error) throw new Error(`profile base: a set-up transaction was refused: ${refused.error.message}`)
    // Nonces are in order: once each account's last transaction is sealed, all of them are. Sealed, not only
    // pre-confirmed: the sequencer re-sends a slot's transactions on the parent state at every tick, where a
    // sender funded in the same slot cannot pay yet, and anvil would drop its transaction.
    const lastHashes = new Map(setup.map(({ from, raw }) => [from.address, keccak256(raw)]))
    await waitForReceipts([...lastHashes.values()])
    const codes = await Promise.all(addresses.map((address) => call<Hex>('eth_getCode', [address, 'pending'])))
    if (codes.some((code) => code === '0x')) throw new Error('profile base: a contract deployment failed')
    logger?.info({ tokens: contracts.tokens, pools: contracts.pools, senders: senders.length }, 'profile base: contracts deployed, senders funded')
  }

  async function waitForReceipts(hashes: Hash[]): Promise<void> {
    const deadline = Date.now() + SETUP_TIMEOUT_MS
    let pending = hashes
    while (pending.length > 0 && !stopped) {
      if (Date.now() > deadline) throw new Error(`profile base: set-up transactions not included within ${SETUP_TIMEOUT_MS} ms`)
      await new Promise((resolve) => setTimeout(resolve, SETUP_POLL_MS))
      const receipts = await Promise.all(pending.map((hash) => call<{ blockHash: Hash } | null>('eth_getTransactionReceipt', [hash])))
      pending = pending.filter((_, index) => receipts[index] === null || receipts[index]!.blockHash === PRECONFIRMED_BLOCK_HASH)
    }
  }

  function pickSender(): Sender | undefined {
    for (let attempt = 0; attempt < senders.length; attempt++) {
      const sender = senders[mix!.pickSender()]!
      if (!sender.retired) return sender
    }
    return undefined
  }

  async function sendShare(count: number): Promise<void> {
    const batch: { sender: Sender; raw: Hex; logs: number; attributed: boolean }[] = []
    for (let index = 0; index < count; index++) {
      const sender = pickSender()
      if (sender === undefined) break
      const { to, data, value, gas, logs, codes } = mix!.plan(sender.address)
      batch.push({ sender, raw: sign(sender, { to, data, value, gas }), logs, attributed: codes.length > 0 })
    }
    const responses = await sendRaw(batch.map(({ raw }) => raw))
    responses.forEach((response, index) => {
      const { sender, logs, attributed } = batch[index]!
      if (response.error === undefined) {
        stats.sent++
        stats.plannedLogs += logs
        if (attributed) stats.attributed++
        return
      }
      stats.failed++
      if (!sender.retired) {
        // Its later transactions may wait behind the refused nonce forever: this sender sends no more.
        sender.retired = true
        stats.retiredSenders++
      }
      logFailure('profile base: a send was refused; its sender is retired', { sender: sender.address, error: response.error.message })
    })
  }

  function onTick(): void {
    if (!running) return
    const share = transactionsPerBlock / ticksPerBlock
    owed += Math.max(0, Math.round(share * (1 - SHARE_JITTER + 2 * SHARE_JITTER * random.next())))
    if (inFlight.size > 0) return
    const count = owed
    owed = 0
    const sending = sendShare(count)
      .catch((error: unknown) => logFailure('profile base: sending failed', { err: error instanceof Error ? error.message : String(error) }))
      .finally(() => inFlight.delete(sending))
    inFlight.add(sending)
  }

  return {
    async start() {
      if (running || stopped) return
      await setUp()
      if (!stopped) running = true
      logger?.info({ transactionsPerBlock, ticksPerBlock }, 'profile base: sending')
    },
    onTick,
    async stop() {
      stopped = true
      running = false
      await Promise.allSettled([...inFlight])
    },
    contracts() {
      if (contracts === undefined) throw new Error('profile base: not started')
      return contracts
    },
    senders: senders.map((sender) => sender.address),
    stats: () => ({ ...stats }),
  }
}

/** The `index`-th sender's private key for a seed: the same accounts on every run with that seed. */
function derivedKey(seed: number, index: number): Uint8Array {
  return hexToBytes(keccak256(concat([numberToHex(seed, { size: 8 }), numberToHex(index, { size: 8 }), '0x73656e646572'])))
}

function senderFromKey(key: Uint8Array): Sender {
  const publicKey = pointFromScalar(key, false)
  if (publicKey === null) throw new Error('profile base: invalid private key')
  return { address: getAddress(slice(keccak256(publicKey.subarray(1)), 12)), key, nonce: 0, retired: false }
}
