import { type Address, type Hex, createPublicClient, createWalletClient, decodeEventLog, encodeFunctionData, getAddress, http } from 'viem'
import { beforeAll, describe, expect, test } from 'vitest'
import { useAnvil } from '../../test/fixtures/anvil.js'
import { TRANSFER_TOPIC, deployToken, tokenAbi } from './contracts.js'
import { LOGS_PER_HOP, POOL_DEPLOY_BYTECODE, SWAP_TOPIC, SYNC_TOPIC, poolAbi } from './pool.js'

/** Anvil's first two default dev accounts (unlocked, so eth_sendTransaction signs for them). */
const SENDER: Address = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266'
const RECIPIENT: Address = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8'
const GAS = 500_000n

const getAnvil = useAnvil()

describe('pool contract', () => {
  let tokenIn: Address
  let tokenOut: Address
  let pool: Address
  let send: (to: Address, data: Hex) => ReturnType<ReturnType<typeof createPublicClient>['waitForTransactionReceipt']>

  beforeAll(async () => {
    const transport = http(getAnvil().rpcUrl)
    const client = createPublicClient({ transport })
    const wallet = createWalletClient({ transport, account: SENDER })
    tokenIn = await deployToken(wallet, client)
    tokenOut = await deployToken(wallet, client)
    const deployed = await client.waitForTransactionReceipt({
      hash: await wallet.deployContract({ abi: poolAbi, bytecode: POOL_DEPLOY_BYTECODE, chain: null }),
    })
    pool = getAddress(deployed.contractAddress!)
    send = async (to, data) => client.waitForTransactionReceipt({ hash: await wallet.sendTransaction({ to, data, gas: GAS, chain: null }) })
  })

  test('token transferFrom(from, to, amount) emits Transfer(from, to, amount) whoever calls it', async () => {
    const receipt = await send(tokenIn, encodeFunctionData({ abi: tokenAbi, functionName: 'transferFrom', args: [RECIPIENT, pool, 5n] }))
    expect(receipt.status).toBe('success')
    expect(receipt.logs.map((log) => decodeEventLog({ abi: tokenAbi, data: log.data, topics: log.topics }))).toEqual([
      { eventName: 'Transfer', args: { from: RECIPIENT, to: pool, value: 5n } },
    ])
  })

  test('swap with two hops leaves, per hop, Transfer in (tokenIn), Transfer out (tokenOut), Sync with growing reserves, Swap (pool)', async () => {
    const data = encodeFunctionData({ abi: poolAbi, functionName: 'swap', args: [tokenIn, tokenOut, RECIPIENT, 100n, 97n, 2n] })
    const receipt = await send(pool, data)
    expect(receipt.status).toBe('success')
    expect(receipt.logs).toHaveLength(2 * LOGS_PER_HOP)
    expect(receipt.logs.map((log) => [log.address, log.topics[0]])).toEqual(
      Array.from({ length: 2 }, () => [
        [tokenIn.toLowerCase(), TRANSFER_TOPIC],
        [tokenOut.toLowerCase(), TRANSFER_TOPIC],
        [pool.toLowerCase(), SYNC_TOPIC],
        [pool.toLowerCase(), SWAP_TOPIC],
      ]).flat(),
    )
    const abi = [...tokenAbi, ...poolAbi]
    const decoded = receipt.logs.map((log) => decodeEventLog({ abi, data: log.data, topics: log.topics }))
    expect(decoded.slice(0, LOGS_PER_HOP)).toEqual([
      { eventName: 'Transfer', args: { from: SENDER, to: pool, value: 100n } },
      { eventName: 'Transfer', args: { from: pool, to: RECIPIENT, value: 97n } },
      { eventName: 'Sync', args: { reserve0: 100n, reserve1: 97n } },
      { eventName: 'Swap', args: { sender: SENDER, amount0In: 100n, amount1In: 0n, amount0Out: 0n, amount1Out: 97n, to: RECIPIENT } },
    ])
    expect(decoded[LOGS_PER_HOP + 2]).toEqual({ eventName: 'Sync', args: { reserve0: 200n, reserve1: 194n } })
  })

  test('swap with zero hops succeeds without logs; an unknown selector reverts', async () => {
    const none = await send(pool, encodeFunctionData({ abi: poolAbi, functionName: 'swap', args: [tokenIn, tokenOut, RECIPIENT, 1n, 1n, 0n] }))
    expect(none.status).toBe('success')
    expect(none.logs).toEqual([])
    expect((await send(pool, '0xdeadbeef')).status).toBe('reverted')
  })
})
