import { MerklePatriciaTrie } from '@ethereumjs/mpt'
import { type Hash, type Hex, hexToBytes, keccak256, toHex, toRlp } from 'viem'
import { afterEach, describe, expect, test, vi } from 'vitest'
import type { PendingBlock } from '../pending/state.js'
import type { PendingTransaction } from '../pending/transactions.js'
import { formatPendingBlock, transactionsRoot } from './block.js'

// The pending block's transactions root is kept from one version to the next (objects/block.ts): a flashblock
// adds transactions, receipts change nothing in it, a rewind replaces them. Each root must be the one a trie
// built afresh from the same transactions gives (the sealed block's, as pending-equals-sealed checks end to end).

/** Only what the root reads of a transaction: its position, bytes and hash. */
const transaction = (index: number, tag = 0): PendingTransaction => {
  const raw = toHex(`transaction ${index} ${tag} ${'x'.repeat(index * 7)}`) as Hex
  return { index, raw, hash: keccak256(raw) as Hash } as unknown as PendingTransaction
}

/** Only what the root reads of a pending block. */
const pendingBlock = (transactions: PendingTransaction[]) => ({ version: 1, transactions }) as unknown as PendingBlock

async function freshRoot(transactions: { index: number; raw: Hex }[]): Promise<Hash> {
  const trie = new MerklePatriciaTrie()
  for (const { index, raw } of transactions) await trie.put(hexToBytes(toRlp(index === 0 ? '0x' : toHex(index))), hexToBytes(raw))
  return `0x${Buffer.from(trie.root()).toString('hex')}`
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe('the pending transactions root', () => {
  test('each version equals a trie built afresh, and puts only the transactions added since the version before', async () => {
    const puts = vi.spyOn(MerklePatriciaTrie.prototype, 'put')
    const block = pendingBlock([])
    expect(await transactionsRoot(block)).toBe('0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421')
    const all = Array.from({ length: 300 }, (_, index) => transaction(index))
    // Flashblocks of 30, 0 (receipts arrived: a new version, the same transactions) and 45 transactions, beyond
    // 127 and 255 (keys of one, two and three bytes).
    let count = 0
    for (const step of [30, 0, 45, 60, 0, 100, 65]) {
      count += step
      block.transactions = all.slice(0, count)
      block.version++
      const before = puts.mock.calls.length
      expect(await transactionsRoot(block)).toBe(await freshRoot(block.transactions))
      // The fresh trie's puts are the test's own.
      expect(puts.mock.calls.length - before - count).toBe(step)
    }
    // Asked again at the same version: nothing to do.
    const before = puts.mock.calls.length
    await transactionsRoot(block)
    expect(puts.mock.calls.length).toBe(before)
  })

  test('a block whose transactions changed (a rewind, a replaced flashblock) is built again from the first', async () => {
    const puts = vi.spyOn(MerklePatriciaTrie.prototype, 'put')
    const block = pendingBlock(Array.from({ length: 20 }, (_, index) => transaction(index)))
    await transactionsRoot(block)
    // The same count and the same last transaction, one in the middle replaced.
    block.transactions = block.transactions.map((each) => (each.index === 7 ? transaction(7, 1) : each))
    block.version++
    const before = puts.mock.calls.length
    expect(await transactionsRoot(block)).toBe(await freshRoot(block.transactions))
    expect(puts.mock.calls.length - before).toBe(40)
    // Fewer transactions than before.
    block.transactions = block.transactions.slice(0, 5)
    block.version++
    expect(await transactionsRoot(block)).toBe(await freshRoot(block.transactions))
  })

  test('a version whose puts failed is not kept: the next one is built afresh', async () => {
    const block = pendingBlock(Array.from({ length: 3 }, (_, index) => transaction(index)))
    const failing = vi.spyOn(MerklePatriciaTrie.prototype, 'put').mockRejectedValueOnce(new Error('no room'))
    await expect(transactionsRoot(block)).rejects.toThrow('no room')
    failing.mockRestore()
    block.transactions = [...block.transactions, transaction(3)]
    block.version++
    expect(await transactionsRoot(block)).toBe(await freshRoot(block.transactions))
  })
})

describe('the pending block', () => {
  /** A block whose first transaction is of `type`, built on a parent that used 5,000,000 blob gas. */
  async function excessBlobGasOver(type: number) {
    const block = {
      ...pendingBlock([{ ...transaction(0), type }]),
      number: 11,
      transactionCount: 1,
      cumulativeGasUsed: 21_000n,
      header: {
        parentHash: `0x${'0a'.repeat(32)}`,
        feeRecipient: `0x${'00'.repeat(20)}`,
        timestamp: 1n,
        baseFeePerGas: 1n,
        gasLimit: 30_000_000n,
        extraData: '0x',
      },
    } as unknown as PendingBlock
    block.header = { ...block.header, withdrawals: [], blobGasUsed: 0n } as PendingBlock['header']
    const parent = { excessBlobGas: '0x0', blobGasUsed: toHex(5_000_000), withdrawalsRoot: '0x', parentBeaconBlockRoot: '0x' }
    const answer = await formatPendingBlock(block, {
      includeTransactions: false,
      parent,
      convention: { countsWithdrawals: true },
      formatTransaction: () => ({}),
    })
    return { hash: answer.hash, excessBlobGas: answer.excessBlobGas }
  }

  test('on an OP-Stack chain (an L1-info deposit first) has no excess blob gas, as its sealed blocks; elsewhere EIP-4844 rules', async () => {
    // Since Jovian an OP-Stack block's blobGasUsed counts data-availability use; its excess stays zero.
    expect(await excessBlobGasOver(0x7e)).toEqual({ hash: `0x${'00'.repeat(32)}`, excessBlobGas: '0x0' })
    expect(await excessBlobGasOver(2)).toEqual({ hash: `0x${'00'.repeat(32)}`, excessBlobGas: toHex(5_000_000 - 786_432) })
  })
})
