import { pino } from 'pino'
import type { Hash, Hex } from 'viem'
import { serializeTransaction } from 'viem/op-stack'
import { expect, test } from 'vitest'
import { flashblock } from '../../test/fixtures/flashblocks.js'
import { flashblockMessage } from '../pending/message.js'
import { createPendingState, type Hydrate } from '../pending/state.js'
import { formatPendingTransaction } from './transaction.js'

// An OP deposit's envelope has no nonce: the node's execution gives it one (the depositor's account nonce).
const L1_INFO_DEPOSIT = serializeTransaction({
  type: 'deposit',
  from: '0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001',
  to: '0x4200000000000000000000000000000000000015',
  sourceHash: `0x${'ab'.repeat(32)}`,
  mint: 0n,
  value: 0n,
  gas: 1_000_000n,
  isSystemTx: false,
  data: '0x1234',
}) as Hex

test('a pre-confirmed deposit shows the nonce and receipt version its receipt gives, as an OP node shows them; the envelope alone until then', async () => {
  let answer = false
  const hydrate: Hydrate = async (hashes: Hash[]) =>
    hashes.map((hash) =>
      answer
        ? {
            type: '0x7e',
            transactionHash: hash,
            transactionIndex: '0x0',
            blockNumber: '0xb',
            from: '0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001',
            to: '0x4200000000000000000000000000000000000015',
            status: '0x1',
            cumulativeGasUsed: '0xb71b',
            gasUsed: '0xb71b',
            effectiveGasPrice: '0x0',
            logs: [],
            logsBloom: `0x${'00'.repeat(256)}`,
            contractAddress: null,
            depositNonce: '0x1c4d3',
            depositReceiptVersion: '0x1',
          }
        : null,
    )
  const state = createPendingState({ logger: pino({ level: 'silent' }), hydrate })
  await state.apply(flashblockMessage.parse(flashblock({ index: 0, blockNumber: 11, format: 'current', extraRaw: [L1_INFO_DEPOSIT] })))
  await state.settled()
  const [block] = state.blocks(10)
  expect(formatPendingTransaction(block!, 0)).toMatchObject({ type: '0x7e', nonce: '0x0', sourceHash: `0x${'ab'.repeat(32)}` })
  expect(formatPendingTransaction(block!, 0)).not.toHaveProperty('depositReceiptVersion')

  answer = true
  await state.apply(
    flashblockMessage.parse(flashblock({ index: 0, blockNumber: 11, payloadId: '0x00000000000000d1', format: 'current', extraRaw: [L1_INFO_DEPOSIT] })),
  )
  await state.settled()
  const [hydrated] = state.blocks(10)
  expect(formatPendingTransaction(hydrated!, 0)).toMatchObject({ type: '0x7e', nonce: '0x1c4d3', depositReceiptVersion: '0x1', blockHash: null })
})
