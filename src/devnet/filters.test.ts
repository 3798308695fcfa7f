import { createPublicClient, createWalletClient, type Hash, http, type PublicClient, parseAbiItem, parseGwei } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { deployToken, TRANSFER_TOPIC, tokenAbi } from './contracts.js'
import { type Devnet, startDevnet } from './devnet.js'

const MNEMONIC = 'test test test test test test test test test test test junk'
const account = mnemonicToAccount(MNEMONIC, { addressIndex: 6 })
const chain = { id: 31337, name: 'devnet', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [] } } } as const

describe("the devnet's filters, as a node keeps them (anvil's would see every speculative block the sequencer mines)", () => {
  let devnet: Devnet
  let client: ReturnType<typeof createPublicClient>

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0, flashblocksPort: 0 })
    client = createPublicClient({ chain, transport: http(devnet.rpcUrl) })
  })
  afterAll(async () => {
    await devnet?.stop()
  })

  test('viem: a block filter reports each sealed block once, a pending-transaction filter each sent transaction once, a log filter each log once', async () => {
    const wallet = createWalletClient({ account, chain, transport: http(devnet.rpcUrl) })
    const token = await deployToken(wallet, client as PublicClient)
    const from = await client.getBlockNumber()
    const [blocks, transactions, logs] = await Promise.all([
      client.createBlockFilter(),
      client.createPendingTransactionFilter(),
      client.createEventFilter({
        address: token,
        event: parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)'),
        fromBlock: from + 1n,
      }),
    ])
    const sent: Hash[] = []
    let nonce = await client.getTransactionCount({ address: account.address, blockTag: 'pending' })
    for (let index = 0; index < 3; index++)
      sent.push(
        await wallet.writeContract({
          address: token,
          abi: tokenAbi,
          functionName: 'transfer',
          args: [`0x${'77'.repeat(20)}`, BigInt(index + 1)],
          nonce: nonce++,
          gas: 100_000n,
          maxFeePerGas: parseGwei('20'),
          maxPriorityFeePerGas: parseGwei('1'),
        }),
      )
    // Through two seals, polled every flashblock or so, as a watcher polls.
    const seenBlocks: Hash[] = []
    const seenTransactions: Hash[] = []
    const seenLogs: { transactionHash: Hash | null; blockHash: Hash | null }[] = []
    for (let waited = 0; ; waited++) {
      seenBlocks.push(...(await client.getFilterChanges({ filter: blocks })))
      seenTransactions.push(...(await client.getFilterChanges({ filter: transactions })))
      seenLogs.push(...(await client.getFilterChanges({ filter: logs })))
      const receipts = await Promise.all(sent.map((hash) => client.getTransactionReceipt({ hash }).catch(() => null)))
      const sealed = receipts.every((receipt) => receipt !== null && /[1-9a-f]/.test(receipt.blockHash.slice(2)))
      if ((sealed && seenLogs.length >= sent.length && (await client.getBlockNumber()) >= from + 2n) || waited > 100) break
      await new Promise((resolve) => setTimeout(resolve, 150))
    }
    const to = await client.getBlockNumber()
    seenBlocks.push(...(await client.getFilterChanges({ filter: blocks })))
    const sealedHashes = await Promise.all(
      Array.from({ length: Number(to - from) }, async (_, offset) => (await client.getBlock({ blockNumber: from + 1n + BigInt(offset) })).hash),
    )
    expect(seenBlocks).toEqual(sealedHashes)
    expect(seenTransactions).toEqual(sent)
    const sealedLogs = await client.getLogs({ address: token, fromBlock: from + 1n, toBlock: to })
    expect(seenLogs.map((log) => [log.transactionHash, log.blockHash])).toEqual(sealedLogs.map((log) => [log.transactionHash, log.blockHash]))
    expect(seenLogs.map((log) => log.transactionHash)).toEqual(sent)
    expect(sealedLogs.every((log) => log.topics[0] === TRANSFER_TOPIC)).toBe(true)
    expect((await client.getFilterLogs({ filter: logs })).map((log) => log.transactionHash)).toEqual(sent)
    expect(await client.uninstallFilter({ filter: blocks })).toBe(true)
    await expect(client.getFilterChanges({ filter: blocks })).rejects.toThrow(/filter not found/)
  })
})
