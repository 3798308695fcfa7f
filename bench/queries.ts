import { type Address, numberToHex } from 'viem'
import { CUSTOM_TOPIC } from '../src/devnet/contracts.js'
import type { Random } from '../test/fixtures/random.js'
import type { BenchChain } from './chain.js'
import type { RpcCall } from './rpc.js'

/**
 * Request bodies per method for the main figures: more than a 10 s run sends, so that (chance repeats
 * aside) every request is a new question and flashgate's answer cache (src/resolvers/cache.ts) cannot
 * answer it; anvil has no such cache.
 */
export const COLD_POOL_SIZE = 100_000
/** A small pool cycled over and over: after its first pass flashgate answers from its cache. */
export const HOT_POOL_SIZE = 100

export const BENCH_METHODS = ['eth_getLogs', 'eth_getBlockReceipts', 'eth_getTransactionCount', 'eth_getBalance'] as const
export type BenchMethod = (typeof BENCH_METHODS)[number]

/**
 * `eth_getLogs` with one token address and the rare Custom topic0 over `rangeBlocks` blocks: the
 * selective shape of the headline (tens to a few hundred logs per answer).
 */
export function addressTopicQuery(random: Random, chain: BenchChain, rangeBlocks: number): RpcCall {
  const from = random.int(chain.firstTrafficBlock, chain.head - rangeBlocks + 1)
  return {
    method: 'eth_getLogs',
    params: [{ address: random.pick(chain.tokens), topics: [CUSTOM_TOPIC], fromBlock: numberToHex(from), toBlock: numberToHex(from + rangeBlocks - 1) }],
  }
}

/**
 * Precomputed, valid params for each of the four methods, at random blocks over the whole chain. Accounts
 * are half senders (nonce and balance change every few blocks), half receivers (balance only).
 */
export function buildPools(random: Random, chain: BenchChain, rangeBlocks: number, size: number): Record<BenchMethod, RpcCall[]> {
  const block = () => numberToHex(random.int(chain.firstTrafficBlock, chain.head))
  const account = (): Address => (random.chance(0.5) ? random.pick(chain.senders) : random.pick(chain.users))
  const pool = (make: () => RpcCall) => Array.from({ length: size }, make)
  return {
    eth_getLogs: pool(() => addressTopicQuery(random, chain, rangeBlocks)),
    eth_getBlockReceipts: pool(() => ({ method: 'eth_getBlockReceipts', params: [block()] })),
    eth_getTransactionCount: pool(() => ({ method: 'eth_getTransactionCount', params: [account(), block()] })),
    eth_getBalance: pool(() => ({ method: 'eth_getBalance', params: [account(), block()] })),
  }
}

/** JSON-RPC 2.0 request bodies, as sent on the wire. */
export function toBodies(calls: RpcCall[]): string[] {
  return calls.map((call, index) => JSON.stringify({ jsonrpc: '2.0', id: index + 1, method: call.method, params: call.params }))
}
