import { pino } from 'pino'
import { type Hex, keccak256, parseGwei, toHex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { serializeTransaction } from 'viem/op-stack'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createDecodePool, type DecodePool, type Decoded, decodeInline } from './decode-pool.js'

const logger = pino({ level: 'silent' })
const account = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: 3 })
const to = `0x${'42'.repeat(20)}` as const
/** An OP-Stack deposit (type 0x7e): its sender is in the envelope, nothing to recover. */
const DEPOSIT: Hex = serializeTransaction({
  type: 'deposit',
  sourceHash: keccak256(toHex('decode-pool')),
  from: '0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001',
  to: '0x4200000000000000000000000000000000000015',
  mint: 0n,
  value: 0n,
  gas: 1_000_000n,
  isSystemTx: false,
  data: '0x440a5e20',
})

/** A frame's worth of transactions of every kind, with bytes that decode to nothing in the middle. */
async function frame(): Promise<Hex[]> {
  const signed: Hex[] = []
  for (let nonce = 0; nonce < 14; nonce++) {
    const kind = nonce % 3
    signed.push(
      await account.signTransaction(
        (kind === 0
          ? { type: 'legacy', chainId: 8453, nonce, to, value: 1n, gas: 21_000n, gasPrice: parseGwei('1') }
          : kind === 1
            ? { type: 'eip2930', chainId: 8453, nonce, to, value: 1n, gas: 30_000n, gasPrice: parseGwei('1'), accessList: [{ address: to, storageKeys: [] }] }
            : {
                type: 'eip1559',
                chainId: 8453,
                nonce,
                to,
                value: 2n,
                gas: 21_000n,
                maxFeePerGas: parseGwei('3'),
                maxPriorityFeePerGas: 1n,
                data: '0xabcd',
              }) as never,
      ),
    )
  }
  return [DEPOSIT, ...signed.slice(0, 7), '0x02c0', ...signed.slice(7)]
}

/** What a caller compares: transactions as plain data, errors by their message. */
const comparable = (decoded: Decoded[]) => decoded.map((item) => (item instanceof Error ? { error: item.message } : { ...item }))

describe('the decoding pool', () => {
  let raws: Hex[]
  let inline: Decoded[]
  const pools: DecodePool[] = []
  const pool = (threads: number) => {
    const created = createDecodePool({ threads, logger })
    pools.push(created)
    return created
  }

  beforeAll(async () => {
    raws = await frame()
    inline = await decodeInline(raws)
  })
  afterAll(async () => {
    await Promise.all(pools.map((created) => created.close()))
  })

  test('the frame holds what it should: a deposit, signed transactions of three types, and bytes that are no transaction', () => {
    expect(inline).toHaveLength(16)
    expect(inline.filter((item) => item instanceof Error)).toHaveLength(1)
    expect(inline[8]).toBeInstanceOf(Error)
    expect((inline[0] as Exclude<Decoded, Error>).from).toBe('0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001')
    expect((inline[1] as Exclude<Decoded, Error>).from).toBe(account.address.toLowerCase())
  })

  test.each([0, 1, 2])('on %i threads, decodes every transaction as the main thread does, in order', async (threads) => {
    const decoding = pool(threads)
    expect(await decoding.warm()).toBe(threads < 2 ? 0 : threads)
    const decoded = await decoding.decode(raws)
    expect(comparable(decoded)).toEqual(comparable(inline))
    // Decoded where it should be: split between two threads or more (a thread that failed would leave them
    // inline); one thread alone would be no faster than the main one.
    expect(decoding.figures()).toEqual(threads < 2 ? { onThreads: 0, inline: raws.length } : { onThreads: raws.length, inline: 0 })
    expect(decoding.threads()).toBe(threads < 2 ? 0 : threads)
    expect(decoded[8]).toBeInstanceOf(Error)
    const recovered = decoded.find((item): item is Exclude<Decoded, Error> => !(item instanceof Error) && item.senderPublicKey !== undefined)
    expect(recovered?.senderPublicKey).toBeInstanceOf(Uint8Array)
    expect(recovered?.senderPublicKey).toHaveLength(64)
  })

  test('threads start with the first frame large enough to split; until they are ready, frames are decoded inline', async () => {
    const lazy = pool(2)
    expect(comparable(await lazy.decode(raws.slice(0, 15)))).toEqual(comparable(inline.slice(0, 15)))
    expect(lazy.threads()).toBe(0)
    expect(comparable(await lazy.decode(raws))).toEqual(comparable(inline))
    expect(lazy.figures()).toEqual({ onThreads: 0, inline: 15 + raws.length })
    expect(await lazy.warm()).toBe(2)
    expect(comparable(await lazy.decode(raws))).toEqual(comparable(inline))
    expect(lazy.figures().onThreads).toBe(raws.length)
  })

  test('a frame too small to split is decoded on the main thread, the same', async () => {
    const decoding = pool(2)
    await decoding.warm()
    const decoded = await decoding.decode(raws.slice(0, 3))
    expect(comparable(decoded)).toEqual(comparable(inline.slice(0, 3)))
    expect(decoding.figures()).toEqual({ onThreads: 0, inline: 3 })
  })

  test('threads that stop while they decode leave their transactions to the main thread: nothing is lost', async () => {
    const stopping = pool(2)
    expect(await stopping.warm()).toBe(2)
    const decoding = stopping.decode(raws)
    await stopping.close()
    expect(comparable(await decoding)).toEqual(comparable(inline))
    expect(stopping.threads()).toBe(0)
    expect(comparable(await stopping.decode(raws))).toEqual(comparable(inline))
  })
})
