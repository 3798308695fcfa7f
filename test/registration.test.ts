import { sql } from 'drizzle-orm'
import { pino } from 'pino'
import { getAddress } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { createServer } from '../src/server/index.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { defaultPolicies, startTestGateway } from './fixtures/gateway.js'

const WALLET = '0x52908400098527886e0f7030069857d2e4169ee7' // an EIP-55 test vector: all-caps body when checksummed
const CHECKSUMMED = getAddress('0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359')

let anvil: Anvil
let database: TestDatabase
let gateway: Gateway

async function register(body: unknown, init: { contentType?: string; raw?: string; method?: string; url?: string } = {}) {
  const response = await fetch(`${init.url ?? gateway.url}/v1/agents/builder-codes`, {
    method: init.method ?? 'POST',
    headers: init.contentType === '' ? {} : { 'content-type': init.contentType ?? 'application/json' },
    body: init.method === 'GET' ? undefined : (init.raw ?? JSON.stringify(body)),
  })
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, any> }
}

async function codeCount(): Promise<number> {
  const [row] = await gateway.db.query<{ count: number }>(sql`select count(*)::int as count from builder_codes`)
  return row!.count
}

function randomWallet(): string {
  return `0x${Array.from({ length: 40 }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('')}`
}

beforeAll(async () => {
  anvil = await startAnvil()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, registrationRateLimit: 0 })
})

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('POST /v1/agents/builder-codes', () => {
  test('the first call creates a bc_ code (201), repeats return it (200) with the checksummed wallet', async () => {
    const first = await register({ walletAddress: WALLET })
    expect(first.status).toBe(201)
    expect(first.body).toEqual({ builderCode: expect.stringMatching(/^bc_[a-z0-9]{8}$/), walletAddress: getAddress(WALLET) })
    const again = await register({ walletAddress: WALLET })
    expect(again.status).toBe(200)
    expect(again.body).toEqual(first.body)
  })

  test('lower-case, upper-case, checksummed and wallet_address all map to the same code', async () => {
    const created = await register({ walletAddress: CHECKSUMMED })
    expect(created.status).toBe(201)
    for (const variant of [CHECKSUMMED.toLowerCase(), `0x${CHECKSUMMED.slice(2).toUpperCase()}`, CHECKSUMMED]) {
      for (const body of [{ walletAddress: variant }, { wallet_address: variant }]) {
        const answer = await register(body)
        expect(answer.status).toBe(200)
        expect(answer.body).toEqual({ builderCode: created.body.builderCode, walletAddress: CHECKSUMMED })
      }
    }
    const lookup = await fetch(`${gateway.url}/v1/agents/builder-codes/${CHECKSUMMED.toLowerCase()}`)
    expect(lookup.status).toBe(200)
    expect(await lookup.json()).toEqual(created.body)
  })

  test('walletAddress and wallet_address naming different wallets is a 400, and registers neither', async () => {
    const [first, second] = [randomWallet(), randomWallet()]
    const answer = await register({ walletAddress: first, wallet_address: second })
    expect(answer.status).toBe(400)
    expect(answer.body).toEqual({ error: { code: 'invalid_request', message: 'walletAddress and wallet_address name different wallets; send one' } })
    for (const wallet of [first, second]) expect((await fetch(`${gateway.url}/v1/agents/builder-codes/${wallet}`)).status).toBe(404)
    // The same wallet in both spellings is one wallet.
    expect((await register({ walletAddress: first, wallet_address: first.toLowerCase() })).status).toBe(201)
  })

  test('null is a field left out, in either spelling; a bad wallet is refused naming the field it came in', async () => {
    for (const spelling of [
      (wallet: string) => ({ walletAddress: null, wallet_address: wallet }),
      (wallet: string) => ({ walletAddress: wallet, wallet_address: null }),
    ]) {
      const wallet = randomWallet()
      expect((await register(spelling(wallet))).status).toBe(201)
    }
    const neither = await register({ walletAddress: null, wallet_address: null })
    expect(neither.status).toBe(400)
    expect(neither.body).toEqual({ error: { code: 'invalid_request', message: 'walletAddress is required' } })
    expect((await register({ wallet_address: 42 })).body).toEqual({ error: { code: 'invalid_address', message: 'wallet_address must be a string' } })
    expect((await register({ walletAddress: randomWallet(), wallet_address: '0x12' })).body).toEqual({
      error: { code: 'invalid_address', message: 'wallet_address must be a 0x-prefixed 20-byte hex address' },
    })
  })

  test('100 concurrent first calls for one wallet: exactly one code, one 201', async () => {
    const wallet = randomWallet()
    const answers = await Promise.all(Array.from({ length: 100 }, () => register({ walletAddress: wallet })))
    expect(answers.filter((answer) => answer.status === 201)).toHaveLength(1)
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(99)
    expect(new Set(answers.map((answer) => answer.body.builderCode)).size).toBe(1)
    const [row] = await gateway.db.query<{ count: number }>(
      sql`select count(*)::int as count from builder_codes where wallet = ${Buffer.from(wallet.slice(2), 'hex')}`,
    )
    expect(row!.count).toBe(1)
  })

  test('different wallets get different codes', async () => {
    const codes = await Promise.all(Array.from({ length: 20 }, async () => (await register({ walletAddress: randomWallet() })).body.builderCode))
    expect(new Set(codes).size).toBe(20)
  })
})

describe('errors: JSON {"error":{"code","message"}}, and the database unchanged', () => {
  const cases: { name: string; status: number; code: string; message?: RegExp; send: () => ReturnType<typeof register> }[] = [
    { name: 'malformed JSON', status: 400, code: 'invalid_json', send: () => register(null, { raw: '{"walletAddress": ' }) },
    { name: 'a JSON array', status: 400, code: 'invalid_request', send: () => register([WALLET]) },
    { name: 'no walletAddress', status: 400, code: 'invalid_request', message: /walletAddress is required/, send: () => register({ wallet: WALLET }) },
    {
      name: 'an address that is not hex',
      status: 400,
      code: 'invalid_address',
      message: /walletAddress must be a 0x-prefixed 20-byte hex address/,
      send: () => register({ walletAddress: '0xnothex' }),
    },
    { name: 'an address of the wrong length', status: 400, code: 'invalid_address', send: () => register({ walletAddress: `0x${'ab'.repeat(19)}` }) },
    { name: 'an address that is a number', status: 400, code: 'invalid_address', message: /must be a string/, send: () => register({ walletAddress: 42 }) },
    {
      name: 'mixed case with a wrong checksum',
      status: 400,
      code: 'invalid_address',
      message: /checksum/,
      send: () => register({ walletAddress: CHECKSUMMED.replace(/[a-f]/, (letter) => letter.toUpperCase()) }),
    },
    {
      name: 'a text/plain body',
      status: 415,
      code: 'unsupported_media_type',
      send: () => register({ walletAddress: randomWallet() }, { contentType: 'text/plain' }),
    },
    { name: 'no content type', status: 415, code: 'unsupported_media_type', send: () => register({ walletAddress: randomWallet() }, { contentType: '' }) },
    { name: 'a body over 4 KiB', status: 413, code: 'payload_too_large', send: () => register({ walletAddress: randomWallet(), padding: 'x'.repeat(5_000) }) },
    { name: 'GET on the collection', status: 405, code: 'method_not_allowed', send: () => register(null, { method: 'GET' }) },
    { name: 'PUT on the collection', status: 405, code: 'method_not_allowed', send: () => register({ walletAddress: randomWallet() }, { method: 'PUT' }) },
  ]
  for (const { name, status, code, message, send } of cases)
    test(`${name}: ${status} ${code}`, async () => {
      const before = await codeCount()
      const answer = await send()
      expect(answer.status).toBe(status)
      expect(answer.body).toEqual({ error: { code, message: expect.any(String) } })
      if (message) expect(answer.body.error.message).toMatch(message)
      if (status === 405) expect(answer.headers.get('allow')).toBe('POST')
      expect(await codeCount()).toBe(before)
    })

  test('GET of a wallet without a code: 404; of a bad address: 400', async () => {
    const missing = await fetch(`${gateway.url}/v1/agents/builder-codes/${randomWallet()}`)
    expect(missing.status).toBe(404)
    expect(await missing.json()).toEqual({ error: { code: 'not_found', message: expect.stringContaining('no builder code') } })
    const bad = await fetch(`${gateway.url}/v1/agents/builder-codes/0x1234`)
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as any).error.code).toBe('invalid_address')
  })

  test('over the per-client rate: 429 with retry-after, and no code created', async () => {
    const limited = createServer({
      resolvers: gateway.resolvers,
      logger: pino({ level: 'silent' }),
      port: 0,
      policies: defaultPolicies(),
      registrationRateLimit: 1,
    })
    const { url } = await limited.listen()
    try {
      const before = await codeCount()
      // A rate of 1/s allows a burst of 5.
      const answers = await Promise.all(Array.from({ length: 8 }, () => register({ walletAddress: WALLET }, { url })))
      const refused = answers.filter((answer) => answer.status === 429)
      expect(refused).toHaveLength(3)
      expect(refused[0]!.body).toEqual({ error: { code: 'rate_limited', message: expect.any(String) } })
      expect(Number(refused[0]!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      const fresh = await register({ walletAddress: randomWallet() }, { url })
      expect(fresh.status).toBe(429)
      expect(await codeCount()).toBe(before)
    } finally {
      await limited.close()
    }
  })
})

test('a restart keeps every wallet’s code', async () => {
  const wallets = Array.from({ length: 5 }, randomWallet)
  const before = await Promise.all(wallets.map(async (walletAddress) => (await register({ walletAddress })).body.builderCode))
  await gateway.stop()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, registrationRateLimit: 0 })
  const after = await Promise.all(wallets.map((walletAddress) => register({ walletAddress })))
  expect(after.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200])
  expect(after.map((answer) => answer.body.builderCode)).toEqual(before)
})
