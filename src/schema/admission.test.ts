import { parse } from 'graphql'
import { describe, expect, test, vi } from 'vitest'
import { complexityGatePlugin, createComplexityGate } from './admission.js'
import { schema } from './schema.js'

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

describe('the complexity gate plugin', () => {
  test('wrong variables are read only up to execution’s 50 errors, not one error per wrong item', () => {
    // 20,000 wrong topics (a 100 KB request): the complexity plugin, left to read them, builds an error for
    // each (150,000 of them held the event loop 18 s). Each GraphQLError captures a stack trace: counted here.
    const document = parse('query ($t: [[Hash!]]) { logs(filter: { topics: $t }) { nodes { address } } }')
    const variableValues = { t: [Array.from({ length: 20_000 }, () => null)] }
    const gate = createComplexityGate()
    const plugin = complexityGatePlugin(gate, schema)
    const stacks = vi.spyOn(Error, 'captureStackTrace')
    try {
      const setExecuteFn = vi.fn()
      plugin.onExecute!({ args: { document, variableValues, contextValue: {}, schema }, executeFn: vi.fn(), setExecuteFn } as never)
      // Left to execution, which refuses them; never gated.
      expect(setExecuteFn).not.toHaveBeenCalled()
      expect(stacks.mock.calls.length).toBeLessThan(100)
    } finally {
      stacks.mockRestore()
    }
  })
})
