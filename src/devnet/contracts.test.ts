import {
  type Address,
  type Hex,
  type PublicClient,
  type WalletClient,
  concat,
  createPublicClient,
  createWalletClient,
  decodeEventLog,
  encodeFunctionData,
  getAddress,
  http,
  numberToHex,
  pad,
  parseEther,
} from 'viem'
import { beforeAll, describe, expect, test } from 'vitest'
import { useAnvil } from '../../test/fixtures/anvil.js'
import { CUSTOM_TOPIC, TRANSFER_TOPIC, ZERO_AMOUNT_REASON, deployToken, tokenAbi } from './contracts.js'

/** Anvil's first two default dev accounts (unlocked, so eth_sendTransaction signs for them). */
const SENDER: Address = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266'
const RECIPIENT: Address = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8'
/** Explicit gas, so that transactions that revert are still sent (and mined) instead of failing estimation. */
const GAS = 200_000n

const getAnvil = useAnvil()

describe('token contract', () => {
  let token: Address
  let wallet: WalletClient
  let client: PublicClient

  const send = async (data: Hex, options: { gas?: bigint; value?: bigint; to?: Address } = {}) => {
    const hash = await wallet.sendTransaction({
      account: SENDER,
      chain: null,
      to: options.to ?? token,
      data,
      value: options.value,
      gas: options.gas,
    })
    return client.waitForTransactionReceipt({ hash })
  }

  beforeAll(async () => {
    const transport = http(getAnvil().rpcUrl)
    client = createPublicClient({ transport })
    wallet = createWalletClient({ transport })
    token = await deployToken(createWalletClient({ transport, account: SENDER }), client)
  })

  test('transfer emits exactly one Transfer(from = caller, to, value) and returns true', async () => {
    const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, 1234n] })
    const { result } = await client.simulateContract({
      abi: tokenAbi,
      address: token,
      functionName: 'transfer',
      args: [RECIPIENT, 1234n],
      account: SENDER,
    })
    expect(result).toBe(true)

    const receipt = await send(data)
    expect(receipt.status).toBe('success')
    expect(receipt.logs).toHaveLength(1)
    const [log] = receipt.logs
    expect(log!.address).toBe(token.toLowerCase())
    expect(log!.topics[0]).toBe(TRANSFER_TOPIC)
    expect(decodeEventLog({ abi: tokenAbi, data: log!.data, topics: log!.topics })).toEqual({
      eventName: 'Transfer',
      args: { from: SENDER, to: RECIPIENT, value: 1234n },
    })
  })

  test('transfer of amount 0 reverts with "zero amount" and is mined with status 0 when sent with explicit gas', async () => {
    await expect(client.simulateContract({ abi: tokenAbi, address: token, functionName: 'transfer', args: [RECIPIENT, 0n], account: SENDER })).rejects.toThrow(
      ZERO_AMOUNT_REASON,
    )

    const receipt = await send(encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, 0n] }), { gas: GAS })
    expect(receipt.status).toBe('reverted')
    expect(receipt.logs).toEqual([])
  })

  test.each([0, 1, 2, 3, 4])('emitLogs(%i) emits one log with that many topics', async (topicCount) => {
    const t1 = pad('0x01', { size: 32 })
    const t2 = pad('0x02', { size: 32 })
    const t3 = pad('0x03', { size: 32 })
    const receipt = await send(encodeFunctionData({ abi: tokenAbi, functionName: 'emitLogs', args: [topicCount, t1, t2, t3, 77n] }))
    expect(receipt.status).toBe('success')
    expect(receipt.logs).toHaveLength(1)
    expect(receipt.logs[0]!.topics).toEqual([CUSTOM_TOPIC, t1, t2, t3].slice(0, topicCount))
    expect(receipt.logs[0]!.data).toBe(numberToHex(77n, { size: 32 }))
  })

  test('emitLogs with more than 4 topics reverts', async () => {
    const zero = pad('0x', { size: 32 })
    const receipt = await send(encodeFunctionData({ abi: tokenAbi, functionName: 'emitLogs', args: [5, zero, zero, zero, 1n] }), { gas: GAS })
    expect(receipt.status).toBe('reverted')
  })

  test('a Custom log with one topic decodes with the ABI', async () => {
    const zero = pad('0x', { size: 32 })
    const receipt = await send(encodeFunctionData({ abi: tokenAbi, functionName: 'emitLogs', args: [1, zero, zero, zero, 5n] }))
    const [log] = receipt.logs
    expect(decodeEventLog({ abi: tokenAbi, data: log!.data, topics: log!.topics })).toEqual({ eventName: 'Custom', args: { value: 5n } })
  })

  test('multi(to, n) emits n Transfer logs with values 1..n in one transaction', async () => {
    const receipt = await send(encodeFunctionData({ abi: tokenAbi, functionName: 'multi', args: [RECIPIENT, 7n] }))
    expect(receipt.status).toBe('success')
    const decoded = receipt.logs.map((log) => decodeEventLog({ abi: tokenAbi, data: log.data, topics: log.topics }))
    expect(decoded).toEqual(
      Array.from({ length: 7 }, (_, index) => ({ eventName: 'Transfer', args: { from: SENDER, to: RECIPIENT, value: BigInt(index + 1) } })),
    )
    expect(receipt.logs.map((log) => log.logIndex)).toEqual([0, 1, 2, 3, 4, 5, 6])
  })

  test('multi(to, 0) succeeds without logs', async () => {
    const receipt = await send(encodeFunctionData({ abi: tokenAbi, functionName: 'multi', args: [RECIPIENT, 0n] }))
    expect(receipt.status).toBe('success')
    expect(receipt.logs).toEqual([])
  })

  test('trailing calldata after the ABI arguments (an ERC-8021 suffix) is ignored', async () => {
    const suffix: Hex = '0x62635f61626364656667680b0080218021802180218021802180218021'
    const data = concat([encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [RECIPIENT, 9n] }), suffix])
    const receipt = await send(data)
    expect(receipt.status).toBe('success')
    expect(decodeEventLog({ abi: tokenAbi, data: receipt.logs[0]!.data, topics: receipt.logs[0]!.topics }).args).toEqual({
      from: SENDER,
      to: RECIPIENT,
      value: 9n,
    })
  })

  test('mint(to, amount) credits balanceOf(to), emits Transfer(0, to, amount); balanceOf reads 0 for anyone else', async () => {
    const holder: Address = getAddress('0x00000000000000000000000000000000000b0b01')
    const balanceOf = (owner: Address) => client.readContract({ abi: tokenAbi, address: token, functionName: 'balanceOf', args: [owner] })
    expect(await balanceOf(holder)).toBe(0n)
    const first = await send(encodeFunctionData({ abi: tokenAbi, functionName: 'mint', args: [holder, 5n] }))
    await send(encodeFunctionData({ abi: tokenAbi, functionName: 'mint', args: [holder, 7n] }))
    expect(await balanceOf(holder)).toBe(12n)
    expect(await balanceOf(RECIPIENT)).toBe(0n)
    expect(first.logs).toHaveLength(1)
    expect(decodeEventLog({ abi: tokenAbi, data: first.logs[0]!.data, topics: first.logs[0]!.topics })).toEqual({
      eventName: 'Transfer',
      args: { from: '0x0000000000000000000000000000000000000000', to: holder, value: 5n },
    })
  })

  test('plain ETH transfers to the contract are accepted', async () => {
    const receipt = await send('0x', { value: parseEther('1') })
    expect(receipt.status).toBe('success')
    expect(await client.getBalance({ address: token })).toBeGreaterThanOrEqual(parseEther('1'))
  })

  test('an unknown selector reverts', async () => {
    const receipt = await send('0xdeadbeef', { gas: GAS })
    expect(receipt.status).toBe('reverted')
  })
})
