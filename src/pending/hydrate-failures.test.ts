// A flashblock's receipts that fail to hydrate while an earlier flashblock's are still being fetched: the
// failure is logged, the process goes on (it was an unhandled rejection, which ends a Node 20 process).
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pino } from 'pino'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { flashblock, signedTransfer } from '../../test/fixtures/flashblocks.js'
import { createPendingSource, createReceiptFetcher } from './hydrate.js'
import { flashblockMessage } from './message.js'
import { createPendingState } from './state.js'

let failing = ''
// An upstream that has not seen the first transaction yet (a null receipt: asked again for ~2 s) and answers
// HTTP 503 for the second (a provider's hiccup or rate limit).
const upstream = createServer((request, response) => {
  let body = ''
  request.on('data', (chunk) => (body += chunk))
  request.on('end', () => {
    const batch = JSON.parse(body) as { id: number; params: string[] }[]
    if (batch.some((call) => call.params[0] === failing)) return void response.writeHead(503).end()
    response.setHeader('content-type', 'application/json')
    response.end(JSON.stringify(batch.map((call) => ({ jsonrpc: '2.0', id: call.id, result: null }))))
  })
})

beforeAll(() => new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve)))
afterAll(() => new Promise<void>((resolve) => upstream.close(() => resolve())))

test('a hydration that fails while an earlier one is still retrying is logged, never an unhandled rejection', async () => {
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', onUnhandled)
  try {
    const [first, second] = await Promise.all([signedTransfer({ nonce: 0 }), signedTransfer({ nonce: 1 })])
    failing = second.hash
    const warnings: { msg: string; block?: number }[] = []
    const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line)) })
    const state = createPendingState({ logger, staleAfterMs: 60_000 })
    const rpcUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
    createPendingSource({ mode: 'hydrate', state, fetchReceipts: createReceiptFetcher({ rpcUrl, request: async () => null as never }), logger })
    void state.apply(flashblockMessage.parse(flashblock({ index: 0, blockNumber: 10, format: 'current', transactions: [first] })))
    await new Promise((resolve) => setTimeout(resolve, 100))
    void state.apply(flashblockMessage.parse(flashblock({ index: 1, blockNumber: 10, format: 'current', transactions: [second] })))
    // The first flashblock's retries run for about 2 s; the second's failure comes well before they end.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    expect(unhandled).toEqual([])
    expect(warnings.filter((line) => line.msg === 'could not hydrate pre-confirmed receipts').map((line) => line.block)).toEqual([10])
    // Both transactions are still pending, their receipts unknown.
    const [block] = state.blocks(9)
    expect(block?.transactions.map((transaction) => transaction.hash)).toEqual([first.hash, second.hash])
    expect(block?.receipts).toEqual([null, null])
  } finally {
    process.off('unhandledRejection', onUnhandled)
  }
})

test('a receipts listener that throws is logged, and the receipts of the next flashblocks are still announced', async () => {
  const errors: { msg: string; block?: number }[] = []
  const logger = pino({ level: 'error' }, { write: (line: string) => errors.push(JSON.parse(line)) })
  const state = createPendingState({ logger, staleAfterMs: 60_000 })
  const announced: string[] = []
  let calls = 0
  state.events.on('receipts', (_block, receipts) => {
    if (calls++ === 0) throw new Error('a listener failed')
    announced.push(...receipts.map((receipt) => receipt.transactionHash))
  })
  const transfers = await Promise.all([0, 1, 2].map((nonce) => signedTransfer({ nonce })))
  for (const [index, transfer] of transfers.entries())
    await state.apply(flashblockMessage.parse(flashblock({ index, blockNumber: 10, format: 'legacy', transactions: [transfer] })))
  await new Promise((resolve) => setTimeout(resolve, 50))
  expect(errors.map((line) => line.msg)).toEqual(['could not publish pre-confirmed receipts'])
  expect(announced).toEqual([transfers[1]!.hash, transfers[2]!.hash])
})
