import { request as httpRequest } from 'node:http'
import { gunzipSync, inflateSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

// The JSON-RPC call memo (src/jsonrpc/memo.ts): results of calls fixed by explicit indexed block numbers are
// kept as text and given again without running the call. These tests hold it to the node's answers through
// new blocks and a reorg, and to each endpoint's own limits.

const PUBLIC_RANGE = 3
const DEDICATED_RANGE = 50

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let account: string

const hex = (n: number) => `0x${n.toString(16)}`

/** One call, answered as text: the memo's answers are compared byte for byte. */
async function post(url: string, method: string, params: unknown[], id: unknown = 1): Promise<{ text: string; body: any }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
  })
  const text = await response.text()
  return { text, body: JSON.parse(text) }
}

/** The result's JSON text inside an answer, as written. */
const resultText = (text: string) => text.slice(text.indexOf('"result":') + '"result":'.length, -1)

async function memoHits(): Promise<Record<'public' | 'dedicated', number>> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text()
  const hits = (policy: string) => Number(text.match(new RegExp(`^flashgate_jsonrpc_memo_hits_total\\{policy="${policy}"\\} (\\d+)`, 'm'))?.[1] ?? Number.NaN)
  return { public: hits('public'), dedicated: hits('dedicated') }
}

async function head(): Promise<number> {
  return Number.parseInt(await anvilCall<string>(anvil.rpcUrl, 'eth_blockNumber'), 16)
}

beforeAll(async () => {
  anvil = await startAnvil()
  const chain = await generateChain(anvil.rpcUrl, { seed: 71, blocks: 12, txPerBlock: [2, 5] })
  account = chain.senders[0]!
  database = await createTestDatabase()
  gateway = await startTestGateway({
    upstreamRpc: anvil.rpcUrl,
    databaseUrl: database.databaseUrl,
    publicMaxBlockRange: PUBLIC_RANGE,
    maxBlockRange: DEDICATED_RANGE,
  })
  await waitForSameHead(gateway, anvil.rpcUrl)
})

afterAll(async () => {
  await gateway?.stop()
  await database?.drop()
  await anvil?.stop()
})

describe('the JSON-RPC call memo', () => {
  test('a call fixed by explicit indexed blocks is answered from the memo the second time: the same result text, its own id, the node’s answer', async () => {
    const top = await head()
    const calls: [string, unknown[]][] = [
      ['eth_getBalance', [account, hex(top - 2)]],
      ['eth_getTransactionCount', [account, hex(top - 1)]],
      ['eth_getBlockByNumber', [hex(top - 3), true]],
      ['eth_getBlockReceipts', [hex(top - 4)]],
      ['eth_getLogs', [{ fromBlock: '0x1', toBlock: hex(top) }]],
      ['eth_chainId', []],
    ]
    const before = await memoHits()
    for (const [method, params] of calls) {
      const first = await post(gateway.dedicatedUrl, method, params, 1)
      const again = await post(gateway.dedicatedUrl, method, params, 'again')
      expect(first.body.result, method).toBeDefined()
      expect(again.body.id).toBe('again')
      expect(resultText(again.text), method).toBe(resultText(first.text))
      expect(again.body.result, method).toEqual(await anvilCall(anvil.rpcUrl, method, params))
    }
    const after = await memoHits()
    expect(after.dedicated - before.dedicated).toBe(calls.length)
    expect(after.public).toBe(before.public)
  })

  test('in a batch, and beside an id JSON cannot hold as a number, a memoised result is answered as it was', async () => {
    const top = await head()
    const params = [account, hex(top - 5)]
    const expected = await anvilCall(anvil.rpcUrl, 'eth_getBalance', params)
    await post(gateway.url, 'eth_getBalance', params)
    const response = await fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `[{"jsonrpc":"2.0","id":9007199254740993,"method":"eth_getBalance","params":${JSON.stringify(params)}},{"jsonrpc":"2.0","id":2,"method":"eth_getBalance","params":${JSON.stringify(params)}}]`,
    })
    const text = await response.text()
    expect(text).toBe(
      `[{"jsonrpc":"2.0","id":9007199254740993,"result":${JSON.stringify(expected)}},{"jsonrpc":"2.0","id":2,"result":${JSON.stringify(expected)}}]`,
    )
  })

  test('a large memoised result goes to a client accepting deflate as it was kept deflated, and inflates to the node’s answer', async () => {
    const top = await head()
    const params = [{ fromBlock: '0x1', toBlock: hex(top - 1) }]
    const ask = () =>
      fetch(gateway.dedicatedUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'accept-encoding': 'deflate' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'eth_getLogs', params }),
      })
    const first = await ask()
    const firstText = await first.text()
    expect(firstText.length).toBeGreaterThan(1024)
    const again = await ask()
    expect(again.headers.get('content-encoding')).toBe('deflate')
    const body = (await again.json()) as { id: number; result: unknown }
    expect(body.id).toBe(5)
    expect(body.result).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getLogs', params))
    expect(JSON.stringify(body)).toBe(firstText)
  })

  test('the same kept result goes to a client accepting only gzip (ethers) in a gzip member around the same DEFLATE blocks', async () => {
    const top = await head()
    const body = JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'eth_getLogs', params: [{ fromBlock: '0x1', toBlock: hex(top - 1) }] })
    // The body as it came on the wire (fetch would decompress it).
    const onTheWire = (coding: string) =>
      new Promise<{ coding: string | undefined; bytes: Buffer }>((resolve, reject) => {
        const headers = { 'content-type': 'application/json', 'accept-encoding': coding }
        const request = httpRequest(gateway.dedicatedUrl, { method: 'POST', headers, agent: false }, (response) => {
          const chunks: Buffer[] = []
          response.on('data', (chunk: Buffer) => chunks.push(chunk))
          response.on('end', () => resolve({ coding: response.headers['content-encoding'], bytes: Buffer.concat(chunks) }))
        })
        request.on('error', reject)
        request.end(body)
      })
    await onTheWire('deflate')
    const deflated = await onTheWire('deflate')
    const gzipped = await onTheWire('gzip')
    expect([deflated.coding, gzipped.coding]).toEqual(['deflate', 'gzip'])
    expect(gunzipSync(gzipped.bytes).toString()).toBe(inflateSync(deflated.bytes).toString())
    // Between their headers (2 and 10 bytes) and trailers (4 and 8), the same blocks: nothing compressed again.
    expect(gzipped.bytes.subarray(10, -8)).toEqual(deflated.bytes.subarray(2, -4))
  })

  test('logs by a block hash the index holds are memoised (the polling of ethers and viem’s watchers); a hash it does not hold yet is asked again', async () => {
    const top = await head()
    const blockHash = (await anvilCall<{ hash: string }>(anvil.rpcUrl, 'eth_getBlockByNumber', [hex(top), false])).hash
    const unknown = [{ blockHash: `0x${'ab'.repeat(32)}` }]
    const before = await memoHits()
    const first = await post(gateway.url, 'eth_getLogs', [{ blockHash }])
    expect(first.body.result).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getLogs', [{ blockHash }]))
    expect(first.body.result.length).toBeGreaterThan(0)
    const again = await post(gateway.url, 'eth_getLogs', [{ blockHash }], 'second')
    expect(resultText(again.text)).toBe(resultText(first.text))
    expect(again.body.id).toBe('second')
    expect((await memoHits()).public).toBe(before.public + 1)

    for (let round = 0; round < 2; round++) expect((await post(gateway.url, 'eth_getLogs', unknown)).body.error).toBeDefined()
    expect((await memoHits()).public).toBe(before.public + 1)
  })

  test('pending, safe and blocks above the head are never memoised: their answers follow the chain', async () => {
    const top = await head()
    const before = await memoHits()
    for (let round = 0; round < 2; round++) {
      await post(gateway.url, 'eth_getTransactionCount', [account, 'pending'])
      await post(gateway.url, 'eth_getBalance', [account, 'safe'])
      await post(gateway.url, 'eth_getLogs', [{ fromBlock: hex(top - 1), toBlock: 'pending' }])
      await post(gateway.url, 'eth_getLogs', [{ fromBlock: hex(top - 1), toBlock: hex(top + 1) }])
      expect((await post(gateway.url, 'eth_getBlockByNumber', [hex(top + 1), false])).body.result).toBeNull()
      expect((await post(gateway.url, 'eth_getBalance', [account, hex(top + 1)])).body.error).toBeDefined()
    }
    expect((await memoHits()).public).toBe(before.public)

    // The block above the head arrives: its answers are the node's, not anything kept from before.
    await generateChain(anvil.rpcUrl, { seed: 72, blocks: 1, txPerBlock: [3, 3] })
    await waitForSameHead(gateway, anvil.rpcUrl)
    for (const [method, params] of [
      ['eth_getBalance', [account, hex(top + 1)]],
      ['eth_getBlockByNumber', [hex(top + 1), false]],
      ['eth_getBalance', [account, 'latest']],
      ['eth_getLogs', [{ fromBlock: hex(top - 1), toBlock: hex(top + 1) }]],
    ] as [string, unknown[]][])
      expect((await post(gateway.url, method, params)).body.result, method).toEqual(await anvilCall(anvil.rpcUrl, method, params))
  })

  test('latest is memoised with the head it meant: the next head answers anew, as the node does', async () => {
    const calls: [string, unknown[]][] = [
      ['eth_getBalance', [account, 'latest']],
      ['eth_getBlockByNumber', ['latest', false]],
      ['eth_getLogs', [{ fromBlock: 'latest' }]],
    ]
    for (let block = 0; block < 2; block++) {
      const before = await memoHits()
      for (const [method, params] of calls) {
        const first = await post(gateway.url, method, params)
        const again = await post(gateway.url, method, params)
        expect(again.text, method).toBe(first.text)
        expect(again.body.result, method).toEqual(await anvilCall(anvil.rpcUrl, method, params))
      }
      // Each call's repeat (and the first of it too, after the first head) came from the memo, or was run again
      // when the view of the head was being reloaded: never more hits than calls made.
      const hits = (await memoHits()).public - before.public
      expect(hits).toBeGreaterThan(0)
      expect(hits).toBeLessThanOrEqual(calls.length * 2)
      await generateChain(anvil.rpcUrl, { seed: 75 + block, blocks: 1, txPerBlock: [2, 3] })
      await waitForSameHead(gateway, anvil.rpcUrl)
    }
  })

  test('errors are not memoised, and one endpoint’s memo never answers for the other’s limits', async () => {
    const top = await head()
    const before = await memoHits()
    for (let round = 0; round < 2; round++) {
      expect((await post(gateway.dedicatedUrl, 'eth_getLogs', [{ fromBlock: hex(top), toBlock: hex(top - 1) }])).body.error).toBeDefined()
      expect((await post(gateway.dedicatedUrl, 'eth_getBalance', ['0x1234', hex(top)])).body.error?.code).toBe(-32602)
    }
    expect((await memoHits()).dedicated).toBe(before.dedicated)

    // A range the dedicated endpoint allows and has memoised stays over the public endpoint's limit.
    const wide = [{ fromBlock: hex(top - PUBLIC_RANGE - 2), toBlock: hex(top) }]
    const dedicated = await post(gateway.dedicatedUrl, 'eth_getLogs', wide)
    expect((await post(gateway.dedicatedUrl, 'eth_getLogs', wide)).text).toBe(dedicated.text)
    expect(dedicated.body.result).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getLogs', wide))
    expect((await post(gateway.url, 'eth_getLogs', wide)).body.error?.message).toMatch(/range/)
  })

  test('a reorg empties the memo: the replaced blocks are answered from the new branch', async () => {
    const ancestor = await head()
    const snapshot = await anvilCall<string>(anvil.rpcUrl, 'evm_snapshot')
    await generateChain(anvil.rpcUrl, { seed: 73, blocks: 2, txPerBlock: [3, 4] })
    await waitForSameHead(gateway, anvil.rpcUrl)
    const calls: [string, unknown[]][] = [
      ['eth_getBlockByNumber', [hex(ancestor + 1), false]],
      ['eth_getBalance', [account, hex(ancestor + 2)]],
      ['eth_getLogs', [{ fromBlock: hex(ancestor + 1), toBlock: hex(ancestor + 2) }]],
    ]
    const orphanedHash = (await anvilCall<{ hash: string }>(anvil.rpcUrl, 'eth_getBlockByNumber', [hex(ancestor + 1), false])).hash
    const byOrphanedHash = [{ blockHash: orphanedHash }]
    const orphaned = []
    for (const [method, params] of calls) {
      await post(gateway.dedicatedUrl, method, params)
      orphaned.push((await post(gateway.dedicatedUrl, method, params)).body.result)
    }
    const hitsBefore = (await memoHits()).dedicated
    await post(gateway.dedicatedUrl, 'eth_getLogs', byOrphanedHash)
    const kept = (await post(gateway.dedicatedUrl, 'eth_getLogs', byOrphanedHash)).body.result
    expect(kept).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getLogs', byOrphanedHash))
    expect((await memoHits()).dedicated).toBe(hitsBefore + 1)

    await anvilCall(anvil.rpcUrl, 'evm_revert', [snapshot])
    await generateChain(anvil.rpcUrl, { seed: 74, blocks: 3, txPerBlock: [1, 2] })
    await waitForSameHead(gateway, anvil.rpcUrl)
    for (const [index, [method, params]] of calls.entries()) {
      const answer = (await post(gateway.dedicatedUrl, method, params)).body.result
      expect(answer, method).toEqual(await anvilCall(anvil.rpcUrl, method, params))
      // The block itself is another one; the state and logs in it may happen to be the same.
      if (method === 'eth_getBlockByNumber') expect(answer).not.toEqual(orphaned[index])
    }
    // The replaced block's hash names no block now: an error, as from the node, not the logs kept before.
    await expect(anvilCall(anvil.rpcUrl, 'eth_getLogs', byOrphanedHash)).rejects.toThrow()
    expect((await post(gateway.dedicatedUrl, 'eth_getLogs', byOrphanedHash)).body.error).toBeDefined()
  })
})
