/**
 * Fuzz suite (issue 6): thousands of generated malformed and hostile JSON-RPC bodies, GraphQL documents and
 * builder-code registrations against the real gateway over loopback HTTP (real anvil, real PGlite or
 * Postgres). Every answer must be in its documented shape, never a 5xx; the index and the registered codes
 * must be unchanged afterwards, the gateway still serving, and its log free of errors.
 *
 * Seeded and bounded: `FUZZ_SEED` (environment) replaces the fixed seed to explore further, and a failure
 * prints the seed and the shrunk counterexample that reproduce it.
 */
import fc from 'fast-check'
import { getAddress } from 'viem'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { walletAddress } from '../src/codecs/index.js'
import { methods as indexMethods } from '../src/jsonrpc/methods/index.js'
import { createPolicies, PUBLIC_REFUSED_METHODS } from '../src/policy/index.js'
import { schema } from '../src/schema/index.js'
import { PASS_THROUGH_METHODS } from '../src/upstream/pass-through.js'
import { type Anvil, startAnvil } from './fixtures/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { graphqlBody } from './fixtures/fuzz/graphql.js'
import type { FuzzRequest } from './fixtures/fuzz/http.js'
import { type JsonRpcEndpoint, jsonRpcBody, unknownKeyPath } from './fixtures/fuzz/json-rpc.js'
import { hostilePathRequest } from './fixtures/fuzz/paths.js'
import { registrationBody } from './fixtures/fuzz/registration.js'
import type { FuzzWorld } from './fixtures/fuzz/values.js'
import {
  type CapturedLog,
  createHttpClient,
  type DatabaseSnapshot,
  echoedStrings,
  excerpt,
  type HttpAnswer,
  type HttpClient,
  leakIn,
  snapshotDatabase,
  startCapturedGateway,
} from './fixtures/fuzz-harness.js'

const SEED = process.env.FUZZ_SEED === undefined ? 0x5eed_0006 : Number(process.env.FUZZ_SEED)
const CHAIN_SEED = 6006
const CHAIN_BLOCKS = 8
/** Requests in flight at once (and keep-alive connections). */
const CONCURRENCY = 8
/** Longest one kind of fuzz may run (it takes 2–25 s); FUZZ_TEST_TIMEOUT_MS leaves time to report. */
const FUZZ_TIME_LIMIT_MS = 90_000
const FUZZ_TEST_TIMEOUT_MS = 120_000
/** Longest a single answer may take, on a slow shared machine: a request that hangs is a failure. */
const REQUEST_TIMEOUT_MS = 15_000
/** Bodies per kind; each property run sends CONCURRENCY of them at once. */
const BODIES = { jsonRpc: 6_000, unknownKey: 200, graphql: 2_600, registration: 2_000, paths: 400 }
const MIN_TOTAL_BODIES = 10_000
const REGISTERED_WALLETS = 4

/**
 * EIP-1474 codes the gateway answers with (DESIGN.md §3). -32603 (internal) is never a fuzz outcome of its own
 * methods; forwarded calls (src/upstream/pass-through.ts) answer with whatever the upstream said.
 */
const JSON_RPC_CODES = new Set([-32700, -32600, -32601, -32602, -32000, -32001, -32004, -32005])
const REGISTRATION_ERRORS: Record<number, string[]> = {
  400: ['invalid_json', 'invalid_request', 'invalid_address'],
  405: ['method_not_allowed'],
  413: ['payload_too_large'],
  415: ['unsupported_media_type'],
}
/** Statuses any route answers a hostile request with (2xx for the few that are valid). */
const HTTP_STATUSES = new Set([200, 204, 400, 401, 403, 404, 405, 406, 413, 415])
/** GraphQL over HTTP: 200 (or 400 for request errors with the GraphQL response type), 405, 406, 413, 415. */
const GRAPHQL_STATUSES = new Set([200, 400, 405, 406, 413, 415])

let anvil: Anvil
let database: TestDatabase
let gateway: Gateway
let log: CapturedLog
let client: HttpClient
let world: FuzzWorld
let endpoints: JsonRpcEndpoint[]
let dedicatedPath: string
let codeOfWallet: Map<string, string>
let before: { database: DatabaseSnapshot; answers: Record<string, string>; prototype: string[] }
const sent = { jsonRpc: 0, jsonRpcEntries: 0, unknownKey: 0, graphql: 0, registration: 0, paths: 0 }
/** How the answers came out (`rpc result`, `rpc -32602`, `graphql data`, `registration 400`…): shows what the fuzz reached. */
const outcomes = new Map<string, number>()
const tally = (outcome: string) => outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)

class FuzzFailure extends Error {
  override readonly name = 'FuzzFailure'
  constructor(problem: string, request: FuzzRequest, answer?: HttpAnswer) {
    super(
      [
        problem,
        `request: ${request.method} ${request.path.slice(0, 200)} ${JSON.stringify(request.headers).slice(0, 200)} ${excerpt(request.body)}`,
        answer === undefined ? '' : `answer: ${answer.status} ${String(answer.headers['content-type'])} ${excerpt(answer.body)}`,
      ].join('\n'),
    )
  }
}

function check(condition: boolean, problem: string, request: FuzzRequest, answer?: HttpAnswer): asserts condition {
  if (!condition) throw new FuzzFailure(problem, request, answer)
}

async function send(request: FuzzRequest): Promise<HttpAnswer> {
  try {
    return await client.send(request)
  } catch (error) {
    throw new FuzzFailure(`no HTTP answer: ${String(error)}`, request)
  }
}

function parseJson(request: FuzzRequest, answer: HttpAnswer): unknown {
  check(String(answer.headers['content-type']).includes('json'), 'answer is not JSON', request, answer)
  try {
    return JSON.parse(answer.body.toString('utf8'))
  } catch {
    throw new FuzzFailure('answer body does not parse as JSON', request, answer)
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

// ---------------------------------------------------------------------------------------------------------
// JSON-RPC: what each request object must be answered with

type ExpectedEntry = {
  answered: boolean
  id: unknown
  /** Error codes allowed; `result` allowed when `resultAllowed`. `null`: any integer (the upstream's own). */
  codes: Set<number> | null
  resultAllowed: boolean
  method?: string
}

const INVALID = new Set([-32600])

/** The answer a request object gets on `endpoint`, following the JSON-RPC 2.0 spec and DESIGN.md §3. */
function expectedEntry(entry: unknown, refused: ReadonlySet<string>): ExpectedEntry {
  if (!isObject(entry)) return { answered: true, id: null, codes: INVALID, resultAllowed: false }
  const hasId = 'id' in entry
  // Any number, one past a double's range (`1e999`, Infinity once parsed) too: echoed as it was sent.
  const validId = typeof entry.id === 'string' || entry.id === null || typeof entry.id === 'number'
  if (hasId && !validId) return { answered: true, id: null, codes: INVALID, resultAllowed: false }
  const id = validId ? entry.id : null
  if (entry.jsonrpc !== '2.0' || typeof entry.method !== 'string') return { answered: true, id, codes: INVALID, resultAllowed: false }
  const method = entry.method
  const base = { answered: hasId, id, method }
  if (refused.has(method)) return { ...base, codes: new Set([-32004]), resultAllowed: false }
  const params = entry.params
  if (params !== undefined && params !== null && !Array.isArray(params)) return { ...base, codes: new Set([-32602]), resultAllowed: false }
  // Forwarded calls (sends and calls too, though their resolvers see them first) answer with the upstream's
  // own errors (any code), or -32603 when it cannot be asked.
  if (PASS_THROUGH_METHODS.has(method)) return { ...base, codes: null, resultAllowed: true }
  if (Object.hasOwn(indexMethods, method)) return { ...base, codes: new Set([-32602, -32000, -32001]), resultAllowed: true }
  return { ...base, codes: new Set([-32601]), resultAllowed: false }
}

function checkJsonRpcResponse(response: unknown, expected: ExpectedEntry, echoed: Set<string>, request: FuzzRequest, answer: HttpAnswer) {
  check(isObject(response), 'a JSON-RPC answer is not an object', request, answer)
  check(response.jsonrpc === '2.0', 'jsonrpc is not "2.0"', request, answer)
  check('id' in response && sameJson(response.id, expected.id), `id ${JSON.stringify(response.id)} is not ${JSON.stringify(expected.id)}`, request, answer)
  const keys = Object.keys(response).sort().join(',')
  check(keys === 'error,id,jsonrpc' || keys === 'id,jsonrpc,result', `members are ${keys}, not exactly one of result and error`, request, answer)
  if ('result' in response) {
    check(expected.resultAllowed, 'a result where an error was due', request, answer)
    tally(response.result === null ? 'rpc null result' : 'rpc result')
    return
  }
  const error = response.error
  check(
    isObject(error) && Number.isInteger(error.code) && typeof error.message === 'string' && error.message !== '',
    'error is not {code, message}',
    request,
    answer,
  )
  check(
    Object.keys(error).every((key) => ['code', 'message', 'data'].includes(key)),
    'error has members besides code, message, data',
    request,
    answer,
  )
  const code = error.code as number
  tally(`rpc ${code}`)
  check(code !== -32603 || expected.codes === null, 'internal error (-32603)', request, answer)
  check(expected.codes === null || expected.codes.has(code), `error code ${code} is not one of ${[...(expected.codes ?? [])].join(', ')}`, request, answer)
  check(JSON_RPC_CODES.has(code) || expected.codes === null, `error code ${code} is not one the gateway uses`, request, answer)
  // A forwarded method's -32601 is the node's, in its own words (anvil refuses `eth_mining` with a parameter so).
  if (code === -32601 && expected.codes !== null)
    check(error.message === `the method ${expected.method} does not exist/is not available`, 'unexpected -32601 message', request, answer)
  const leak = leakIn(error.message as string, echoed)
  check(leak === null, `error message leaks internals (${leak})`, request, answer)
}

/** Sends one JSON-RPC request and checks the status and every answer in it against the model. */
async function fuzzJsonRpc(request: FuzzRequest): Promise<void> {
  const endpoint = endpoints.find((candidate) => request.path.split('?')[0] === candidate.path)!
  sent.jsonRpc++
  const answer = await send(request)
  check(answer.status < 500, 'a 5xx answer', request, answer)
  if (request.method === 'OPTIONS') {
    // A browser's CORS preflight: answered before anything else, with no body.
    check(
      answer.status === 204 && typeof answer.headers['access-control-allow-methods'] === 'string',
      'a preflight is not 204 with CORS headers',
      request,
      answer,
    )
    return
  }
  if (request.method !== 'POST') {
    check(answer.status === 405 && answer.headers.allow === 'POST', 'not 405 with allow: POST', request, answer)
    if (request.method !== 'HEAD')
      checkJsonRpcResponse(parseJson(request, answer), { answered: true, id: null, codes: INVALID, resultAllowed: false }, new Set(), request, answer)
    return
  }
  const bytes = typeof request.body === 'string' ? Buffer.from(request.body, 'utf8') : (request.body ?? Buffer.alloc(0))
  if (bytes.length > endpoint.maxBodyBytes) {
    check(answer.status === 413, 'an oversized body is not 413', request, answer)
    checkJsonRpcResponse(parseJson(request, answer), { answered: true, id: null, codes: INVALID, resultAllowed: false }, new Set(), request, answer)
    return
  }
  // What the gateway parses: the body as UTF-8 text.
  let payload: unknown
  try {
    payload = JSON.parse(bytes.toString('utf8'))
  } catch {
    check(answer.status === 200, 'a parse error is not HTTP 200', request, answer)
    const body = parseJson(request, answer)
    check(sameJson(body, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } }), 'not -32700 with id null', request, answer)
    return
  }
  const refused: ReadonlySet<string> = endpoint.path === dedicatedPath ? new Set() : new Set(PUBLIC_REFUSED_METHODS)
  const echoed = echoedStrings(payload)
  if (Array.isArray(payload)) {
    sent.jsonRpcEntries += payload.length
    if (payload.length === 0 || payload.length > endpoint.maxBatchSize) {
      check(answer.status === 200, 'an empty or oversized batch is not HTTP 200', request, answer)
      checkJsonRpcResponse(parseJson(request, answer), { answered: true, id: null, codes: INVALID, resultAllowed: false }, echoed, request, answer)
      return
    }
    const expected = payload.map((entry) => expectedEntry(entry, refused)).filter((entry) => entry.answered)
    if (expected.length === 0) {
      check(answer.status === 204 && answer.body.length === 0, 'a batch of notifications is not 204 without a body', request, answer)
      return
    }
    check(answer.status === 200, 'a batch is not HTTP 200', request, answer)
    const body = parseJson(request, answer)
    check(Array.isArray(body) && body.length === expected.length, `a batch answer is not an array of ${expected.length}`, request, answer)
    body.forEach((response, index) => {
      checkJsonRpcResponse(response, expected[index]!, echoed, request, answer)
    })
    return
  }
  sent.jsonRpcEntries++
  const expected = expectedEntry(payload, refused)
  if (!expected.answered) {
    check(answer.status === 204 && answer.body.length === 0, 'a notification is not 204 without a body', request, answer)
    return
  }
  const refusedCall = expected.codes?.has(-32004) === true
  check(answer.status === (refusedCall ? 403 : 200), `status ${answer.status} for a single call`, request, answer)
  checkJsonRpcResponse(parseJson(request, answer), expected, echoed, request, answer)
}

// ---------------------------------------------------------------------------------------------------------
// GraphQL and registration checks

/** Words and strings of a GraphQL request, which its error messages may quote. */
function graphqlEchoes(request: FuzzRequest): Set<string> {
  const text = `${request.path} ${typeof request.body === 'string' ? request.body : (request.body?.toString('utf8') ?? '')}`
  const echoed = new Set(text.match(/[A-Za-z_][\w.]*/g) ?? [])
  try {
    echoedStrings(JSON.parse(typeof request.body === 'string' ? request.body : ''), echoed)
  } catch {
    // Not JSON: the words are all there is.
  }
  return echoed
}

async function fuzzGraphql(request: FuzzRequest): Promise<void> {
  sent.graphql++
  const answer = await send(request)
  check(answer.status < 500, 'a 5xx answer', request, answer)
  if (request.method === 'OPTIONS') {
    // A CORS preflight (graphql-yoga answers it for browsers on other origins).
    check(answer.status === 204 && answer.body.length === 0, 'OPTIONS is not 204 without a body', request, answer)
    return
  }
  check(GRAPHQL_STATUSES.has(answer.status), `status ${answer.status} is not a GraphQL-over-HTTP one`, request, answer)
  if (!['POST', 'GET'].includes(request.method)) {
    check(answer.status === 405, 'not 405', request, answer)
    return
  }
  const type = String(answer.headers['content-type'] ?? '')
  if (answer.status === 406 || answer.status === 415 || type.startsWith('text/html')) {
    check(answer.status !== 200 || (request.method === 'GET' && type.startsWith('text/html')), 'an HTML answer to a POST', request, answer)
    return
  }
  const body = parseJson(request, answer)
  check(isObject(body) && ('data' in body || 'errors' in body), 'not {data} or {errors}', request, answer)
  tally(`graphql ${answer.status} ${isObject(body.data) ? 'data' : 'no data'}${'errors' in body ? ' errors' : ''}`)
  check(
    Object.keys(body).every((key) => ['data', 'errors', 'extensions'].includes(key)),
    'members besides data, errors, extensions',
    request,
    answer,
  )
  check(!('data' in body) || body.data === null || isObject(body.data), 'data is neither null nor an object', request, answer)
  if (!('data' in body)) check(Array.isArray(body.errors) && body.errors.length > 0, 'neither data nor errors', request, answer)
  if ('errors' in body) {
    check(Array.isArray(body.errors) && body.errors.length > 0, 'errors is not a non-empty array', request, answer)
    const echoed = graphqlEchoes(request)
    for (const error of body.errors) {
      check(isObject(error) && typeof error.message === 'string', 'an error without a message', request, answer)
      check(error.message !== 'Unexpected error.', 'an unexpected (masked internal) error', request, answer)
      check(!('extensions' in error) || isObject(error.extensions), 'extensions is not an object', request, answer)
      check(!/"(stack|stacktrace|exception)"/i.test(JSON.stringify(error.extensions ?? {})), 'extensions carry a stack or exception', request, answer)
      const leak = leakIn(error.message as string, echoed)
      check(leak === null, `error message leaks internals (${leak})`, request, answer)
    }
  }
}

async function fuzzRegistration(request: FuzzRequest): Promise<void> {
  sent.registration++
  const answer = await send(request)
  check(answer.status < 500, 'a 5xx answer', request, answer)
  check(answer.status !== 201, 'a new builder code was created', request, answer)
  if (request.method === 'HEAD') {
    check(answer.status === 405, 'HEAD is not 405', request, answer)
    return
  }
  const body = parseJson(request, answer)
  if (answer.status === 200) {
    // Only a registered wallet, in a valid spelling, in a JSON object, may be answered with its code.
    const text = typeof request.body === 'string' ? request.body : (request.body?.toString('utf8') ?? '')
    let wallet: string | undefined
    try {
      const parsed = JSON.parse(text) as Record<string, unknown>
      const given = parsed.walletAddress ?? parsed.wallet_address
      wallet = walletAddress.safeParse(given).data
    } catch {
      wallet = undefined
    }
    check(request.method === 'POST' && wallet !== undefined && codeOfWallet.has(wallet), 'a 200 for a request that names no registered wallet', request, answer)
    check(sameJson(body, { builderCode: codeOfWallet.get(wallet), walletAddress: getAddress(wallet) }), 'not the wallet’s code', request, answer)
    tally('registration 200')
    return
  }
  tally(`registration ${answer.status} ${isObject(body) && isObject(body.error) ? String(body.error.code) : ''}`)
  const codes = REGISTRATION_ERRORS[answer.status]
  check(codes !== undefined, `status ${answer.status} is not a registration error status`, request, answer)
  check(isObject(body) && Object.keys(body).join() === 'error', 'not {"error": …}', request, answer)
  const error = body.error
  check(isObject(error) && Object.keys(error).sort().join() === 'code,message', 'error is not {code, message}', request, answer)
  check(codes.includes(error.code as string), `error code ${String(error.code)} for status ${answer.status}`, request, answer)
  check(typeof error.message === 'string' && error.message !== '', 'error message is not a string', request, answer)
  check(request.method === 'POST' || (answer.status === 405 && answer.headers.allow === 'POST'), 'a non-POST is not 405 with allow: POST', request, answer)
  const leak = leakIn(error.message as string, echoedStrings(request.headers))
  check(leak === null, `error message leaks internals (${leak})`, request, answer)
}

/** Any route, odd request target: a documented status, and a JSON error object where it is JSON. */
async function fuzzPath(request: FuzzRequest): Promise<void> {
  sent.paths++
  const answer = await send(request)
  check(answer.status < 500, 'a 5xx answer', request, answer)
  check(HTTP_STATUSES.has(answer.status), `status ${answer.status} is not one the gateway documents`, request, answer)
  tally(`path ${answer.status}`)
  if (request.method === 'HEAD' || !String(answer.headers['content-type']).includes('json')) return
  const body = parseJson(request, answer)
  check(typeof body === 'object' && body !== null, 'a JSON answer that is not an object or array', request, answer)
  if (answer.status >= 400)
    check(isObject(body) && (isObject(body.error) || Array.isArray(body.errors)), 'an error answer without error or errors', request, answer)
}

/** Runs `runs` groups of CONCURRENCY generated requests, each group sent at once. */
async function fuzz(arbitrary: fc.Arbitrary<FuzzRequest>, bodies: number, run: (request: FuzzRequest) => Promise<void>) {
  await fc.assert(
    fc.asyncProperty(fc.array(arbitrary, { minLength: CONCURRENCY, maxLength: CONCURRENCY }), async (requests) => {
      await Promise.all(requests.map(run))
    }),
    // A run (shrinking included) that overstays is a failure with the best counterexample so far, not a
    // vitest timeout without one.
    { seed: SEED, numRuns: Math.ceil(bodies / CONCURRENCY), interruptAfterTimeLimit: FUZZ_TIME_LIMIT_MS, markInterruptAsFailure: true },
  )
}

// ---------------------------------------------------------------------------------------------------------
// Known answers: what must read the same after the fuzz

/** The gateway runs in this process: `__proto__` keys that reached a merge would show up here. */
const prototypeKeys = () => [Object.prototype, Array.prototype, Function.prototype].flatMap((prototype) => Reflect.ownKeys(prototype).map(String)).sort()

async function knownAnswers(): Promise<Record<string, string>> {
  const head = world.head
  const calls: [string, unknown[]][] = [
    ['eth_blockNumber', []],
    ['eth_chainId', []],
    ['eth_getLogs', [{ fromBlock: '0x0', toBlock: `0x${head.toString(16)}` }]],
    ...Array.from({ length: head + 1 }, (_, number): [string, unknown[]] => ['eth_getBlockByNumber', [`0x${number.toString(16)}`, true]]),
    ...Array.from({ length: head + 1 }, (_, number): [string, unknown[]] => ['eth_getBlockReceipts', [`0x${number.toString(16)}`]]),
    ...world.addresses.flatMap((address): [string, unknown[]][] => [
      ['eth_getBalance', [address, 'latest']],
      ['eth_getBalance', [address, '0x1']],
      ['eth_getTransactionCount', [address, 'latest']],
    ]),
    ...world.transactionHashes.map((hash): [string, unknown[]] => ['eth_getTransactionReceipt', [hash]]),
  ]
  const batch = calls.map(([method, params], id) => ({ jsonrpc: '2.0', id, method, params }))
  const answers: Record<string, string> = {}
  const rpc = await client.send({ method: 'POST', path: dedicatedPath, headers: { 'content-type': 'application/json' }, body: JSON.stringify(batch) })
  const responses = JSON.parse(rpc.body.toString('utf8')) as { id: number; result?: unknown; error?: unknown }[]
  for (const response of responses) answers[`rpc ${JSON.stringify(calls[response.id])}`] = JSON.stringify(response)
  for (const wallet of world.registeredWallets) {
    const lookup = await client.send({ method: 'GET', path: `/v1/agents/builder-codes/${wallet}`, headers: {} })
    answers[`GET code of ${wallet}`] = `${lookup.status} ${lookup.body.toString('utf8')}`
  }
  const leaderboard = await client.send({ method: 'GET', path: '/v1/builder-codes', headers: {} })
  answers['GET /v1/builder-codes'] = `${leaderboard.status} ${leaderboard.body.toString('utf8')}`
  const graphql = await client.send({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      query: `{ blockNumber builderCodes { code registered transactions } logs(filter: { fromBlock: { number: 0 } }, first: 100) { nodes { transactionHash logIndex address } }
        ${world.registeredWallets.map((wallet, index) => `w${index}: builderCode(wallet: "${wallet}") { code wallet }`).join(' ')} }`,
    }),
  })
  answers.GraphQL = `${graphql.status} ${graphql.body.toString('utf8')}`
  return answers
}

beforeAll(async () => {
  anvil = await startAnvil()
  const chain = await generateChain(anvil.rpcUrl, { seed: CHAIN_SEED, blocks: CHAIN_BLOCKS })
  database = await createTestDatabase()
  // No rate limits: the fuzz sends thousands of requests from one address, and 429s would hide the answers.
  const started = await startCapturedGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, publicRateLimit: 0, registrationRateLimit: 0 })
  gateway = started.gateway
  log = started.log
  const head = Number(chain.headNumber)
  await gateway.ingester.waitForBlock(head)
  client = createHttpClient(gateway.url, { sockets: CONCURRENCY, timeoutMs: REQUEST_TIMEOUT_MS })

  const { key } = await gateway.resolvers.createApiKey({ name: 'fuzz', policy: 'dedicated', rateLimit: 0 })
  dedicatedPath = `/rpc/${key}`
  const policies = createPolicies(started.config)
  const publicLimits = { maxBatchSize: policies.public.maxBatchSize, maxBodyBytes: policies.public.maxBodyBytes }
  const dedicatedLimits = { maxBatchSize: policies.dedicated.maxBatchSize, maxBodyBytes: policies.dedicated.maxBodyBytes }
  // The JSON-RPC endpoints and the limits of their policies: one line per endpoint.
  endpoints = [
    { path: '/', ...publicLimits },
    { path: '/rpc', ...publicLimits },
    { path: dedicatedPath, ...dedicatedLimits },
  ]

  codeOfWallet = new Map()
  for (let index = 0; index < REGISTERED_WALLETS; index++) {
    const wallet = `0x${Buffer.from(`fuzz-wallet-${index}`.padEnd(20, '.')).toString('hex')}`
    const answer = await client.send({
      method: 'POST',
      path: '/v1/agents/builder-codes',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ walletAddress: wallet }),
    })
    expect(answer.status).toBe(201)
    codeOfWallet.set(wallet, (JSON.parse(answer.body.toString('utf8')) as { builderCode: string }).builderCode)
  }

  const blocks = await client.send({
    method: 'POST',
    path: dedicatedPath,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(
      Array.from({ length: head + 1 }, (_, number) => ({
        jsonrpc: '2.0',
        id: number,
        method: 'eth_getBlockByNumber',
        params: [`0x${number.toString(16)}`, false],
      })),
    ),
  })
  const blockList = (JSON.parse(blocks.body.toString('utf8')) as { result: { hash: string; transactions: string[] } }[]).map((answer) => answer.result)
  world = {
    head,
    addresses: [...new Set([...chain.senders, ...chain.contracts, ...chain.recipients])],
    blockHashes: blockList.map((block) => block.hash),
    transactionHashes: blockList.flatMap((block) => block.transactions),
    topics: chain.topics,
    registeredWallets: [...codeOfWallet.keys()],
    builderCodes: [...codeOfWallet.values()],
    methods: [...new Set([...Object.keys(indexMethods), ...PASS_THROUGH_METHODS, ...PUBLIC_REFUSED_METHODS])],
  }
  before = { database: await snapshotDatabase(gateway.db), answers: await knownAnswers(), prototype: prototypeKeys() }
})

afterAll(async () => {
  client?.close()
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
})

describe('fuzz: every hostile request gets its documented answer, never a 5xx', () => {
  test(
    `JSON-RPC: ${BODIES.jsonRpc} generated bodies on the public and dedicated endpoints`,
    async () => {
      await fuzz(jsonRpcBody(world, endpoints), BODIES.jsonRpc, fuzzJsonRpc)
    },
    FUZZ_TEST_TIMEOUT_MS,
  )

  test('JSON-RPC: bodies over each endpoint’s size limit are 413 with a JSON-RPC error', async () => {
    for (const endpoint of endpoints)
      for (const size of [endpoint.maxBodyBytes + 1, endpoint.maxBodyBytes + 100_000]) {
        await fuzzJsonRpc({ method: 'POST', path: endpoint.path, headers: { 'content-type': 'application/json' }, body: `[${' '.repeat(size - 2)}]` })
        await fuzzJsonRpc({
          method: 'POST',
          path: endpoint.path,
          headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
          body: `[${' '.repeat(size - 2)}]`,
        })
      }
  })

  test(
    `JSON-RPC: ${BODIES.unknownKey} requests to /rpc/<key> with keys that are not keys are 401`,
    async () => {
      const arbitrary = fc.tuple(unknownKeyPath, fc.constantFrom('POST', 'GET')).map(
        ([path, method]): FuzzRequest => ({
          method,
          path,
          headers: { 'content-type': 'application/json' },
          body: method === 'POST' ? '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' : undefined,
        }),
      )
      await fuzz(arbitrary, BODIES.unknownKey, async (request) => {
        sent.unknownKey++
        const answer = await send(request)
        check(answer.status === 401, 'not 401', request, answer)
        // The request's id comes back when there was one (a GET has none).
        checkJsonRpcResponse(
          parseJson(request, answer),
          { answered: true, id: request.method === 'POST' ? 1 : null, codes: new Set([-32000]), resultAllowed: false },
          new Set(),
          request,
          answer,
        )
      })
    },
    FUZZ_TEST_TIMEOUT_MS,
  )

  test(
    `GraphQL: ${BODIES.graphql} generated documents and envelopes`,
    async () => {
      await fuzz(graphqlBody(schema, world), BODIES.graphql, fuzzGraphql)
    },
    FUZZ_TEST_TIMEOUT_MS,
  )

  test(
    `registration: ${BODIES.registration} generated bodies`,
    async () => {
      await fuzz(registrationBody(world), BODIES.registration, fuzzRegistration)
    },
    FUZZ_TEST_TIMEOUT_MS,
  )
})

describe('fuzz: odd request targets on every route', () => {
  test(
    `${BODIES.paths} requests with doubled slashes, dot segments, bad escapes, absolute and asterisk forms`,
    async () => {
      await fuzz(hostilePathRequest(world), BODIES.paths, fuzzPath)
    },
    FUZZ_TEST_TIMEOUT_MS,
  )
})

describe('after the fuzz', () => {
  test(`at least ${MIN_TOTAL_BODIES} bodies were sent`, () => {
    const total = sent.jsonRpc + sent.unknownKey + sent.graphql + sent.registration + sent.paths
    expect(sent.jsonRpc).toBeGreaterThanOrEqual(BODIES.jsonRpc)
    expect(sent.graphql).toBeGreaterThanOrEqual(BODIES.graphql)
    expect(sent.registration).toBeGreaterThanOrEqual(BODIES.registration)
    expect(total).toBeGreaterThanOrEqual(MIN_TOTAL_BODIES)
    console.info(`fuzz: seed ${SEED}; bodies sent ${JSON.stringify(sent)}, ${total} in all`)
    console.info(`fuzz outcomes: ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}`)
  })

  test('every table and every known answer is unchanged', async () => {
    expect(await snapshotDatabase(gateway.db)).toEqual(before.database)
    expect(await knownAnswers()).toEqual(before.answers)
  })

  test('no prototype was polluted', () => {
    expect(prototypeKeys()).toEqual(before.prototype)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  test('the gateway still serves: a good call answers correctly', async () => {
    const answer = await client.send({
      method: 'POST',
      path: '/rpc',
      headers: { 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}',
    })
    expect(answer.status).toBe(200)
    expect(JSON.parse(answer.body.toString('utf8'))).toEqual({ jsonrpc: '2.0', id: 1, result: `0x${world.head.toString(16)}` })
  })

  test('the gateway logged no error', () => {
    expect(log.errors().map((record) => ({ msg: record.msg, err: record.err?.message }))).toEqual([])
    if (log.warnings().length > 0) console.info(`fuzz: ${log.warnings().length} warnings, first: ${JSON.stringify(log.warnings()[0])}`)
  })
})
