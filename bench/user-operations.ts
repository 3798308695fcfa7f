import { createRequire } from 'node:module'
import { type Abi, type Address, concat, encodeFunctionData, type Hex, parseEther, parseGwei } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { entryPoint07Abi, entryPoint07Address, getUserOperationHash, toPackedUserOperation } from 'viem/account-abstraction'
import type { createRpcClient } from './rpc.js'

/**
 * ERC-4337 bundles for the attribution bench: the published EntryPoint v0.7 and SimpleAccount artifacts
 * (@account-abstraction/contracts), the EntryPoint placed at its canonical address, smart accounts owned by
 * anvil's dev keys, and bundles of signed user operations whose callData carries a suffix.
 */
type Artifact = { abi: Abi; bytecode: Hex }
const artifact = (name: string) => createRequire(import.meta.url)(`@account-abstraction/contracts/artifacts/${name}.json`) as Artifact
const MNEMONIC = 'test test test test test test test test test test test junk'
const CHAIN_ID = 31337
const RECEIVER = `0x${'5e'.repeat(20)}` as Address

type Rpc = ReturnType<typeof createRpcClient>

async function deploy(rpc: Rpc, from: Address, data: Hex): Promise<Address> {
  const hash = await rpc.call<Hex>('eth_sendTransaction', [{ from, data, gas: '0x7a1200' }])
  await rpc.call('evm_mine')
  const receipt = await rpc.call<{ contractAddress: Address; status: Hex }>('eth_getTransactionReceipt', [hash])
  if (receipt.status !== '0x1') throw new Error('deployment failed')
  return receipt.contractAddress
}

/** Sets up the EntryPoint, a factory and `count` funded smart accounts; returns a maker of bundles. */
export async function setUpUserOperations(rpc: Rpc, deployer: Address, count: number) {
  const entryPoint = artifact('EntryPoint')
  const factoryArtifact = artifact('SimpleAccountFactory')
  const account = artifact('SimpleAccount')
  const deployed = await deploy(rpc, deployer, entryPoint.bytecode)
  await rpc.call('anvil_setCode', [entryPoint07Address, await rpc.call<Hex>('eth_getCode', [deployed, 'latest'])])
  const factory = await deploy(rpc, deployer, concat([factoryArtifact.bytecode, `0x${entryPoint07Address.slice(2).padStart(64, '0')}`]))
  const owners = Array.from({ length: count }, (_, index) => mnemonicToAccount(MNEMONIC, { addressIndex: 20 + index }))
  const accounts: { address: Address; owner: (typeof owners)[number]; nonce: bigint }[] = []
  for (const [salt, owner] of owners.entries()) {
    const args = [owner.address, BigInt(salt)] as const
    await rpc.call('eth_sendTransaction', [
      { from: deployer, to: factory, data: encodeFunctionData({ abi: factoryArtifact.abi, functionName: 'createAccount', args }), gas: '0xf4240' },
    ])
    const address =
      `0x${(await rpc.call<Hex>('eth_call', [{ to: factory, data: encodeFunctionData({ abi: factoryArtifact.abi, functionName: 'getAddress', args }) }, 'pending'])).slice(26)}` as Address
    // Gas given: estimated now, before the account's code exists, a plain transfer's 21,000 would not run its receive().
    await rpc.call('eth_sendTransaction', [{ from: deployer, to: address, value: `0x${parseEther('10').toString(16)}`, gas: '0x186a0' }])
    accounts.push({ address, owner, nonce: 0n })
  }
  await rpc.call('evm_mine')
  let next = 0

  /** `handleOps` calldata for `size` operations of the next accounts in turn, each with `suffix` on its callData. */
  async function bundle(size: number, suffixFor: () => Hex): Promise<Hex> {
    const operations = []
    for (let index = 0; index < size; index++) {
      const sender = accounts[next++ % accounts.length]!
      const operation = {
        sender: sender.address,
        nonce: sender.nonce++,
        callData: concat([encodeFunctionData({ abi: account.abi, functionName: 'execute', args: [RECEIVER, 1n, '0x'] }), suffixFor()]),
        callGasLimit: 100_000n,
        verificationGasLimit: 200_000n,
        preVerificationGas: 50_000n,
        maxFeePerGas: parseGwei('20'),
        maxPriorityFeePerGas: parseGwei('1'),
        signature: '0x' as Hex,
      }
      const hash = getUserOperationHash({ userOperation: operation, entryPointAddress: entryPoint07Address, entryPointVersion: '0.7', chainId: CHAIN_ID })
      operations.push(toPackedUserOperation({ ...operation, signature: await sender.owner.signMessage({ message: { raw: hash } }) }))
    }
    return encodeFunctionData({ abi: entryPoint07Abi, functionName: 'handleOps', args: [operations, deployer] })
  }

  return { entryPoint: entryPoint07Address, bundle }
}
