import { setTimeout as sleep } from 'node:timers/promises'
import { type Address, type Hash, type Hex, encodeFunctionData, numberToHex } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { isBlockPrestateDiffTrace, traceBlockPrestateDiff } from './block-trace.js'
import { TOKEN_DEPLOY_BYTECODE, tokenAbi } from './contracts.js'
import { type Devnet, startDevnet } from './devnet.js'

/** Small profile blocks: anvil's own trace of each, the reference, stays well under a second. */
const PROFILE_TRANSACTIONS_PER_BLOCK = 30
const PRESTATE_DIFF = { tracer: 'prestateTracer', tracerConfig: { diffMode: true } } as const
const FRESH_ADDRESS: Address = '0x00000000000000000000000000000000000fa11e'
const POLL_MS = 50

async function rpc<T>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  })
  const body = (await response.json()) as { result?: T; error?: { message: string } }
  if (body.error) throw new Error(`${method}: ${body.error.message}`)
  return body.result as T
}

describe('debug_traceBlockByHash with the prestate diff tracer', () => {
  let devnet: Devnet
  /** Sealed blocks with profile traffic and, in one of them, a contract creation, a payment to a new address and a revert. */
  const blocks: Hash[] = []

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0, flashblocksPort: 0, profile: 'base', profileTransactionsPerBlock: PROFILE_TRANSACTIONS_PER_BLOCK })
    const [from] = await rpc<Address[]>(devnet.rpcUrl, 'eth_accounts')
    const token = devnet.profile!.contracts.tokens[0]!
    const sent = [
      await rpc<Hash>(devnet.rpcUrl, 'eth_sendTransaction', [{ from, data: TOKEN_DEPLOY_BYTECODE, gas: numberToHex(1_000_000) }]),
      await rpc<Hash>(devnet.rpcUrl, 'eth_sendTransaction', [{ from, to: FRESH_ADDRESS, value: '0x1234' }]),
      await rpc<Hash>(devnet.rpcUrl, 'eth_sendTransaction', [
        { from, to: token, data: encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [FRESH_ADDRESS, 0n] }), gas: numberToHex(100_000) },
      ]),
    ]
    let sealedIn: number | undefined
    while (sealedIn === undefined) {
      const receipt = await rpc<{ blockHash: Hash; blockNumber: Hex } | null>(devnet.rpcUrl, 'eth_getTransactionReceipt', [sent.at(-1)])
      if (receipt !== null && !/^0x0+$/.test(receipt.blockHash)) sealedIn = Number(receipt.blockNumber)
      else await sleep(POLL_MS)
    }
    while (Number(await rpc<Hex>(devnet.rpcUrl, 'eth_blockNumber')) < sealedIn + 1) await sleep(POLL_MS)
    // The set-up block (block 1, 405 transactions) is left out: anvil's own trace of it takes over ten seconds.
    for (let number = 2; number <= sealedIn + 1; number++)
      blocks.push((await rpc<{ hash: Hash }>(devnet.rpcUrl, 'eth_getBlockByNumber', [numberToHex(number), false])).hash)
  }, 60_000)

  afterAll(async () => {
    await devnet?.stop()
  })

  test("the answer built in one pass equals anvil's own, field for field, and is the devnet's answer", async () => {
    let transactions = 0
    for (const hash of blocks) {
      const request = { jsonrpc: '2.0' as const, id: 1, method: 'debug_traceBlockByHash', params: [hash, PRESTATE_DIFF] }
      const rebuilt = (await traceBlockPrestateDiff(request, devnet.anvilRpcUrl))?.result as unknown[]
      const anvils = await rpc<unknown[]>(devnet.anvilRpcUrl, 'debug_traceBlockByHash', [hash, PRESTATE_DIFF])
      expect(rebuilt, `block ${hash}`).toStrictEqual(anvils)
      expect(await rpc<unknown[]>(devnet.rpcUrl, 'debug_traceBlockByHash', [hash, PRESTATE_DIFF])).toStrictEqual(anvils)
      transactions += rebuilt.length
    }
    expect(transactions).toBeGreaterThan(PROFILE_TRANSACTIONS_PER_BLOCK)
  })

  test('an unknown block and other tracers get anvil’s own answers', async () => {
    const unknown = `0x${'ab'.repeat(32)}`
    await expect(rpc(devnet.rpcUrl, 'debug_traceBlockByHash', [unknown, PRESTATE_DIFF])).rejects.toThrow()
    const callTracer = await rpc<unknown[]>(devnet.rpcUrl, 'debug_traceBlockByHash', [blocks[0], { tracer: 'callTracer' }])
    expect(callTracer).toStrictEqual(await rpc<unknown[]>(devnet.anvilRpcUrl, 'debug_traceBlockByHash', [blocks[0], { tracer: 'callTracer' }]))
  })

  test.each([
    [{ tracer: 'prestateTracer', tracerConfig: { diffMode: true } }, true],
    [{ tracer: 'prestateTracer', tracerConfig: { diffMode: false } }, false],
    [{ tracer: 'prestateTracer' }, false],
    [{ tracer: 'prestateTracer', tracerConfig: { diffMode: true, disableCode: true } }, false],
    [{ tracer: 'prestateTracer', tracerConfig: { diffMode: true }, timeout: '10s' }, false],
    [{ tracer: 'callTracer' }, false],
  ])('only the plain prestate diff is rebuilt: %j → %s', (options, rebuilt) => {
    expect(isBlockPrestateDiffTrace({ jsonrpc: '2.0', id: 1, method: 'debug_traceBlockByHash', params: [`0x${'00'.repeat(32)}`, options] })).toBe(rebuilt)
  })
})
