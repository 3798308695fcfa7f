import { expect, test } from 'vitest'
import type { ChainEvents } from '../resolvers/index.js'
import { matchesFilter } from '../resolvers/pending.js'
import { createSubscriptions } from './subscriptions.js'

/** The chain's events as the resolvers give them, counting who listens (no chain needed to subscribe). */
function countedEvents() {
  let listeners = 0
  const events: ChainEvents = {
    subscribe() {
      listeners++
      return () => listeners--
    },
  }
  return { events, listeners: () => listeners }
}

test('a subscribe that comes after its connection closed (a batch running past the disconnect) adds no listener', () => {
  const { events, listeners } = countedEvents()
  const subscriptions = createSubscriptions({ chainEvents: events, notify: () => {} })
  subscriptions.subscribe(['logs', { address: `0x${'11'.repeat(20)}` }])
  expect(listeners()).toBe(1)
  subscriptions.close()
  expect(listeners()).toBe(0)
  expect(() => subscriptions.subscribe(['logs', {}])).toThrow(/connection is closed/)
  expect(() => subscriptions.subscribe(['newHeads'])).toThrow(/connection is closed/)
  expect(listeners()).toBe(0)
})

test('a filter of 1,000 addresses and 1,000 alternatives per topic matches exactly the logs it names', () => {
  const word = (n: number) => `0x${n.toString(16).padStart(64, '0')}` as const
  const address = (n: number) => `0x${n.toString(16).padStart(40, '0')}` as const
  const filter = {
    addresses: Array.from({ length: 1_000 }, (_, n) => address(n * 2)),
    topics: [Array.from({ length: 1_000 }, (_, n) => word(n * 3)), null, Array.from({ length: 1_000 }, (_, n) => word(n * 5))],
  }
  const log = (from: number, topic0: number, topic2: number | null) => ({
    address: address(from),
    topics: topic2 === null ? [word(topic0), word(1)] : [word(topic0), word(1), word(topic2)],
  })
  expect(matchesFilter(log(10, 9, 25), filter)).toBe(true)
  expect(matchesFilter(log(1_998, 2_997, 4_995), filter)).toBe(true)
  expect(matchesFilter(log(11, 9, 25), filter)).toBe(false)
  expect(matchesFilter(log(10, 10, 25), filter)).toBe(false)
  expect(matchesFilter(log(10, 9, 26), filter)).toBe(false)
  // A position the log does not have cannot match an alternative.
  expect(matchesFilter(log(10, 9, null), filter)).toBe(false)
  expect(matchesFilter(log(2_000, 9, 25), filter)).toBe(false)
})

test('a logs filter with a field it does not have is refused (as reth refuses it), and subscribes nothing', () => {
  const { events, listeners } = countedEvents()
  const subscriptions = createSubscriptions({ chainEvents: events, notify: () => {} })
  expect(() => subscriptions.subscribe(['logs', { adress: `0x${'11'.repeat(20)}` }])).toThrow(/unknown field `adress`/)
  expect(listeners()).toBe(0)
})
