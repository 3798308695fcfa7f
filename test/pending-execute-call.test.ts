import { type Address, encodeFunctionData, type Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { tokenAbi } from '../src/devnet/contracts.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { deployDevnetToken, result, rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'

// `--pending-source execute`: `eth_call`, `eth_estimateGas` and `eth_createAccessList` at `pending` run on the
// state flashgate's own execution of the flashblocks left, before the block seals, and agree with what the
// reference node (anvil) answers at the sealed block; other tags are still forwarded.
/** The mint starts this early in a block, so that it is pre-confirmed well before the block seals. */
const LATEST_START_INDEX = 2
/** geth's `estimateGasErrorRatio`: its estimate stops within 1.5% above the lowest gas that succeeds (anvil's). */
const ESTIMATE_GAS_ERROR_RATIO = 0.015

type Json = Record<string, unknown>

describe('pending calls on the executed pending state', () => {
  let devnet: Devnet
  let database: TestDatabase
  let gateway: TestGateway
  let token: Address

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0, flashblocksPort: 0, blockTimeMs: 1_000, flashblockIntervalMs: 100 })
    database = await createTestDatabase()
    gateway = await startTestGateway({
      upstreamRpc: devnet.rpcUrl,
      flashblocksWs: devnet.flashblocksUrl,
      databaseUrl: database.databaseUrl,
      pendingSource: 'execute',
    })
    const deployed = await deployDevnetToken(devnet.rpcUrl, DEV_ACCOUNTS[0]!.address)
    token = deployed.address
    await gateway.ingester.waitForBlock(deployed.blockNumber, 10_000)
  })

  afterAll(async () => {
    await gateway?.stop()
    await devnet?.stop()
    await database?.drop()
  })

  test('balances, estimates, reverts and access lists at pending see a pre-confirmed mint; latest does not', async () => {
    const minter = DEV_ACCOUNTS[1]!.address
    const recipient = `0x${'7e'.repeat(20)}` as Address
    const encode = (functionName: 'transfer' | 'mint' | 'balanceOf', args: readonly unknown[]) =>
      encodeFunctionData({ abi: tokenAbi, functionName, args: args as never })
    const balanceOf = { to: token, data: encode('balanceOf', [recipient]) }
    const mint = { from: minter, to: token, data: encode('mint', [recipient, 5n]) }
    const transfer = { from: minter, to: token, data: encode('transfer', [recipient, 3n]) }
    const zeroTransfer = { from: minter, to: token, data: encode('transfer', [recipient, 0n]) }
    const state = gateway.pending!
    const answeredHere = () => gateway.primaryStatus().pendingSource?.execution?.pendingCalls ?? 0

    // Start at the opening of a block that flashgate follows, so the mint is pre-confirmed in it.
    await new Promise<void>((resolve) => {
      const opened = (block: { lastIndex: number }) => {
        if (block.lastIndex > LATEST_START_INDEX) return
        state.events.off('transactions', opened)
        resolve()
      }
      state.events.on('transactions', opened)
    })
    const minted = await result<Hex>(devnet.rpcUrl, 'eth_sendTransaction', [{ ...mint, data: encode('mint', [recipient, 7n]), gas: '0x30000' }])
    let number = -1
    await expect
      .poll(
        async () => {
          const block = state
            .blocks((await gateway.resolvers.chain.view()).head?.number ?? -1)
            .find((candidate) => candidate.transactions.some((t) => t.hash === minted))
          number = block?.number ?? -1
          return block?.receipts.every((receipt) => receipt !== null) ?? false
        },
        { timeout: 5_000, interval: 10 },
      )
      .toBe(true)

    const before = answeredHere()
    const [pendingBalance, latestBalance, overriddenBalance, pendingMintGas, latestMintGas, pendingTransferGas, reverted, revertedEstimate, accessList] =
      await Promise.all([
        result<Hex>(gateway.dedicatedUrl, 'eth_call', [balanceOf, 'pending']),
        result<Hex>(gateway.dedicatedUrl, 'eth_call', [balanceOf, 'latest']),
        // State overrides are the node's to apply: forwarded, even at pending.
        result<Hex>(gateway.dedicatedUrl, 'eth_call', [balanceOf, 'pending', {}]),
        result<Hex>(gateway.dedicatedUrl, 'eth_estimateGas', [mint, 'pending']),
        result<Hex>(gateway.dedicatedUrl, 'eth_estimateGas', [mint, 'latest']),
        result<Hex>(gateway.dedicatedUrl, 'eth_estimateGas', [transfer, 'pending']),
        rpc(gateway.dedicatedUrl, 'eth_call', [zeroTransfer, 'pending']),
        rpc(gateway.dedicatedUrl, 'eth_estimateGas', [zeroTransfer, 'pending']),
        result<{ accessList: { address: Address; storageKeys: Hex[] }[]; gasUsed: Hex }>(gateway.dedicatedUrl, 'eth_createAccessList', [mint, 'pending']),
      ])
    // Still pre-confirmed once all were answered: the block was not sealed meanwhile.
    expect(Number(await result<Hex>(gateway.dedicatedUrl, 'eth_blockNumber'))).toBeLessThan(number)
    // Answered here: the six pending calls without overrides; `latest` and the overridden call went to the node.
    expect(answeredHere() - before).toBe(6)

    expect(BigInt(pendingBalance)).toBe(7n)
    expect(BigInt(latestBalance)).toBe(0n)
    // The devnet answers `pending` as a flashblocks-aware node does: the forwarded call sees the mint too.
    expect(BigInt(overriddenBalance)).toBe(7n)
    // Minting to a balance that is no longer zero costs less than at latest (a 20,000-gas SSTORE there).
    expect(BigInt(pendingMintGas)).toBeLessThan(BigInt(latestMintGas))
    // A revert as the node words it: code 3, the reason, the revert bytes.
    expect(reverted).toEqual(await rpc(devnet.rpcUrl, 'eth_call', [zeroTransfer, 'latest']))
    expect(reverted.error).toMatchObject({ code: 3, message: 'execution reverted: zero amount' })
    expect(revertedEstimate).toEqual(await rpc(devnet.rpcUrl, 'eth_estimateGas', [zeroTransfer, 'latest']))
    expect(accessList.accessList).toEqual([{ address: token.toLowerCase(), storageKeys: [`0x${recipient.slice(2).padStart(64, '0')}`] }])

    // Sealed: the reference node at that block agrees (estimates within geth's tolerance above anvil's exact one).
    await gateway.ingester.waitForBlock(number, 10_000)
    const at = `0x${number.toString(16)}`
    const [sealedMintGas, sealedTransferGas, sealedAccessList, sealedBalance] = await Promise.all([
      result<Hex>(devnet.rpcUrl, 'eth_estimateGas', [mint, at]),
      result<Hex>(devnet.rpcUrl, 'eth_estimateGas', [transfer, at]),
      result<Json>(devnet.rpcUrl, 'eth_createAccessList', [mint, at]),
      result<Hex>(gateway.dedicatedUrl, 'eth_call', [balanceOf, 'latest']),
    ])
    for (const [pending, sealed] of [
      [pendingMintGas, sealedMintGas],
      [pendingTransferGas, sealedTransferGas],
    ]) {
      expect(BigInt(pending!)).toBeGreaterThanOrEqual(BigInt(sealed!))
      expect(Number(pending!)).toBeLessThan(Number(sealed!) / (1 - ESTIMATE_GAS_ERROR_RATIO))
    }
    expect(accessList).toEqual(sealedAccessList)
    expect(BigInt(sealedBalance)).toBe(7n)
  })
})
