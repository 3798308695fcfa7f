import { describe, expect, test } from 'vitest'
import { loggableError } from '../errors.js'

describe('loggableError', () => {
  test('keeps the name, the code and a few hundred characters of the message, never the parameters', () => {
    const params = Array.from({ length: 70_000 }, (_, index) => `\\x${index.toString(16).padStart(40, '0')}`)
    const error = Object.assign(new Error(`Failed query: select * from logs where address in (...)\nparams: ${params.join(',')}`), {
      code: '08P01',
      params,
    })
    const logged = loggableError(error)
    expect(logged).toMatchObject({ name: 'Error', code: '08P01' })
    expect(JSON.stringify(logged).length).toBeLessThan(500)
    expect(logged.message).toMatch(/^Failed query: select \* from logs/)
    expect(JSON.stringify(loggableError('x'.repeat(10_000))).length).toBeLessThan(500)
  })
})
