import { type Hash, type Hex, numberToHex } from 'viem'
import type { JsonRpcRequest, JsonRpcResponse } from './anvil-client.js'

// `debug_traceBlockByHash` with the prestate tracer in diff mode, the call flashgate's ingester makes for
// every block to learn which balances and nonces moved. anvil answers it by re-executing the block's prefix
// for every transaction: quadratic, 5 s for a block of 250 transactions, while a Base node (reth) takes a
// fraction of a second; a gateway could not follow a Base-shaped devnet. The same diffs come from one
// `trace_replayBlockTransactions` with `stateDiff` (one pass, ~70 ms for 250 transactions) and the parent
// block's state of the accounts it names: the answer is rebuilt from those, field for field the one anvil
// gives (block-trace.test.ts). Anything else, or anything unexpected, is left to anvil.
// https://geth.ethereum.org/docs/developers/evm-tracing/built-in-tracers#prestate-tracer

type Quantity = Hex
/** One field of an account in a parity `stateDiff`: unchanged, born, died, or changed. */
type FieldDiff<T> = '=' | { '+': T } | { '-': T } | { '*': { from: T; to: T } }
type AccountDiff = { balance: FieldDiff<Quantity>; nonce: FieldDiff<Quantity>; code: FieldDiff<Hex>; storage: Record<Hash, FieldDiff<Hash>> }
type Replay = { transactionHash: Hash; stateDiff: Record<string, AccountDiff> | null }

/** An account as the prestate tracer prints it: zero nonce, empty code and storage left out. */
type TracedAccount = { balance?: Quantity; nonce?: number; code?: Hex; storage?: Record<Hash, Hash> }
type AccountState = { balance: bigint; nonce: bigint; code: Hex }

type Batch = (requests: { method: string; params: unknown[] }[]) => Promise<JsonRpcResponse[]>

/** Whether this is a request `traceBlockPrestateDiff` answers (other tracers and options are anvil's). */
export function isBlockPrestateDiffTrace(request: JsonRpcRequest): boolean {
  if (request.method !== 'debug_traceBlockByHash' || !Array.isArray(request.params)) return false
  const [hash, options] = request.params as [unknown, { tracer?: unknown; tracerConfig?: Record<string, unknown> } | undefined]
  if (typeof hash !== 'string' || options === undefined || options.tracer !== 'prestateTracer') return false
  const config = options.tracerConfig ?? {}
  return config.diffMode === true && Object.keys(config).length === 1 && Object.keys(options).every((key) => key === 'tracer' || key === 'tracerConfig')
}

/**
 * The answer to a `debug_traceBlockByHash` prestate diff from anvil at `anvilRpcUrl`, built in one pass;
 * `undefined` when anvil should answer itself (an unknown block, a replay that does not match the block).
 * Sealed blocks only: their state does not change, so reading it beside the sequencer's ticks is safe.
 */
export async function traceBlockPrestateDiff(request: JsonRpcRequest, anvilRpcUrl: string): Promise<JsonRpcResponse | undefined> {
  const batch = createBatch(anvilRpcUrl)
  const [hash] = request.params as [Hash]
  const [blockAnswer] = await batch([{ method: 'eth_getBlockByHash', params: [hash, false] }])
  const block = blockAnswer?.result as { number: Quantity; transactions: Hash[] } | null | undefined
  if (!block || block.transactions.length === 0) return undefined
  const [replayAnswer] = await batch([{ method: 'trace_replayBlockTransactions', params: [block.number, ['stateDiff']] }])
  const replays = replayAnswer?.result as Replay[] | undefined
  if (!Array.isArray(replays) || replays.length !== block.transactions.length) return undefined
  if (replays.some((replay, index) => replay.transactionHash !== block.transactions[index] || replay.stateDiff === null)) return undefined

  const addresses = [...new Set(replays.flatMap((replay) => Object.keys(replay.stateDiff!)))]
  const parent = numberToHex(BigInt(block.number) - 1n)
  const reads = await batch(
    addresses.flatMap((address) => [
      { method: 'eth_getBalance', params: [address, parent] },
      { method: 'eth_getTransactionCount', params: [address, parent] },
      { method: 'eth_getCode', params: [address, parent] },
    ]),
  )
  if (reads.some((read) => typeof read.result !== 'string')) return undefined
  const state = new Map<string, AccountState>(
    addresses.map((address, index) => [
      address,
      { balance: BigInt(reads[3 * index]!.result as Hex), nonce: BigInt(reads[3 * index + 1]!.result as Hex), code: reads[3 * index + 2]!.result as Hex },
    ]),
  )
  const result = replays.map((replay) => ({ txHash: replay.transactionHash, result: transactionDiff(replay.stateDiff!, state) }))
  return { jsonrpc: '2.0', id: request.id ?? null, result }
}

/** One transaction's `{pre, post}`, advancing `state` past it. */
function transactionDiff(stateDiff: Record<string, AccountDiff>, state: Map<string, AccountState>) {
  const pre: Record<string, TracedAccount> = {}
  const post: Record<string, TracedAccount> = {}
  for (const [address, diff] of Object.entries(stateDiff)) {
    const current = state.get(address)!
    const born = typeof diff.balance === 'object' && '+' in diff.balance
    const died = typeof diff.balance === 'object' && '-' in diff.balance
    const storageBefore: Record<Hash, Hash> = {}
    const storageAfter: Record<Hash, Hash> = {}
    for (const [slot, change] of Object.entries(diff.storage) as [Hash, FieldDiff<Hash>][]) {
      const before = valueBefore(change)
      const after = valueAfter(change)
      // Zero slots are left out on both sides, as anvil prints them.
      if (before !== undefined && BigInt(before) !== 0n) storageBefore[slot] = before
      if (after !== undefined && BigInt(after) !== 0n) storageAfter[slot] = after
    }
    if (!born) pre[address] = traced(current, storageBefore)
    const next: AccountState = {
      balance: BigInt(valueAfter(diff.balance) ?? current.balance),
      nonce: BigInt(valueAfter(diff.nonce) ?? current.nonce),
      code: valueAfter(diff.code) ?? current.code,
    }
    if (!died) {
      const changed: TracedAccount = {}
      if (next.balance !== current.balance) changed.balance = numberToHex(next.balance)
      if (next.nonce !== current.nonce && next.nonce !== 0n) changed.nonce = Number(next.nonce)
      if (next.code !== current.code && next.code !== '0x') changed.code = next.code
      if (Object.keys(storageAfter).length > 0) changed.storage = storageAfter
      post[address] = changed
    }
    state.set(address, died ? { balance: 0n, nonce: 0n, code: '0x' } : next)
  }
  return { pre, post }
}

function traced(account: AccountState, storage: Record<Hash, Hash>): TracedAccount {
  const printed: TracedAccount = { balance: numberToHex(account.balance) }
  if (account.nonce !== 0n) printed.nonce = Number(account.nonce)
  if (account.code !== '0x') printed.code = account.code
  if (Object.keys(storage).length > 0) printed.storage = storage
  return printed
}

function valueBefore<T>(change: FieldDiff<T>): T | undefined {
  if (change === '=') return undefined
  if ('*' in change) return change['*'].from
  if ('-' in change) return change['-']
  return undefined
}

function valueAfter<T>(change: FieldDiff<T>): T | undefined {
  if (change === '=') return undefined
  if ('*' in change) return change['*'].to
  if ('+' in change) return change['+']
  return undefined
}

function createBatch(url: string): Batch {
  return async (requests) => {
    if (requests.length === 0) return []
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(requests.map((request, id) => ({ jsonrpc: '2.0', id, ...request }))),
    })
    const answers = (await response.json()) as JsonRpcResponse[]
    return answers.sort((a, b) => Number(a.id) - Number(b.id))
  }
}
