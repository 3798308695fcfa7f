// EIP-7702 (type 4) transactions through flashgate: smart-account wallets on Base (since Isthmus) delegate an
// EOA's code with an authorization list. The transaction, its receipt, its block and the authority's nonce
// (which a valid authorization bumps, an invalid one leaves) must read as anvil answers them.
import { createWalletClient, http, type Hex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { beforeAll, describe, expect, test } from 'vitest'
import { DEV_MNEMONIC } from '../src/devnet/anvil.js'
import { compareWithReference, type Query } from './fixtures/compare.js'
import { useFollowedChain } from './fixtures/followed-chain.js'
import { anvilCall, anvilReceipt, waitForSameHead } from './fixtures/sync.js'

/** anvil's funded accounts 7 (sender) and 8 (authority): the generated chain sends from the first ones. */
const SENDER_INDEX = 7
const AUTHORITY_INDEX = 8

const followed = useFollowedChain({ seed: 7702, blocks: 4 })

type Sent = { hash: Hex; block: Hex }
let valid: Sent
let invalid: Sent
let authority: Hex
let sender: Hex

beforeAll(async () => {
  const { anvil, gateway, facts } = followed()
  const senderAccount = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: SENDER_INDEX })
  const authorityAccount = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: AUTHORITY_INDEX })
  sender = senderAccount.address
  authority = authorityAccount.address
  const wallet = createWalletClient({ account: senderAccount, transport: http(anvil.rpcUrl) })
  const chainId = await wallet.getChainId()
  const delegate = facts.contracts[0]!
  const send = async (nonce: number) => {
    const authorization = await authorityAccount.signAuthorization!({ contractAddress: delegate, chainId, nonce })
    const hash = await wallet.sendTransaction({ chain: null, to: authority, data: '0x', authorizationList: [authorization], gas: 200_000n })
    const receipt = await anvilReceipt<{ blockNumber: Hex }>(anvil.rpcUrl, hash)
    return { hash, block: receipt.blockNumber }
  }
  // Sponsored: the sender pays, the authority's nonce moves from 0 to 1 by the authorization alone.
  valid = await send(0)
  // The same nonce again: the authorization is skipped, the transaction still lands.
  invalid = await send(0)
  await waitForSameHead(gateway, anvil.rpcUrl)
  expect((await anvilCall<{ type: Hex }>(anvil.rpcUrl, 'eth_getTransactionByHash', [valid.hash])).type).toBe('0x4')
}, 120_000)

describe('EIP-7702 transactions', () => {
  test('the transaction, its receipt, its block and the accounts it touched read as from anvil', async () => {
    const { anvil, gateway } = followed()
    const queries: Query[] = []
    for (const { hash, block } of [valid, invalid]) {
      const before = `0x${(Number(block) - 1).toString(16)}`
      queries.push(
        { method: 'eth_getTransactionByHash', params: [hash] },
        { method: 'eth_getTransactionReceipt', params: [hash] },
        { method: 'eth_getBlockByNumber', params: [block, true] },
        { method: 'eth_getBlockByNumber', params: [block, false] },
        { method: 'eth_getBlockReceipts', params: [block] },
        { method: 'eth_getTransactionByBlockNumberAndIndex', params: [block, '0x0'] },
        { method: 'eth_getLogs', params: [{ fromBlock: block, toBlock: block }] },
        ...[authority, sender].flatMap((account) =>
          [before, block, 'latest'].flatMap((at) => [
            { method: 'eth_getTransactionCount', params: [account, at] },
            { method: 'eth_getBalance', params: [account, at] },
          ]),
        ),
        { method: 'eth_getCode', params: [authority, block] },
      )
    }
    const { compared, errors } = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
    expect(compared).toBe(queries.length)
    expect(errors).toBe(0)
    // The authorization bumped the authority's nonce once: the second one, with the same nonce, was skipped.
    expect(await anvilCall(anvil.rpcUrl, 'eth_getTransactionCount', [authority, 'latest'])).toBe('0x1')
  })
})
