// Real clients (viem, ethers 6, foundry's cast) sending back-to-back through flashgate with their own nonce
// handling: each asks flashgate's `eth_getTransactionCount(a, "pending")` before every send, which must count
// the transactions flashgate forwarded until a flashblock shows them (issue 12). And `eth_sendRawTransactionSync`
// (EIP-7966) answers with the receipt at pre-confirmation. web3.js is not installed, so it is not covered.
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { JsonRpcProvider, Wallet } from 'ethers'
import { type Address, createPublicClient, createWalletClient, type Hash, type Hex, http, keccak256, parseGwei, type TransactionReceipt, toHex } from 'viem'
import { type HDAccount, mnemonicToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { DEV_MNEMONIC } from '../src/devnet/anvil.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS, DEVNET_CHAIN } from './fixtures/flashblocks.js'
import { resolveCastBinary } from './fixtures/cast.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'

const CHAIN_ID = 31337
/** Base's timing halved (Base: 200 ms flashblocks, 2 s blocks), as in devnet-pending.test.ts. */
const BLOCK_TIME_MS = 1_000
const FLASHBLOCK_INTERVAL_MS = 100
const TRANSFERS = 50
const RECIPIENT: Address = `0x${'5e'.repeat(20)}`
const ZERO_HASH: Hash = `0x${'00'.repeat(32)}`
/** Long enough for the last of a burst to be sealed and indexed: a few blocks. */
const SEALED_WAIT_MS = 15_000
const RECEIPT_POLL_MS = 50
const CAST_TIMEOUT_MS = 15_000
/** Sync sends tried before concluding that none came back at pre-confirmation. */
const SYNC_ATTEMPTS = 5
/** Fields anvil adds to sealed receipts that no flashblock carries (devnet-pending.test.ts). */
const ANVIL_ONLY_RECEIPT_FIELDS = ['blockTimestamp', 'blobGasPrice'] as const

/** One dev account per client, so that their nonces never meet. */
const ACCOUNTS = { viem: DEV_ACCOUNTS[1]!, ethers: DEV_ACCOUNTS[2]!, cast: DEV_ACCOUNTS[3]!, sync: DEV_ACCOUNTS[4]!, rawSync: DEV_ACCOUNTS[0]! }

const castBinary = resolveCastBinary()

let devnet: Devnet
let database: TestDatabase
let gateway: TestGateway

async function result<value>(method: string, params: unknown[] = []): Promise<value> {
  const answer = await rpc(gateway.url, method, params)
  if (answer.error) throw new Error(`${method} ${JSON.stringify(params)}: ${answer.error.code} ${answer.error.message}`)
  return answer.result as value
}

async function nonceOf(address: Address, block: 'latest' | 'pending'): Promise<number> {
  return Number(await result<Hex>('eth_getTransactionCount', [address, block]))
}

/** Polls flashgate until the transaction's receipt is from an indexed block (not the zero pre-confirmed hash). */
async function waitForSealedReceipt(hash: Hash): Promise<Record<string, unknown>> {
  const deadline = Date.now() + SEALED_WAIT_MS
  for (;;) {
    const receipt = await result<Record<string, unknown> | null>('eth_getTransactionReceipt', [hash])
    if (receipt !== null && receipt.blockHash !== ZERO_HASH) return receipt
    if (Date.now() > deadline) throw new Error(`no sealed receipt for ${hash} within ${SEALED_WAIT_MS} ms (last answer: ${JSON.stringify(receipt)})`)
    await sleep(RECEIPT_POLL_MS)
  }
}

/**
 * The nonces of the transactions, in order, as flashgate reports them. Only for transactions a flashblock
 * has shown: flashgate does not serve a forwarded transaction by hash before that.
 */
async function noncesOf(hashes: Hash[]): Promise<number[]> {
  const transactions = await Promise.all(hashes.map((hash) => result<{ nonce: Hex }>('eth_getTransactionByHash', [hash])))
  return transactions.map((transaction) => Number(transaction.nonce))
}

function consecutive(first: number, count: number): number[] {
  return Array.from({ length: count }, (_, offset) => first + offset)
}

function privateKeyOf(account: HDAccount): Hex {
  return toHex(account.getHdKey().privateKey!)
}

/**
 * Reads `pending` and then `latest` until the pending block is above the sealed head, which it is while a
 * flashblock is open (between a block's sealing and the next block's first flashblock it may not be).
 */
async function pendingAboveLatest<block>(readPending: () => Promise<block>, numberOf: (block: block) => number, readLatest: () => Promise<number>) {
  const deadline = Date.now() + 4 * BLOCK_TIME_MS
  for (;;) {
    const pending = await readPending()
    const latest = await readLatest()
    if (numberOf(pending) > latest || Date.now() > deadline) return { pending, latest }
    await sleep(FLASHBLOCK_INTERVAL_MS / 2)
  }
}

/**
 * The block below a pending one, once indexed. The pending block is the newest flashblocks' (the sequencer's
 * head + 1), and the index may not have ingested the block the sequencer has just sealed: on a loaded machine
 * `pending` can be two above `latest` for a moment, and its parent then reads as null, as any block above
 * the head does.
 */
async function indexedParent<block>(read: () => Promise<block | null>): Promise<block> {
  const deadline = Date.now() + 4 * BLOCK_TIME_MS
  for (;;) {
    const parent = await read()
    if (parent !== null || Date.now() > deadline) return parent!
    await sleep(FLASHBLOCK_INTERVAL_MS / 2)
  }
}

/** A signed value transfer from the raw sync-send account (nonce given, fees fixed). */
function signedTransfer(nonce: number): Promise<Hex> {
  return ACCOUNTS.rawSync.signTransaction({
    type: 'eip1559',
    chainId: CHAIN_ID,
    nonce,
    to: RECIPIENT,
    value: 1n,
    gas: 21_000n,
    maxFeePerGas: parseGwei('20'),
    maxPriorityFeePerGas: parseGwei('1'),
  })
}

beforeAll(async () => {
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: BLOCK_TIME_MS, flashblockIntervalMs: FLASHBLOCK_INTERVAL_MS })
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
  // The clients start once flashgate has indexed the devnet's head.
  const head = Number(await rpc(devnet.rpcUrl, 'eth_blockNumber').then((answer) => answer.result as Hex))
  await gateway.ingester.waitForBlock(head, 10_000)
})

afterAll(async () => {
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
})

describe('real clients through flashgate', () => {
  test(`viem: ${TRANSFERS} back-to-back sendTransaction with viem's own nonces, all included, none reused or skipped`, async () => {
    const account = ACCOUNTS.viem
    const wallet = createWalletClient({ account, chain: DEVNET_CHAIN, transport: http(gateway.url) })
    const reader = createPublicClient({ chain: DEVNET_CHAIN, transport: http(gateway.url), pollingInterval: RECEIPT_POLL_MS })
    const nonceBefore = await reader.getTransactionCount({ address: account.address, blockTag: 'latest' })

    const hashes: Hash[] = []
    for (let sent = 0; sent < TRANSFERS; sent++) hashes.push(await wallet.sendTransaction({ to: RECIPIENT, value: 1n }))

    expect(new Set(hashes).size).toBe(TRANSFERS)
    const receipts = await Promise.all(
      hashes.map((hash) => reader.waitForTransactionReceipt({ hash, pollingInterval: RECEIPT_POLL_MS, timeout: SEALED_WAIT_MS })),
    )
    expect(receipts.map((receipt) => receipt.status)).toEqual(hashes.map(() => 'success'))
    expect(await noncesOf(hashes)).toEqual(consecutive(nonceBefore, TRANSFERS))
    await waitForSealedReceipt(hashes.at(-1)!)
    expect(await reader.getTransactionCount({ address: account.address, blockTag: 'latest' })).toBe(nonceBefore + TRANSFERS)
  })

  test(`ethers 6: ${TRANSFERS} back-to-back wallet.sendTransaction, all receipts; getBlock('pending') parses a block above latest`, async () => {
    // ethers answers an identical request made within `cacheTimeout` (250 ms by default) from its own cache, so
    // back-to-back sends would reuse the nonce (and fees) of the previous one without asking flashgate at all.
    const provider = new JsonRpcProvider(gateway.url, CHAIN_ID, { staticNetwork: true, pollingInterval: RECEIPT_POLL_MS, cacheTimeout: -1 })
    try {
      const wallet = new Wallet(privateKeyOf(ACCOUNTS.ethers), provider)
      const nonceBefore = await provider.getTransactionCount(wallet.address, 'latest')

      const responses = []
      for (let sent = 0; sent < TRANSFERS; sent++) responses.push(await wallet.sendTransaction({ to: RECIPIENT, value: 1n }))

      const hashes = responses.map((response) => response.hash as Hash)
      expect(new Set(hashes).size).toBe(TRANSFERS)
      expect(responses.map((response) => response.nonce)).toEqual(consecutive(nonceBefore, TRANSFERS))
      const receipts = await Promise.all(responses.map((response) => response.wait(1, SEALED_WAIT_MS)))
      expect(receipts.map((receipt) => receipt?.status)).toEqual(hashes.map(() => 1))
      // A receipt may be the pre-confirmed one (as on Base): the last transactions seal a block later.
      await expect.poll(() => provider.getTransactionCount(wallet.address, 'latest'), { timeout: SEALED_WAIT_MS }).toBe(nonceBefore + TRANSFERS)

      const { pending, latest } = await pendingAboveLatest(
        async () => (await provider.getBlock('pending'))!,
        (block) => block.number,
        () => provider.getBlockNumber(),
      )
      expect(pending.number).toBeGreaterThan(latest)
      const parent = await indexedParent(() => provider.getBlock(pending.number - 1))
      expect(pending.parentHash).toBe(parent?.hash)
      expect(pending.hash).toMatch(/^0x[0-9a-f]{64}$/)
      expect(pending.timestamp).toBeGreaterThanOrEqual(parent!.timestamp)
      expect(pending.gasLimit).toBeGreaterThan(0n)
      expect(pending.gasUsed).toBeGreaterThanOrEqual(0n)
    } finally {
      provider.destroy()
    }
  })

  test(`cast: ${TRANSFERS} back-to-back \`cast send --async\` at \`cast nonce -B pending\`, all included; \`send --sync\`, \`block pending\` work`, async (context) => {
    if (castBinary === undefined) {
      context.skip(`foundry's cast binary is not installed (npm @foundry-rs/cast, for ${process.platform}-${process.arch})`)
      return
    }
    // A clean environment: no foundry.toml, no ETH_RPC_URL or keys from the caller; only loopback URLs are given.
    const home = await mkdtemp(join(tmpdir(), 'flashgate-cast-'))
    const env = { PATH: process.env.PATH ?? '', HOME: home, NO_COLOR: '1', FOUNDRY_DISABLE_NIGHTLY_WARNING: '1' }
    const cast = async (args: string[]) => (await promisify(execFile)(castBinary, args, { env, cwd: home, timeout: CAST_TIMEOUT_MS })).stdout.trim()
    try {
      const account = ACCOUNTS.cast
      const nonceBefore = await nonceOf(account.address, 'latest')
      const hashes: Hash[] = []
      // `cast send` (foundry 1.7.1) takes its nonce from `latest`, which no node moves before inclusion, so each
      // send is given the pending count that cast itself reads from flashgate just before.
      const pendingNonce = () => cast(['nonce', '--rpc-url', gateway.url, '--block', 'pending', account.address])
      for (let sent = 0; sent < TRANSFERS; sent++) {
        const nonce = await pendingNonce()
        const output = await cast([
          'send',
          '--rpc-url',
          gateway.url,
          '--private-key',
          privateKeyOf(account),
          '--nonce',
          nonce,
          '--async',
          RECIPIENT,
          '--value',
          '1',
        ])
        expect(output).toMatch(/^0x[0-9a-f]{64}$/)
        hashes.push(output as Hash)
      }

      expect(new Set(hashes).size).toBe(TRANSFERS)
      const receipts = await Promise.all(hashes.map(waitForSealedReceipt))
      expect(receipts.map((receipt) => receipt.status)).toEqual(hashes.map(() => '0x1'))
      expect(await noncesOf(hashes)).toEqual(consecutive(nonceBefore, TRANSFERS))
      const castReceipt = JSON.parse(await cast(['receipt', '--rpc-url', gateway.url, '--json', hashes.at(-1)!])) as Record<string, unknown>
      expect(castReceipt).toMatchObject({ transactionHash: hashes.at(-1), status: '0x1', blockHash: receipts.at(-1)!.blockHash })
      expect(await nonceOf(account.address, 'latest')).toBe(nonceBefore + TRANSFERS)

      const { pending, latest } = await pendingAboveLatest(
        async () => JSON.parse(await cast(['block', 'pending', '--rpc-url', gateway.url, '--json'])) as Record<string, string>,
        (block) => Number(block.number),
        async () => Number(await result<Hex>('eth_blockNumber')),
      )
      expect(Number(pending.number)).toBeGreaterThan(latest)
      const parent = await indexedParent(() => result<{ hash: Hash } | null>('eth_getBlockByNumber', [toHex(Number(pending.number) - 1), false]))
      expect(pending.parentHash).toBe(parent?.hash)

      // EIP-7966 through cast: the receipt of a pre-confirmed (or, at sealing, a sealed) transaction.
      const nonce = await pendingNonce()
      const syncReceipt = JSON.parse(
        await cast(['send', '--rpc-url', gateway.url, '--private-key', privateKeyOf(account), '--nonce', nonce, '--sync', '--json', RECIPIENT, '--value', '1']),
      ) as Record<string, unknown>
      expect(syncReceipt).toMatchObject({ status: '0x1', from: account.address.toLowerCase() })
      expect(await noncesOf([syncReceipt.transactionHash as Hash])).toEqual([Number(nonce)])
    } finally {
      await rm(home, { recursive: true, force: true })
    }
  })

  test('viem sendTransactionSync: the receipt comes back at pre-confirmation and equals the sealed one but for the block hash', async () => {
    const account = ACCOUNTS.sync
    const wallet = createWalletClient({ account, chain: DEVNET_CHAIN, transport: http(gateway.url) })
    const reader = createPublicClient({ chain: DEVNET_CHAIN, transport: http(gateway.url) })

    let preconfirmed: TransactionReceipt | undefined
    for (let attempt = 0; attempt < SYNC_ATTEMPTS && preconfirmed === undefined; attempt++) {
      const receipt = await wallet.sendTransactionSync({ to: RECIPIENT, value: 1n })
      expect(receipt.status).toBe('success')
      expect(receipt.from).toBe(account.address.toLowerCase())
      // The zero block hash: answered at pre-confirmation, before the block was sealed. A send landing exactly
      // at sealing may get the indexed receipt instead, so only one of a few must be pre-confirmed.
      if (receipt.blockHash === ZERO_HASH) preconfirmed = receipt
    }
    expect(preconfirmed, `none of ${SYNC_ATTEMPTS} sync sends came back before its block was sealed`).toBeDefined()

    await waitForSealedReceipt(preconfirmed!.transactionHash)
    const sealed = await reader.getTransactionReceipt({ hash: preconfirmed!.transactionHash })
    expect(sealed.blockHash).not.toBe(ZERO_HASH)
    expect(sealed.blockNumber).toBe(preconfirmed!.blockNumber)
    const withoutBlockHash = (receipt: TransactionReceipt) => {
      const copy: Record<string, unknown> = { ...receipt, logs: receipt.logs.map(({ blockHash: _blockHash, ...log }) => log) }
      delete copy.blockHash
      for (const field of ANVIL_ONLY_RECEIPT_FIELDS) delete copy[field]
      return copy
    }
    expect(withoutBlockHash(preconfirmed!)).toEqual(withoutBlockHash(sealed))
  })

  test('eth_sendRawTransactionSync takes a hex or a number timeout, and answers code 4 with the hash when it runs out', async () => {
    const account = ACCOUNTS.rawSync
    const nonce = await nonceOf(account.address, 'pending')

    const withHexTimeout = await signedTransfer(nonce)
    const hexAnswer = await rpc(gateway.url, 'eth_sendRawTransactionSync', [withHexTimeout, toHex(5_000)])
    expect(hexAnswer.error).toBeUndefined()
    expect(hexAnswer.result).toMatchObject({ transactionHash: keccak256(withHexTimeout), status: '0x1', from: account.address.toLowerCase() })

    const withNumberTimeout = await signedTransfer(nonce + 1)
    const numberAnswer = await rpc(gateway.url, 'eth_sendRawTransactionSync', [withNumberTimeout, 5_000])
    expect(numberAnswer.error).toBeUndefined()
    expect(numberAnswer.result).toMatchObject({ transactionHash: keccak256(withNumberTimeout), status: '0x1' })

    // A nonce far ahead cannot be included; the node takes it into its queue and the wait runs out.
    const farAhead = await signedTransfer(nonce + 1_000)
    const timedOut = (await rpc(gateway.url, 'eth_sendRawTransactionSync', [farAhead, 1])) as { error?: { code: number; message: string; data?: unknown } }
    expect(timedOut.error).toMatchObject({ code: 4, data: keccak256(farAhead) })
    // Forwarded but not next in line: the pending nonce does not count it.
    expect(await nonceOf(account.address, 'pending')).toBe(nonce + 2)
    // As a node finds it in its pool: no block yet, the fee cap as gasPrice.
    expect(await result('eth_getTransactionByHash', [keccak256(farAhead)])).toMatchObject({
      hash: keccak256(farAhead),
      nonce: toHex(nonce + 1_000),
      blockHash: null,
      blockNumber: null,
      transactionIndex: null,
      from: account.address.toLowerCase(),
    })

    // A timeout of 0 waits for nothing, as Base's node takes it (not the 6 s default): code 4 at once, even
    // for a transaction the next flashblock includes.
    const noWait = await signedTransfer(nonce + 2)
    const noWaitAnswer = (await rpc(gateway.url, 'eth_sendRawTransactionSync', [noWait, 0])) as { error?: { code: number; data?: unknown } }
    expect(noWaitAnswer.error).toMatchObject({ code: 4, data: keccak256(noWait) })
  })

  test('eth_sendRawTransactionSync refuses a wait longer than 6 s before sending, as Base does', async () => {
    const account = ACCOUNTS.rawSync
    const raw = await signedTransfer(await nonceOf(account.address, 'pending'))
    for (const url of [gateway.url, devnet.rpcUrl]) {
      const answer = (await rpc(url, 'eth_sendRawTransactionSync', [raw, 6_001])) as { error?: { code: number; message: string } }
      expect(answer.error).toEqual({ code: -32602, message: 'time out too long, timeout: 6001 ms, max: 6000 ms' })
    }
    // Nothing was sent: neither the node nor flashgate knows the transaction.
    expect((await rpc(devnet.rpcUrl, 'eth_getTransactionByHash', [keccak256(raw)])).result).toBeNull()
    expect(await result('eth_getTransactionByHash', [keccak256(raw)])).toBeNull()
  })

  test('viem: an EOA delegates itself (EIP-7702, self-sponsored): found by hash at once, and the pending nonce at once skips the one its authorization takes', async () => {
    // anvil funds the mnemonic's first ten accounts; the ones above are not any other test's.
    const account = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: 7 })
    const wallet = createWalletClient({ account, chain: DEVNET_CHAIN, transport: http(gateway.url) })
    const reader = createPublicClient({ chain: DEVNET_CHAIN, transport: http(gateway.url), pollingInterval: RECEIPT_POLL_MS })
    const nonceBefore = await reader.getTransactionCount({ address: account.address, blockTag: 'pending' })
    // `executor: 'self'`: viem signs the authorization for the nonce after the transaction's own.
    const authorization = await wallet.signAuthorization({ contractAddress: `0x${'c0'.repeat(20)}`, executor: 'self' })
    expect(authorization.nonce).toBe(nonceBefore + 1)
    const delegation = await wallet.sendTransaction({ authorizationList: [authorization], to: account.address, data: '0x' })
    // Found by hash at once, its authorization written as the node writes it.
    const found = await result<Record<string, unknown>>('eth_getTransactionByHash', [delegation])
    const atNode = (await rpc(devnet.rpcUrl, 'eth_getTransactionByHash', [delegation])).result as Record<string, unknown>
    expect(found).toMatchObject({ hash: delegation, type: '0x4', authorizationList: atNode.authorizationList })
    // At once, before a flashblock shows it: the nonce the wallet's next send takes is the one after both.
    // (Not sent here: anvil's pool waits forever for the nonce the authorization took, which no transaction provides.)
    expect(await reader.getTransactionCount({ address: account.address, blockTag: 'pending' })).toBe(nonceBefore + 2)
    await waitForSealedReceipt(delegation)
    expect(await reader.getTransactionCount({ address: account.address, blockTag: 'latest' })).toBe(nonceBefore + 2)
    expect(await reader.getTransactionCount({ address: account.address, blockTag: 'pending' })).toBe(nonceBefore + 2)
    expect(await reader.getCode({ address: account.address })).toBe(`0xef0100${'c0'.repeat(20)}`)
  })

  test('a transaction sent through flashgate is found by hash at once, before any flashblock shows it', async () => {
    const account = ACCOUNTS.rawSync
    const raw = await signedTransfer(await nonceOf(account.address, 'pending'))
    const hash = await result<Hash>('eth_sendRawTransaction', [raw])
    const found = await result<Record<string, unknown> | null>('eth_getTransactionByHash', [hash])
    expect(found).toMatchObject({ hash, from: account.address.toLowerCase(), to: RECIPIENT })
    expect(found!.blockHash === null || found!.blockHash === ZERO_HASH).toBe(true)
    await waitForSealedReceipt(hash)
  })
})
