import { describe, expect, test } from 'vitest'
import { createComplexityGate } from './admission.js'

const flushed = () => new Promise((resolve) => setImmediate(resolve))

describe('the complexity gate', () => {
  test('admits what fits beside what runs, then the others in arrival order as weight is given back', async () => {
    const gate = createComplexityGate(100)
    const order: string[] = []
    const a = await gate.acquire(60)
    const admitted = (name: string) => (release: () => void) => {
      order.push(name)
      return release
    }
    const b = gate.acquire(60).then(admitted('b'))
    const c = gate.acquire(10).then(admitted('c'))
    await flushed()
    // c would fit beside a, but does not pass b, which came first.
    expect(order).toEqual([])
    expect(gate.figures()).toEqual({ running: 60, waiting: 2, peak: 60, waited: 2 })
    a()
    a()
    const [releaseB, releaseC] = await Promise.all([b, c])
    expect(order).toEqual(['b', 'c'])
    expect(gate.figures()).toEqual({ running: 70, waiting: 0, peak: 70, waited: 2 })
    releaseB()
    releaseC()
    expect(gate.figures().running).toBe(0)
  })

  test('a weight over the whole budget runs alone rather than never', async () => {
    const gate = createComplexityGate(100)
    const release = await gate.acquire(250)
    let next = false
    const small = gate.acquire(1).then((give) => {
      next = true
      return give
    })
    await flushed()
    expect(next).toBe(false)
    release()
    ;(await small)()
    expect(next).toBe(true)
    expect(gate.figures()).toEqual({ running: 0, waiting: 0, peak: 250, waited: 1 })
  })
})
