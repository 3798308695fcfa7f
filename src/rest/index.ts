import { readFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import type { Address } from 'viem'
import { attributionCode, seriesInterval, walletAddress } from '../codecs/index.js'
import {
  HttpMethodNotAllowedError,
  InvalidAddressError,
  InvalidBuilderCodeError,
  InvalidJsonError,
  InvalidQueryError,
  InvalidRequestBodyError,
  loggableError,
  NotFoundError,
  toHttpError,
  TooManyRequestsError,
  UnsupportedMediaTypeError,
} from '../errors.js'
import { sendCompressible } from '../http/compress.js'
import { readBody } from '../http/read-body.js'
import type { Resolvers } from '../resolvers/index.js'
import { clientAddress, createRateLimiter } from '../policy/index.js'
import type { ClusterLink } from '../cluster/link.js'
import type { SharedRedis } from '../redis/index.js'

/** A registration body is one address: anything near this size is not one. */
const MAX_REGISTRATION_BODY_BYTES = 4 * 1024
/** Registrations per second per client address, by default (bursts of five seconds' worth). */
export const DEFAULT_REGISTRATION_RATE_LIMIT = 20
/** A client may register this many seconds' worth of wallets at once before the rate applies. */
const REGISTRATION_BURST_SECONDS = 5
const REGISTRATION_PATH = '/v1/agents/builder-codes'
const DASHBOARD_HTML = readFileSync(new URL('./dashboard.html', import.meta.url))
/** Where the dashboard's page is served. */
export const DASHBOARD_PATHS: ReadonlySet<string> = new Set(['/dashboard', '/dashboard/'])

export type RestHandler = (request: IncomingMessage, response: ServerResponse) => Promise<boolean>

export type RestConfig = {
  resolvers: Resolvers
  logger: Logger
  /** Registrations per second per client address; 0 turns the limit off. */
  registrationRateLimit?: number
  /** Take the client's address from `X-Forwarded-For` (behind a reverse proxy). */
  trustProxy?: boolean
  /** Registration buckets shared with the deployment's other processes (`--redis-url`); else per process. */
  redis?: SharedRedis | null
  /** A worker of `serve --workers N`: without Redis, the buckets are the primary's. */
  cluster?: ClusterLink | null
}

function send(request: IncomingMessage, response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  return sendCompressible(request, response, status, JSON.stringify(body), { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers })
}

function isJsonContentType(header: string | undefined): boolean {
  if (header === undefined) return false
  const mediaType = header.split(';')[0]!.trim().toLowerCase()
  return mediaType === 'application/json' || (mediaType.startsWith('application/') && mediaType.endsWith('+json'))
}

/** A wallet address, its refusal naming the field it came in (the codec's messages say `walletAddress`). */
function parseWallet(value: unknown, field = 'walletAddress') {
  const parsed = walletAddress.safeParse(value)
  if (!parsed.success) throw new InvalidAddressError(parsed.error.issues[0]!.message.replace(/^walletAddress/, field))
  return parsed.data
}

/** The registration body's two spellings of the wallet; `null` is the same as leaving a field out. */
const WALLET_FIELDS = ['walletAddress', 'wallet_address'] as const

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment)
  } catch {
    throw new InvalidQueryError('the path is not valid percent-encoding')
  }
}

/**
 * The request target as a URL, or `null` when it does not parse: a target that starts with `//` names a host,
 * and `//`, `//0x12…` (an IPv4 number out of range), `//[::1` or `/\` (a slash, to WHATWG URL) make `new URL` throw.
 */
function requestUrl(request: IncomingMessage): URL | null {
  try {
    return new URL(request.url ?? '/', 'http://localhost')
  } catch {
    return null
  }
}

/** A query parameter given at most once: `null` when absent; given twice, which one was meant is not for the server to guess. */
function single(query: URLSearchParams, name: string): string | null {
  const values = query.getAll(name)
  if (values.length > 1) throw new InvalidQueryError(`${name} is given ${values.length} times; give it once`)
  return values[0] ?? null
}

/** A whole number written in decimal digits alone (not `0x10`, `1e1` or ` 10`, which `Number` would take). */
function parsePositiveInt(name: string, value: string | null, max: number): number | undefined {
  if (value === null) return undefined
  const number = /^[0-9]{1,16}$/.test(value) ? Number(value) : Number.NaN
  if (!Number.isInteger(number) || number < 1 || number > max) throw new InvalidQueryError(`${name} must be a whole number from 1 to ${max}`)
  return number
}

/**
 * The REST API (builder codes and their analytics) and the dashboard page: `/v1/…` and `/dashboard`. Returns
 * `false` for any other path, so that the server's other routes get it. Thin over `resolvers`, like JSON-RPC.
 */
export function createRestHandler(config: RestConfig): RestHandler {
  const { resolvers, logger } = config
  const limiter = createRateLimiter({
    ratePerSecond: config.registrationRateLimit ?? DEFAULT_REGISTRATION_RATE_LIMIT,
    burstSeconds: REGISTRATION_BURST_SECONDS,
    redis: config.redis,
    name: 'registration',
    cluster: config.cluster ?? null,
  })

  async function register(request: IncomingMessage, response: ServerResponse) {
    const wait = await limiter.take(clientAddress(request, config.trustProxy ?? false))
    if (wait > 0) throw new TooManyRequestsError(wait)
    if (!isJsonContentType(request.headers['content-type'])) throw new UnsupportedMediaTypeError(request.headers['content-type'])
    const text = await readBody(request, MAX_REGISTRATION_BODY_BYTES)
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      throw new InvalidJsonError()
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new InvalidRequestBodyError('the body must be a JSON object with walletAddress')
    const fields = body as Record<string, unknown>
    const given = WALLET_FIELDS.filter((field) => fields[field] !== undefined && fields[field] !== null)
    if (given.length === 0) throw new InvalidRequestBodyError('walletAddress is required')
    const [wallet, other] = given.map((field) => parseWallet(fields[field], field)) as [Address, Address?]
    // Both spellings naming different wallets: which one was meant is not for the server to guess.
    if (other !== undefined && other !== wallet) throw new InvalidRequestBodyError('walletAddress and wallet_address name different wallets; send one')
    const registered = await resolvers.registerBuilderCode(wallet)
    return send(request, response, registered.created ? 201 : 200, { builderCode: registered.builderCode, walletAddress: registered.walletAddress })
  }

  async function lookup(request: IncomingMessage, response: ServerResponse, wallet: string) {
    const record = await resolvers.builderCodeOfWallet(parseWallet(wallet))
    if (record === null) throw new NotFoundError(`no builder code is registered for ${wallet}`)
    return send(request, response, 200, record)
  }

  async function stats(request: IncomingMessage, response: ServerResponse, code: string, query: URLSearchParams) {
    if (!attributionCode.safeParse(code).success) throw new InvalidBuilderCodeError(`${JSON.stringify(code)} is not a builder code`)
    const intervalText = single(query, 'interval')
    const interval = intervalText === null ? undefined : seriesInterval.safeParse(intervalText)
    if (interval !== undefined && !interval.success) throw new InvalidQueryError(interval.error.issues[0]!.message)
    const result = await resolvers.builderCodeStats(code, { interval: interval?.data, points: parsePositiveInt('points', single(query, 'points'), 1_000) })
    if (result === null) throw new NotFoundError(`builder code ${code} is neither registered nor seen on chain`)
    return send(request, response, 200, result)
  }

  async function summary(request: IncomingMessage, response: ServerResponse, code: string) {
    if (!attributionCode.safeParse(code).success) throw new InvalidBuilderCodeError(`${JSON.stringify(code)} is not a builder code`)
    const result = await resolvers.builderCode(code)
    if (result === null) throw new NotFoundError(`builder code ${code} is neither registered here nor on chain, nor seen on chain`)
    return send(request, response, 200, result)
  }

  async function leaderboard(request: IncomingMessage, response: ServerResponse, query: URLSearchParams) {
    const builderCodes = await resolvers.builderCodeLeaderboard({ limit: parsePositiveInt('limit', single(query, 'limit'), 100) })
    return send(request, response, 200, { builderCodes })
  }

  function only(request: IncomingMessage, methods: string[]) {
    if (!methods.includes(request.method ?? 'GET')) throw new HttpMethodNotAllowedError(request.method ?? 'GET', methods)
  }

  async function route(request: IncomingMessage, response: ServerResponse, url: URL) {
    const path = url.pathname
    if (path === REGISTRATION_PATH) {
      only(request, ['POST'])
      return register(request, response)
    }
    const segments = path.split('/').slice(1)
    if (path.startsWith(`${REGISTRATION_PATH}/`) && segments.length === 4) {
      only(request, ['GET', 'HEAD'])
      return lookup(request, response, decodeSegment(segments[3]!))
    }
    if (path === '/v1/builder-codes') {
      only(request, ['GET', 'HEAD'])
      return leaderboard(request, response, url.searchParams)
    }
    if (segments.length === 3 && segments[1] === 'builder-codes' && segments[2] !== '') {
      only(request, ['GET', 'HEAD'])
      return summary(request, response, decodeSegment(segments[2]!))
    }
    if (segments.length === 4 && segments[1] === 'builder-codes' && segments[3] === 'stats') {
      only(request, ['GET', 'HEAD'])
      return stats(request, response, decodeSegment(segments[2]!), url.searchParams)
    }
    throw new NotFoundError(`no route for ${request.method} ${path}`)
  }

  return async function handle(request, response) {
    const url = requestUrl(request)
    // A target that is no URL at all (`//`, `//0x…`, `/\`) is no REST path; the server answers 404.
    if (url === null) return false
    if (DASHBOARD_PATHS.has(url.pathname)) {
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        const refusal = toHttpError(new HttpMethodNotAllowedError(request.method ?? '', ['GET', 'HEAD']))
        await send(request, response, refusal.status, refusal.body, refusal.headers)
        return true
      }
      await sendCompressible(request, response, 200, DASHBOARD_HTML, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache' })
      return true
    }
    if (!url.pathname.startsWith('/v1/')) return false
    try {
      await route(request, response, url)
    } catch (error) {
      const answer = toHttpError(error)
      if (answer.status === 500) logger.error({ err: loggableError(error), path: url.pathname.slice(0, 200) }, 'REST request failed')
      await send(request, response, answer.status, answer.body, answer.headers)
    }
    return true
  }
}
