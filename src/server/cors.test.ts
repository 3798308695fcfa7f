import type { IncomingMessage } from 'node:http'
import { describe, expect, test } from 'vitest'
import { createCors } from './cors.js'

const from = (origin?: string) => ({ headers: origin === undefined ? {} : { origin } }) as IncomingMessage

describe('createCors', () => {
  test('* allows every page', () => {
    expect(createCors('*').headers(from('https://a.example'))).toEqual({ 'access-control-allow-origin': '*' })
  })

  test('a list echoes only the listed origins, and varies on Origin', () => {
    const cors = createCors('https://a.example, https://b.example')
    expect(cors.headers(from('https://b.example'))).toEqual({ 'access-control-allow-origin': 'https://b.example', vary: 'Origin' })
    expect(cors.headers(from('https://evil.example'))).toEqual({ vary: 'Origin' })
    expect(cors.preflight(from('https://evil.example'))['access-control-allow-origin']).toBeUndefined()
  })
})
