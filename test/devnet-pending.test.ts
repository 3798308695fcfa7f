import { setTimeout as sleep } from 'node:timers/promises'
import { type Address, encodeFunctionData, type Hex, parseGwei } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { tokenAbi, TOKEN_DEPLOY_BYTECODE } from '../src/devnet/contracts.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { result, startTestGateway, type TestGateway } from './fixtures/gateway.js'

const BURST = 200
/** Fields anvil adds to receipts that no flashblock carries (a JSON-number `blockTimestamp`, `blobGasPrice`). */
const ANVIL_ONLY_RECEIPT_FIELDS = ['blockTimestamp', 'blobGasPrice']

let devnet: Devnet
let database: TestDatabase
let gateway: TestGateway
let token: Address

async function waitForReceipt(url: string, hash: string) {
  for (;;) {
    const receipt = await result<Record<string, unknown> | null>(url, 'eth_getTransactionReceipt', [hash])
    if (receipt !== null && receipt.blockHash !== `0x${'00'.repeat(32)}`) return receipt
    await sleep(50)
  }
}

/** Everything but the block hash, and anvil's own extras. */
function sealedView(receipt: Record<string, unknown>) {
  const copy: Record<string, unknown> = { ...receipt }
  delete copy.blockHash
  for (const field of ANVIL_ONLY_RECEIPT_FIELDS) delete copy[field]
  copy.logs = (receipt.logs as Record<string, unknown>[]).map(({ blockHash: _blockHash, ...log }) => log)
  return copy
}

beforeAll(async () => {
  // Faster than Base (100 ms flashblocks, 1 s blocks) to keep the burst short.
  devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 100 })
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: devnet.rpcUrl, flashblocksWs: devnet.flashblocksUrl, databaseUrl: database.databaseUrl })
  const deployment = await result<Hex>(devnet.rpcUrl, 'eth_sendTransaction', [{ from: DEV_ACCOUNTS[0]!.address, data: TOKEN_DEPLOY_BYTECODE, gas: '0x100000' }])
  const deployed = await waitForReceipt(devnet.rpcUrl, deployment)
  token = deployed.contractAddress as Address
  await gateway.ingester.waitForBlock(Number(deployed.blockNumber), 10_000)
})

afterAll(async () => {
  await gateway?.stop()
  await devnet?.stop()
  await database?.drop()
})

describe('pending view on the devnet', () => {
  test('a transaction shows up in all four methods before its block is sealed, then equals the sealed one', async () => {
    const sender = DEV_ACCOUNTS[1]!.address.toLowerCase()
    const recipient = `0x${'9a'.repeat(20)}`
    const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [recipient as Address, 42n] })
    /**
     * Sends the transfer and reads it pre-confirmed through flashgate, then asks the node for its head: a head
     * still below the receipt's block proves the block was not sealed when flashgate showed it. `null` when
     * the block sealed between the two reads (a race a busy machine can lose; the transfer is tried again).
     */
    const preConfirmed = async () => {
      const nonceBefore = BigInt(await result<Hex>(gateway.dedicatedUrl, 'eth_getTransactionCount', [sender, 'latest']))
      const hash = await result<Hex>(devnet.rpcUrl, 'eth_sendTransaction', [{ from: sender, to: token, data, gas: '0x30000', value: '0x7' }])
      let pendingReceipt: Record<string, unknown> | undefined
      for (;;) {
        const receipts = await result<Record<string, unknown>[]>(gateway.dedicatedUrl, 'eth_getBlockReceipts', ['pending'])
        pendingReceipt = receipts.find((receipt) => receipt.transactionHash === hash)
        if (pendingReceipt !== undefined) break
        await sleep(10)
      }
      const pendingNumber = Number(pendingReceipt.blockNumber)
      const [sealedHead, pendingLogs, pendingNonce, pendingBalance] = await Promise.all([
        result<Hex>(devnet.rpcUrl, 'eth_blockNumber'),
        result<Record<string, unknown>[]>(gateway.dedicatedUrl, 'eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending', address: token }]),
        result<Hex>(gateway.dedicatedUrl, 'eth_getTransactionCount', [sender, 'pending']),
        result<Hex>(gateway.dedicatedUrl, 'eth_getBalance', [token, 'pending']),
      ])
      if (Number(sealedHead) >= pendingNumber) {
        await gateway.ingester.waitForBlock(pendingNumber, 10_000)
        return null
      }
      return { nonceBefore, hash, pendingReceipt, pendingNumber, pendingLogs, pendingNonce, pendingBalance }
    }
    let seen: Awaited<ReturnType<typeof preConfirmed>> = null
    for (let attempt = 0; seen === null && attempt < 5; attempt++) seen = await preConfirmed()
    expect(seen, 'five transfers in a row sealed before the node was asked for its head').not.toBeNull()
    const { nonceBefore, hash, pendingReceipt, pendingNumber, pendingLogs, pendingNonce, pendingBalance } = seen!
    expect(pendingLogs.filter((log) => log.transactionHash === hash)).toHaveLength(1)
    expect(BigInt(pendingNonce)).toBe(nonceBefore + 1n)
    expect(BigInt(pendingBalance)).toBeGreaterThanOrEqual(7n)
    const pendingTransaction = await result<Record<string, unknown>>(gateway.dedicatedUrl, 'eth_getTransactionByHash', [hash])

    // Sealed: the confirmed answers equal what was pre-confirmed.
    await gateway.ingester.waitForBlock(pendingNumber, 10_000)
    const sealedReceipt = await result<Record<string, unknown>>(gateway.dedicatedUrl, 'eth_getTransactionReceipt', [hash])
    expect(sealedReceipt).toEqual(await result(devnet.rpcUrl, 'eth_getTransactionReceipt', [hash]))
    expect(sealedView(pendingReceipt)).toEqual(sealedView(sealedReceipt))
    const sealedLogs = await result<Record<string, unknown>[]>(gateway.dedicatedUrl, 'eth_getLogs', [
      { fromBlock: pendingReceipt.blockNumber, toBlock: pendingReceipt.blockNumber, address: token },
    ])
    const stripHash = ({ blockHash: _blockHash, ...log }: Record<string, unknown>) => log
    expect(pendingLogs.filter((log) => log.transactionHash === hash).map(stripHash)).toEqual(
      sealedLogs.filter((log) => log.transactionHash === hash).map(stripHash),
    )
    const sealedTransaction = await result<Record<string, unknown>>(gateway.dedicatedUrl, 'eth_getTransactionByHash', [hash])
    const { blockHash: _pendingHash, ...pendingFields } = pendingTransaction
    expect(sealedTransaction).toMatchObject(pendingFields)
    expect(await result(gateway.dedicatedUrl, 'eth_getBalance', [token, pendingReceipt.blockNumber])).toBe(pendingBalance)

    // Nothing counted twice once the block is indexed.
    const across = await result<Record<string, unknown>[]>(gateway.dedicatedUrl, 'eth_getLogs', [
      { fromBlock: pendingReceipt.blockNumber, toBlock: 'pending', address: token },
    ])
    expect(across.filter((log) => log.transactionHash === hash)).toHaveLength(1)
    expect(BigInt(await result<Hex>(gateway.dedicatedUrl, 'eth_getTransactionCount', [sender, 'latest']))).toBe(nonceBefore + 1n)
  })

  test(`one sender firing ${BURST} transactions, each nonce from flashgate's pending count: no gap, none rejected`, async () => {
    const account = DEV_ACCOUNTS[4]!
    const hashes: Hex[] = []
    let nonce = Number(await result<Hex>(gateway.dedicatedUrl, 'eth_getTransactionCount', [account.address, 'pending']))
    const firstNonce = nonce
    while (hashes.length < BURST) {
      const raw = await account.signTransaction({
        type: 'eip1559',
        chainId: 31337,
        nonce,
        to: `0x${'42'.repeat(20)}`,
        value: 1n,
        gas: 21_000n,
        maxFeePerGas: parseGwei('20'),
        maxPriorityFeePerGas: parseGwei('1'),
      })
      hashes.push(await result<Hex>(devnet.rpcUrl, 'eth_sendRawTransaction', [raw]))
      // As fast as the pre-confirmations allow: the next nonce is the pending count once it moves.
      for (;;) {
        const next = Number(await result<Hex>(gateway.dedicatedUrl, 'eth_getTransactionCount', [account.address, 'pending']))
        expect(next).toBeLessThanOrEqual(nonce + 1)
        if (next === nonce + 1) {
          nonce = next
          break
        }
        await sleep(5)
      }
    }
    const last = await waitForReceipt(gateway.dedicatedUrl, hashes.at(-1)!)
    expect(last.status).toBe('0x1')
    const receipts = await Promise.all(hashes.map((hash) => waitForReceipt(gateway.dedicatedUrl, hash)))
    expect(receipts.every((receipt) => receipt.status === '0x1')).toBe(true)
    expect(Number(await result<Hex>(gateway.dedicatedUrl, 'eth_getTransactionCount', [account.address, 'latest']))).toBe(firstNonce + BURST)
  }, 120_000)
})
