import { pino } from 'pino'
import { expect, test } from 'vitest'
import { flashblock } from '../../test/fixtures/flashblocks.js'
import { flashblockMessage } from './message.js'
import { createPendingState } from './state.js'

const logger = pino({ level: 'silent' })
const start = (blockNumber: number, payload: number, parentHash?: `0x${string}`) =>
  flashblockMessage.parse(flashblock({ index: 0, blockNumber, parentHash, payloadId: `0x${payload.toString(16).padStart(16, '0')}` }))

test('after the index is rewound below its head, blocks at the old heights are pre-confirmed again, and none built on the old branch is served', async () => {
  const state = createPendingState({ logger })
  await state.apply(start(10, 1))
  state.confirm({ number: 10, hash: `0x${'0a'.repeat(32)}`, transactionHashes: [] })
  await state.apply(start(11, 2, `0x${'0a'.repeat(32)}`))
  // At or below the sealed head, and the chain unchanged: a stale flashblock.
  expect(await state.apply(start(5, 3))).toBe('ignored')
  expect(state.blocks(10).map((block) => block.number)).toEqual([11])

  state.rewind(3)
  // Block 11 was built on the abandoned block 10: gone, whatever head a reader sees.
  expect(state.blocks(3)).toEqual([])
  expect(await state.apply(start(5, 4))).toBe('started')
  expect(state.blocks(4).map((block) => block.number)).toEqual([5])
})
