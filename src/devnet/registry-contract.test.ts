import {
  type Address,
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  getAddress,
  type Hex,
  http,
  type PublicClient,
  type TransactionReceipt,
} from 'viem'
import { beforeAll, describe, expect, test } from 'vitest'
import { useAnvil } from '../../test/fixtures/anvil.js'
import { createRegistryFold, type RegistryEvent, registryAbi, registryEvents, registryTokenId } from '../attribution/registry.js'
import { REGISTRY_DEPLOY_BYTECODE } from './registry-contract.js'

// The devnet's registry against Base's rules and events, read back through flashgate's own decoder and
// fold (src/attribution/registry.ts): what the fold says of each code is what the contract's views say.

const [ALICE, BOB, CAROL] = [
  '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
  '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
] as const
const GAS = 300_000n

const getAnvil = useAnvil()

describe('devnet builder-codes registry', () => {
  let client: PublicClient
  let registry: Address
  const events: RegistryEvent[] = []

  async function send(from: Address, data: Hex): Promise<TransactionReceipt> {
    const wallet = createWalletClient({ transport: http(getAnvil().rpcUrl) })
    const hash = await wallet.sendTransaction({ account: from, chain: null, to: registry, data, gas: GAS })
    const receipt = await client.waitForTransactionReceipt({ hash })
    const block = await client.getBlock({ blockNumber: receipt.blockNumber })
    events.push(...registryEvents(registry, { number: Number(receipt.blockNumber), timestamp: Number(block.timestamp) }, receipt.logs as never))
    return receipt
  }
  const register = (from: Address, code: string, owner: Address, payout: Address) =>
    send(from, encodeFunctionData({ abi: registryAbi, functionName: 'register', args: [code, owner, payout] }))

  beforeAll(async () => {
    client = createPublicClient({ transport: http(getAnvil().rpcUrl) })
    const wallet = createWalletClient({ transport: http(getAnvil().rpcUrl) })
    const hash = await wallet.deployContract({ account: ALICE, chain: null, abi: registryAbi, bytecode: REGISTRY_DEPLOY_BYTECODE })
    registry = (await client.waitForTransactionReceipt({ hash })).contractAddress!
  })

  test('registers valid codes with Base event order, refuses invalid and taken ones, transfers and updates payouts', async () => {
    const registered = await register(ALICE, 'agent_one', ALICE, BOB)
    expect(registered.status).toBe('success')
    expect(registered.logs).toHaveLength(3)
    expect(events.map((event) => event.kind)).toEqual(['transfer', 'registered', 'payout'])
    expect(events[0]).toMatchObject({ tokenId: `0x${registryTokenId('agent_one').toString(16).padStart(64, '0')}`, account: ALICE })
    expect(events[1]).toMatchObject({ code: 'agent_one' })
    expect(events[2]).toMatchObject({ account: BOB })

    const longest = `${'a'.repeat(31)}9`
    expect((await register(BOB, longest, BOB, BOB)).status).toBe('success')
    expect((await register(BOB, '0_z', CAROL, CAROL)).status).toBe('success')
    for (const invalid of ['', 'Agent', 'bc-1', 'a'.repeat(33), 'sp ace', 'agent_one'])
      expect((await register(ALICE, invalid, ALICE, ALICE)).status, JSON.stringify(invalid)).toBe('reverted')
    expect((await register(ALICE, 'no_payout', ALICE, '0x0000000000000000000000000000000000000000')).status).toBe('reverted')

    // Only the owner moves its token or its payout address.
    const tokenId = registryTokenId('agent_one')
    const transfer = (from: Address, owner: Address, to: Address) =>
      send(from, encodeFunctionData({ abi: registryAbi, functionName: 'transferFrom', args: [owner, to, tokenId] }))
    expect((await transfer(BOB, ALICE, BOB)).status).toBe('reverted')
    expect((await transfer(ALICE, ALICE, CAROL)).status).toBe('success')
    const payout = (from: Address, code: string, to: Address) =>
      send(from, encodeFunctionData({ abi: registryAbi, functionName: 'updatePayoutAddress', args: [code, to] }))
    expect((await payout(ALICE, 'agent_one', ALICE)).status).toBe('reverted')
    expect((await payout(CAROL, 'agent_one', CAROL)).status).toBe('success')

    const fold = createRegistryFold()
    for (const event of events) fold.apply(event)
    expect([...fold.entries.keys()].sort()).toEqual(['0_z', 'agent_one', longest].sort())
    for (const [code, entry] of fold.entries) {
      const id = registryTokenId(code)
      const read = (functionName: 'ownerOf' | 'payoutAddress') => client.readContract({ address: registry, abi: registryAbi, functionName, args: [id] })
      expect(entry.owner).toBe(getAddress(await read('ownerOf')))
      expect(entry.payoutAddress).toBe(getAddress(await read('payoutAddress')))
    }
    expect(fold.entries.get('agent_one')).toMatchObject({ owner: CAROL, payoutAddress: CAROL, registeredBlock: Number(registered.blockNumber) })
    await expect(client.readContract({ address: registry, abi: registryAbi, functionName: 'ownerOf', args: [registryTokenId('nobody')] })).rejects.toThrow()
  })
})
