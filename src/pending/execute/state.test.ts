import { Account, createAddressFromString, hexToBytes } from '@ethereumjs/util'
import type { Hex } from 'viem'
import { describe, expect, test } from 'vitest'
import { ExecutionState, type LoadedAccount, ParentState, type StateLoader } from './state.js'

// The executor's state, without an EVM: reads fall through to the parent block's state (loaded once, from a
// loader that counts its calls), writes stay in the block, checkpoints undo exactly what they must, and a
// block's writes become its child's parent state.

const ALICE = createAddressFromString('0x00000000000000000000000000000000000a11ce')
const BOB = createAddressFromString('0x0000000000000000000000000000000000000b0b')
const SLOT = hexToBytes(`0x${'00'.repeat(31)}01`)

function countingLoader(accounts: Record<string, LoadedAccount>, storage: Record<string, Hex> = {}) {
  const calls = { account: 0, accounts: 0, storage: 0 }
  const loader: StateLoader = {
    async account(address) {
      calls.account++
      return accounts[address] ?? null
    },
    async accounts(addresses) {
      calls.accounts++
      return addresses.map((address) => accounts[address] ?? null)
    },
    async storage(address, slot) {
      calls.storage++
      return storage[`${address}:${slot}`] ?? `0x${'00'.repeat(32)}`
    },
  }
  return { loader, calls }
}

describe('ExecutionState', () => {
  test('reads the parent once, then from what it holds; an absent account reads as undefined', async () => {
    const { loader, calls } = countingLoader({ [ALICE.toString()]: { balance: 10n, nonce: 2n, code: '0x' } })
    const state = new ExecutionState(new ParentState(loader))
    const [first, second] = await Promise.all([state.getAccount(ALICE), state.getAccount(ALICE)])
    expect(first?.balance).toBe(10n)
    expect(second?.nonce).toBe(2n)
    expect(await state.getAccount(BOB)).toBeUndefined()
    expect(calls.account).toBe(2)
  })

  test('a revert undoes the writes since its checkpoint, in nested frames; a commit keeps them', async () => {
    const { loader } = countingLoader({ [ALICE.toString()]: { balance: 10n, nonce: 0n, code: '0x' } })
    const state = new ExecutionState(new ParentState(loader))
    await state.checkpoint()
    await state.putAccount(ALICE, new Account(1n, 9n))
    await state.putStorage(ALICE, SLOT, hexToBytes('0x0005'))
    await state.checkpoint()
    await state.putAccount(ALICE, new Account(1n, 3n))
    await state.putStorage(ALICE, SLOT, hexToBytes('0x07'))
    await state.putAccount(BOB, new Account(0n, 6n))
    await state.revert()
    expect((await state.getAccount(ALICE))?.balance).toBe(9n)
    expect(await state.getAccount(BOB)).toBeUndefined()
    // Kept minimal, as the EVM compares storage values.
    expect(await state.getStorage(ALICE, SLOT)).toEqual(hexToBytes('0x05'))
    await state.commit()
    expect((await state.getAccount(ALICE))?.balance).toBe(9n)
  })

  test('an account handed out is a copy: changing it without putAccount changes nothing', async () => {
    const { loader } = countingLoader({ [ALICE.toString()]: { balance: 10n, nonce: 0n, code: '0x' } })
    const state = new ExecutionState(new ParentState(loader))
    const account = (await state.getAccount(ALICE))!
    account.balance = 0n
    expect((await state.getAccount(ALICE))?.balance).toBe(10n)
  })

  test('cleared storage reads as zero over the parent, and a revert brings it back', async () => {
    const { loader, calls } = countingLoader(
      { [ALICE.toString()]: { balance: 0n, nonce: 1n, code: '0x60006000' } },
      { [`${ALICE.toString()}:0x${'00'.repeat(31)}01`]: `0x${'00'.repeat(31)}2a` },
    )
    const state = new ExecutionState(new ParentState(loader))
    expect(await state.getStorage(ALICE, SLOT)).toEqual(hexToBytes('0x2a'))
    await state.checkpoint()
    await state.clearStorage(ALICE)
    expect(await state.getStorage(ALICE, SLOT)).toEqual(new Uint8Array(0))
    await state.revert()
    expect(await state.getStorage(ALICE, SLOT)).toEqual(hexToBytes('0x2a'))
    expect(calls.storage).toBe(1)
    expect(await state.getCode(ALICE)).toEqual(hexToBytes('0x60006000'))
  })

  test("takeTouched reports each transaction's balances once; a block's writes are its child's parent state", async () => {
    const { loader, calls } = countingLoader({ [ALICE.toString()]: { balance: 10n, nonce: 0n, code: '0x' } })
    const parent = new ParentState(loader)
    const block = new ExecutionState(parent)
    await block.putAccount(ALICE, new Account(1n, 4n))
    await block.putAccount(BOB, new Account(0n, 6n))
    await block.putStorage(BOB, SLOT, hexToBytes('0x09'))
    expect([...block.takeTouched()]).toEqual([
      [ALICE.toString(), { balance: 4n, nonce: 1n }],
      [BOB.toString(), { balance: 6n, nonce: 0n }],
    ])
    expect(block.takeTouched().size).toBe(0)
    const readsBefore = calls.account + calls.storage
    parent.apply(block)
    const child = new ExecutionState(parent)
    expect((await child.getAccount(ALICE))?.balance).toBe(4n)
    expect(await child.getStorage(BOB, SLOT)).toEqual(hexToBytes('0x09'))
    // The child read nothing from the upstream.
    expect(calls.account + calls.storage).toBe(readsBefore)
  })

  test('storage of a volatile account (a system contract) is never kept, and the cache is bounded', async () => {
    const { loader, calls } = countingLoader({})
    const parent = new ParentState(loader, 1, new Set([ALICE.toString()]))
    const state = new ExecutionState(parent)
    await state.getStorage(ALICE, SLOT)
    await state.getStorage(ALICE, SLOT)
    expect(calls.storage).toBe(2)
    await state.getAccount(BOB)
    await state.getStorage(BOB, SLOT)
    expect(parent.size).toBe(2)
    // Past its bound the parent state is emptied before it takes a block's writes.
    parent.apply(new ExecutionState(parent))
    expect(parent.size).toBe(0)
  })

  test('prefetch reads the accounts it lacks in one batch', async () => {
    const { loader, calls } = countingLoader({ [ALICE.toString()]: { balance: 1n, nonce: 0n, code: '0x' } })
    const parent = new ParentState(loader)
    await parent.prefetch([ALICE.toString(), BOB.toString(), ALICE.toString()])
    await parent.prefetch([ALICE.toString()])
    const state = new ExecutionState(parent)
    expect((await state.getAccount(ALICE))?.balance).toBe(1n)
    expect(calls).toEqual({ account: 0, accounts: 1, storage: 0 })
  })

  test("a sealed block's state diffs become the parent state: fields overridden, zeroed slots, deleted accounts, withdrawals re-read", async () => {
    const alice = ALICE.toString()
    const bob = BOB.toString()
    const slot = `0x${'00'.repeat(31)}01` as Hex
    const other = `0x${'00'.repeat(31)}02` as Hex
    const { loader, calls } = countingLoader({ [alice]: { balance: 10n, nonce: 2n, code: '0x' }, [bob]: { balance: 1n, nonce: 0n, code: '0x6000' } })
    const parent = new ParentState(loader)
    parent.applyDiffs(
      [
        // Alice pays Bob, whose slot 1 is set and slot 2 cleared.
        {
          pre: { [alice]: { balance: '0xa', nonce: 2 }, [bob]: { balance: '0x1', code: '0x6000', storage: { [other]: `0x${'00'.repeat(31)}07` } } },
          post: { [alice]: { balance: '0x7', nonce: 3 }, [bob]: { balance: '0x4', storage: { [slot]: `0x${'00'.repeat(31)}09` } } },
        },
        // Then Bob is deleted.
        { pre: { [bob]: { balance: '0x4', code: '0x6000' } }, post: {} },
      ],
      [alice],
    )
    const state = new ExecutionState(parent)
    // Alice was paid by a withdrawal too: read again from the loader, not taken from the diffs.
    expect((await state.getAccount(ALICE))?.balance).toBe(10n)
    expect(calls.account + calls.accounts).toBe(1)
    expect(await state.getAccount(BOB)).toBeUndefined()
    expect(await state.getStorage(BOB, hexToBytes(slot))).toEqual(new Uint8Array(0))

    calls.storage = 0
    const kept = new ParentState(loader)
    kept.applyDiffs([
      {
        pre: { [bob]: { balance: '0x1', code: '0x6000', storage: { [other]: `0x${'00'.repeat(31)}07` } } },
        post: { [bob]: { balance: '0x4', nonce: 1, storage: { [slot]: `0x${'00'.repeat(31)}09` } } },
      },
    ])
    const next = new ExecutionState(kept)
    const account = await next.getAccount(BOB)
    expect([account?.balance, account?.nonce]).toEqual([4n, 1n])
    expect(await next.getCode(BOB)).toEqual(hexToBytes('0x6000'))
    expect(await next.getStorage(BOB, hexToBytes(slot))).toEqual(hexToBytes('0x09'))
    expect(await next.getStorage(BOB, hexToBytes(other))).toEqual(new Uint8Array(0))
    expect(calls.storage).toBe(0)
  })
})
