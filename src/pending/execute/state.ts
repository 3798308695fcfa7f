import type { AccountFields, StateManagerInterface } from '@ethereumjs/common'
import { OriginalStorageCache } from '@ethereumjs/statemanager'
import { Account, type Address, bytesToHex, hexToBytes, KECCAK256_NULL, KECCAK256_RLP, setLengthLeft } from '@ethereumjs/util'
import type { Hex } from 'viem'
import type { PrestateDiff } from '../../ingest/account-diffs.js'
import { keccak256 } from 'viem'

/** An account as the parent block left it; `null` when it does not exist (no balance, nonce or code). */
export type LoadedAccount = { balance: bigint; nonce: bigint; code: Hex } | null

/** Reads state at the parent block, for what the cache does not hold. */
export type StateLoader = {
  account(address: Hex): Promise<LoadedAccount>
  /** Several accounts in one round trip (a JSON-RPC batch), for the prefetch of a flashblock. */
  accounts(addresses: Hex[]): Promise<LoadedAccount[]>
  storage(address: Hex, slot: Hex): Promise<Hex>
}

/** What a block's transactions read and wrote, as values: the cache of the next block's parent state. */
type Entry = { account: Account | undefined; code: Uint8Array }

const EMPTY = new Uint8Array(0)

/** Storage values are kept minimal (no leading zero bytes), as the EVM compares them. */
function minimal(bytes: Uint8Array): Uint8Array {
  let start = 0
  while (start < bytes.length && bytes[start] === 0) start++
  return start === 0 ? bytes : bytes.subarray(start)
}

function copy(account: Account | undefined): Account | undefined {
  return account === undefined ? undefined : new Account(account.nonce, account.balance, account.storageRoot, account.codeHash)
}

const storageKey = (address: string, slot: Uint8Array) => `${address}:${bytesToHex(slot)}`

/**
 * The parent block's state as far as it has been read, shared by the blocks that follow while each builds
 * on the one before (see `ExecutionState.commitTo`). Bounded: past `maxEntries` it is emptied, and what is
 * needed again is read again from the upstream.
 */
export class ParentState {
  readonly accounts = new Map<string, Entry>()
  readonly storage = new Map<string, Uint8Array>()
  /** Reads in flight, so that a prefetch and the EVM never ask the upstream twice for the same value. */
  private readonly loadingAccounts = new Map<string, Promise<Entry>>()
  private readonly loadingStorage = new Map<string, Promise<Uint8Array>>()

  constructor(
    readonly loader: StateLoader,
    private readonly maxEntries = 200_000,
    /** Accounts whose storage is never kept from one block to the next (system contracts written outside transactions). */
    private readonly volatile: ReadonlySet<string> = new Set(),
  ) {}

  get size(): number {
    return this.accounts.size + this.storage.size
  }

  account(address: string): Entry | Promise<Entry> {
    const known = this.accounts.get(address)
    if (known !== undefined) return known
    let loading = this.loadingAccounts.get(address)
    if (loading === undefined) {
      loading = this.loader.account(address as Hex).then((loaded) => this.keep(address, loaded))
      this.loadingAccounts.set(address, loading)
    }
    return loading
  }

  /** Reads the accounts neither known nor being read, in one round trip. */
  async prefetch(addresses: Iterable<string>): Promise<void> {
    const wanted = [...new Set(addresses)].filter((address) => !this.accounts.has(address) && !this.loadingAccounts.has(address))
    if (wanted.length === 0) return
    const batch = this.loader.accounts(wanted as Hex[])
    for (const [offset, address] of wanted.entries())
      this.loadingAccounts.set(
        address,
        batch.then((loaded) => this.keep(address, loaded[offset] ?? null)),
      )
    await Promise.all(wanted.map((address) => this.loadingAccounts.get(address)))
  }

  private keep(address: string, loaded: LoadedAccount): Entry {
    const entry: Entry =
      loaded === null
        ? { account: undefined, code: EMPTY }
        : {
            account: new Account(loaded.nonce, loaded.balance, KECCAK256_RLP, loaded.code === '0x' ? KECCAK256_NULL : hexToBytes(keccak256(loaded.code))),
            code: loaded.code === '0x' ? EMPTY : hexToBytes(loaded.code),
          }
    this.loadingAccounts.delete(address)
    this.accounts.set(address, entry)
    return entry
  }

  slot(address: string, slot: Uint8Array): Uint8Array | Promise<Uint8Array> {
    const key = storageKey(address, slot)
    const known = this.storage.get(key)
    if (known !== undefined) return known
    let loading = this.loadingStorage.get(key)
    if (loading === undefined) {
      loading = this.loader.storage(address as Hex, bytesToHex(slot)).then((value) => {
        const bytes = minimal(hexToBytes(value))
        this.loadingStorage.delete(key)
        if (!this.volatile.has(address)) this.storage.set(key, bytes)
        return bytes
      })
      this.loadingStorage.set(key, loading)
    }
    return loading
  }

  /** Makes a block's writes the state its child starts from. */
  apply(writes: ExecutionState): void {
    this.bound()
    for (const address of writes.cleared) for (const key of this.storage.keys()) if (key.startsWith(`${address}:`)) this.storage.delete(key)
    for (const [address, entry] of writes.accounts) this.accounts.set(address, { account: copy(entry.account), code: entry.code })
    for (const [key, value] of writes.storage) if (!this.volatile.has(key.slice(0, 42))) this.storage.set(key, value)
  }

  /**
   * Makes a sealed block's state diffs (the prestate tracer's, in diff mode, one per transaction, in order)
   * the state its child starts from: every account a transaction changed is, after it, its `pre` fields
   * overridden by its `post` ones (the tracer leaves out zero values and what did not change); an account in
   * `pre` but not in `post` was deleted; a slot in `pre` but not in `post` became zero. `reread` accounts
   * (paid outside transactions, by withdrawals) are forgotten and read again when needed.
   */
  applyDiffs(diffs: readonly PrestateDiff[], reread: Iterable<string> = []): void {
    this.bound()
    for (const { pre, post } of diffs) {
      for (const [key, before] of Object.entries(pre)) {
        const address = key.toLowerCase()
        const after = post[key]
        if (after === undefined) {
          this.accounts.set(address, { account: undefined, code: EMPTY })
          for (const slot of this.storage.keys()) if (slot.startsWith(`${address}:`)) this.storage.delete(slot)
          continue
        }
        for (const slot of Object.keys(before.storage ?? {})) if (after.storage?.[slot as Hex] === undefined) this.setSlot(address, slot as Hex, '0x')
      }
      for (const [key, after] of Object.entries(post)) {
        const address = key.toLowerCase()
        const before = pre[key] ?? {}
        const code = after.code ?? before.code ?? '0x'
        const account = new Account(
          BigInt(after.nonce ?? before.nonce ?? 0),
          BigInt(after.balance ?? before.balance ?? '0x0'),
          KECCAK256_RLP,
          code === '0x' ? KECCAK256_NULL : hexToBytes(keccak256(code)),
        )
        this.accounts.set(address, { account, code: code === '0x' ? EMPTY : hexToBytes(code) })
        for (const [slot, value] of Object.entries(after.storage ?? {})) this.setSlot(address, slot as Hex, value)
      }
    }
    for (const address of reread) this.accounts.delete(address.toLowerCase())
  }

  private setSlot(address: string, slot: Hex, value: Hex) {
    if (this.volatile.has(address)) return
    this.storage.set(storageKey(address, setLengthLeft(hexToBytes(slot), 32)), minimal(hexToBytes(value)))
  }

  /** Past `maxEntries` the cache is emptied; what is needed again is read again. */
  private bound() {
    if (this.size <= this.maxEntries) return
    this.accounts.clear()
    this.storage.clear()
  }
}

/**
 * One pending block's state for the EVM: the parent's (read through `ParentState`) under the block's own
 * writes, with a journal for the EVM's checkpoints (each call frame and transaction), so that a revert
 * undoes only what it must instead of copying the state at every checkpoint.
 */
export class ExecutionState implements StateManagerInterface {
  readonly accounts = new Map<string, Entry>()
  readonly storage = new Map<string, Uint8Array>()
  /** Accounts whose storage was wiped in this block (created over, or destroyed): the parent's slots no longer count. */
  readonly cleared = new Set<string>()
  /** Accounts written since `takeTouched` last ran. */
  private readonly touched = new Set<string>()
  private journal: (() => void)[] = []
  private checkpoints: number[] = []
  readonly originalStorageCache: OriginalStorageCache

  constructor(readonly parent: ParentState) {
    this.originalStorageCache = new OriginalStorageCache(this.getStorage.bind(this))
  }

  private async entry(address: string): Promise<Entry> {
    return this.accounts.get(address) ?? (await this.parent.account(address))
  }

  private setEntry(address: string, entry: Entry): void {
    const before = this.accounts.get(address)
    if (this.checkpoints.length > 0) this.journal.push(before === undefined ? () => this.accounts.delete(address) : () => this.accounts.set(address, before))
    this.accounts.set(address, entry)
    this.touched.add(address)
  }

  async getAccount(address: Address): Promise<Account | undefined> {
    return copy((await this.entry(address.toString())).account)
  }

  async putAccount(address: Address, account?: Account): Promise<void> {
    const key = address.toString()
    const entry = await this.entry(key)
    this.setEntry(key, { account: copy(account), code: entry.code })
  }

  async deleteAccount(address: Address): Promise<void> {
    const key = address.toString()
    this.setEntry(key, { account: undefined, code: EMPTY })
    this.markCleared(key)
  }

  async modifyAccountFields(address: Address, fields: AccountFields): Promise<void> {
    const account = (await this.getAccount(address)) ?? new Account()
    account.nonce = fields.nonce ?? account.nonce
    account.balance = fields.balance ?? account.balance
    account.storageRoot = fields.storageRoot ?? account.storageRoot
    account.codeHash = fields.codeHash ?? account.codeHash
    await this.putAccount(address, account)
  }

  async putCode(address: Address, value: Uint8Array): Promise<void> {
    const key = address.toString()
    const entry = await this.entry(key)
    const account = copy(entry.account) ?? new Account()
    account.codeHash = value.length === 0 ? KECCAK256_NULL : hexToBytes(keccak256(value))
    this.setEntry(key, { account, code: value })
  }

  async getCode(address: Address): Promise<Uint8Array> {
    return (await this.entry(address.toString())).code
  }

  async getCodeSize(address: Address): Promise<number> {
    return (await this.getCode(address)).length
  }

  async getStorage(address: Address, slot: Uint8Array): Promise<Uint8Array> {
    const owner = address.toString()
    const written = this.storage.get(storageKey(owner, slot))
    if (written !== undefined) return written
    if (this.cleared.has(owner)) return EMPTY
    return this.parent.slot(owner, slot)
  }

  async putStorage(address: Address, slot: Uint8Array, value: Uint8Array): Promise<void> {
    const key = storageKey(address.toString(), slot)
    const before = this.storage.get(key)
    if (this.checkpoints.length > 0) this.journal.push(before === undefined ? () => this.storage.delete(key) : () => this.storage.set(key, before))
    this.storage.set(key, minimal(value))
  }

  async clearStorage(address: Address): Promise<void> {
    this.markCleared(address.toString())
  }

  private markCleared(owner: string): void {
    const removed = [...this.storage].filter(([key]) => key.startsWith(`${owner}:`))
    for (const [key] of removed) this.storage.delete(key)
    const wasCleared = this.cleared.has(owner)
    this.cleared.add(owner)
    if (this.checkpoints.length > 0)
      this.journal.push(() => {
        if (!wasCleared) this.cleared.delete(owner)
        for (const [key, value] of removed) this.storage.set(key, value)
      })
  }

  async checkpoint(): Promise<void> {
    this.checkpoints.push(this.journal.length)
  }

  async commit(): Promise<void> {
    this.checkpoints.pop()
    // Outside every checkpoint nothing can be undone any more.
    if (this.checkpoints.length === 0) this.journal = []
  }

  async revert(): Promise<void> {
    const mark = this.checkpoints.pop() ?? 0
    while (this.journal.length > mark) this.journal.pop()!()
  }

  async flush(): Promise<void> {}

  clearCaches(): void {}

  async getStateRoot(): Promise<Uint8Array> {
    throw new Error('a pending block executed by flashgate has no state root')
  }

  async setStateRoot(): Promise<void> {
    throw new Error('a pending block executed by flashgate has no state root')
  }

  async hasStateRoot(): Promise<boolean> {
    return false
  }

  /** The state as it is now, for a call to run on (call.ts): the maps are copied, their values (never changed in place) shared. */
  shallowCopy(): ExecutionState {
    const copied = new ExecutionState(this.parent)
    for (const [key, entry] of this.accounts) copied.accounts.set(key, entry)
    for (const [key, value] of this.storage) copied.storage.set(key, value)
    for (const owner of this.cleared) copied.cleared.add(owner)
    return copied
  }

  /**
   * Balance and nonce of every account written since the last call (a transaction's changes, taken after it
   * ran); an account whose write was undone (a reverted call) reports the value it has now.
   */
  takeTouched(): Map<Hex, { balance: bigint; nonce: bigint }> {
    const out = new Map<Hex, { balance: bigint; nonce: bigint }>()
    for (const address of this.touched) {
      const entry = this.accounts.get(address) ?? this.parent.accounts.get(address)
      if (entry === undefined) continue
      out.set(address as Hex, { balance: entry.account?.balance ?? 0n, nonce: entry.account?.nonce ?? 0n })
    }
    this.touched.clear()
    return out
  }
}
