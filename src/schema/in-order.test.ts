import { describe, expect, test } from 'vitest'
import { inOrder, SlowSubscriberError } from './in-order.js'

describe('inOrder', () => {
  test('sends items one at a time, in the order heard', async () => {
    const sent: number[] = []
    let stopped: unknown = null
    const send = inOrder(
      async (item: number) => {
        await new Promise((resolve) => setTimeout(resolve, item % 2 === 0 ? 5 : 0))
        sent.push(item)
      },
      (error) => (stopped = error),
    )
    send([0, 1])
    send([2])
    send([3, 4, 5])
    await expect.poll(() => sent.length).toBe(6)
    expect(sent).toEqual([0, 1, 2, 3, 4, 5])
    expect(stopped).toBeNull()
  })

  test('a reader that never takes its items ends the subscription once the backlog passes the limit', async () => {
    const stops: unknown[] = []
    let pushed = 0
    const send = inOrder(
      () => {
        pushed++
        return new Promise(() => {})
      },
      (error) => stops.push(error),
      100,
    )
    for (let batch = 0; batch < 10; batch++) send(Array.from({ length: 10 }, (_, index) => batch * 10 + index))
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(stops).toEqual([])
    send([100])
    expect(stops).toHaveLength(1)
    expect(stops[0]).toBeInstanceOf(SlowSubscriberError)
    // Nothing more is queued once stopped.
    send([101, 102])
    expect(stops).toHaveLength(1)
    expect(pushed).toBe(1)
  })
})
