import { createRequire } from 'node:module'
import {
  type Abi,
  type Address,
  encodeDeployData,
  encodeFunctionData,
  getContractAddress,
  type Hex,
  parseEther,
  parseGwei,
  type PublicClient,
  type WalletClient,
} from 'viem'
import { entryPoint07Abi, entryPoint07Address, getUserOperationHash, type PackedUserOperation, toPackedUserOperation } from 'viem/account-abstraction'
import { generatePrivateKey, type LocalAccount, privateKeyToAccount } from 'viem/accounts'

// ERC-4337 on the devnet from real, published bytecode: EntryPoint v0.7, SimpleAccountFactory and
// SimpleAccount as the eth-infinitism team ships them in @account-abstraction/contracts. The EntryPoint is
// deployed like any contract, then its code is placed at the canonical address, where wallets and
// flashgate's attribution look for it.

type Artifact = { abi: Abi; bytecode: Hex }
const artifact = (name: string) => createRequire(import.meta.url)(`@account-abstraction/contracts/artifacts/${name}.json`) as Artifact
export const ENTRY_POINT_ARTIFACT = artifact('EntryPoint')
export const SIMPLE_ACCOUNT_FACTORY_ARTIFACT = artifact('SimpleAccountFactory')
export const SIMPLE_ACCOUNT_ARTIFACT = artifact('SimpleAccount')

/** Explicit gas: the contracts a transaction needs may still be pending, so estimation could fail. */
const DEPLOY_GAS = 8_000_000n
const CREATE_ACCOUNT_GAS = 1_000_000n
const FUND_GAS = 30_000n
const FUNDING = parseEther('10')

export type SmartAccount = { address: Address; owner: LocalAccount }

/** A SimpleAccount's `execute(target, value, data)`: what a user operation's callData carries. */
export function executeCall(target: Address, value: bigint, data: Hex): Hex {
  return encodeFunctionData({ abi: SIMPLE_ACCOUNT_ARTIFACT.abi, functionName: 'execute', args: [target, value, data] })
}

/** The account's next EntryPoint nonce (key 0), at `pending`. */
export async function entryPointNonce(client: PublicClient, account: Address): Promise<bigint> {
  return (await client.readContract({
    address: entryPoint07Address,
    abi: entryPoint07Abi,
    functionName: 'getNonce',
    args: [account, 0n],
    blockTag: 'pending',
  })) as bigint
}

/** A v0.7 user operation of a SimpleAccount, signed by its owner and packed as `handleOps` takes it. */
export async function signedUserOperation(account: SmartAccount, chainId: number, nonce: bigint, callData: Hex): Promise<PackedUserOperation> {
  const operation = {
    sender: account.address,
    nonce,
    callData,
    callGasLimit: 200_000n,
    verificationGasLimit: 300_000n,
    preVerificationGas: 60_000n,
    maxFeePerGas: parseGwei('20'),
    maxPriorityFeePerGas: parseGwei('1'),
    signature: '0x' as Hex,
  }
  const hash = getUserOperationHash({ userOperation: operation, entryPointAddress: entryPoint07Address, entryPointVersion: '0.7', chainId })
  return toPackedUserOperation({ ...operation, signature: await account.owner.signMessage({ message: { raw: hash } }) })
}

type Deployment = {
  publicClient: PublicClient
  walletClient: WalletClient
  /** An unlocked dev account that deploys, funds, and later bundles. */
  operator: Address
  /** Places code at an address (anvil_setCode). */
  setCode: (address: Address, code: Hex) => Promise<void>
  /** How many smart accounts, each with a fresh owner key. */
  count: number
  /** Waits for a receipt; the devnet answers one as soon as the transaction is pre-confirmed. */
  mined: (hash: Hex) => Promise<unknown>
}

/**
 * Deploys the EntryPoint (placed at its canonical address unless one is there already), a factory and
 * `count` funded SimpleAccounts, sending back to back from the operator and waiting only where a step
 * needs the one before.
 */
export async function deploySmartAccounts({ publicClient, walletClient, operator, setCode, count, mined }: Deployment): Promise<SmartAccount[]> {
  let nonce = await publicClient.getTransactionCount({ address: operator, blockTag: 'pending' })
  const send = (request: { to?: Address; data?: Hex; value?: bigint; gas: bigint }) =>
    walletClient.sendTransaction({ account: operator, chain: null, nonce: nonce++, ...request } as never)

  const existing = await publicClient.getCode({ address: entryPoint07Address, blockTag: 'pending' })
  let entryPointDeploy: Hex | null = null
  let entryPointAt: Address | null = null
  if (existing === undefined || existing === '0x') {
    entryPointAt = getContractAddress({ from: operator, nonce: BigInt(nonce) })
    entryPointDeploy = await send({ data: ENTRY_POINT_ARTIFACT.bytecode, gas: DEPLOY_GAS })
  }
  const factory = getContractAddress({ from: operator, nonce: BigInt(nonce) })
  const factoryDeploy = await send({
    data: encodeDeployData({ abi: SIMPLE_ACCOUNT_FACTORY_ARTIFACT.abi, bytecode: SIMPLE_ACCOUNT_FACTORY_ARTIFACT.bytecode, args: [entryPoint07Address] }),
    gas: DEPLOY_GAS,
  })
  const owners = Array.from({ length: count }, () => privateKeyToAccount(generatePrivateKey()))
  const creations: Hex[] = []
  for (const owner of owners)
    creations.push(
      await send({
        to: factory,
        data: encodeFunctionData({ abi: SIMPLE_ACCOUNT_FACTORY_ARTIFACT.abi, functionName: 'createAccount', args: [owner.address, 0n] }),
        gas: CREATE_ACCOUNT_GAS,
      }),
    )
  if (entryPointDeploy !== null) {
    await mined(entryPointDeploy)
    // Read at `pending`: the block holding it may not be sealed yet.
    const code = await publicClient.getCode({ address: entryPointAt!, blockTag: 'pending' })
    if (code === undefined || code === '0x') throw new Error('the EntryPoint deployment left no code')
    await setCode(entryPoint07Address, code)
  }
  await mined(factoryDeploy)
  const accounts: SmartAccount[] = []
  for (const owner of owners) {
    const address = (await publicClient.readContract({
      address: factory,
      abi: SIMPLE_ACCOUNT_FACTORY_ARTIFACT.abi,
      functionName: 'getAddress',
      args: [owner.address, 0n],
      blockTag: 'pending',
    })) as Address
    accounts.push({ address, owner })
  }
  const fundings: Hex[] = []
  for (const account of accounts) fundings.push(await send({ to: account.address, value: FUNDING, gas: FUND_GAS }))
  for (const hash of [...creations, ...fundings]) await mined(hash)
  return accounts
}
