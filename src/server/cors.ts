import type { IncomingMessage } from 'node:http'

/** How long a browser may reuse a preflight answer, in seconds. */
const PREFLIGHT_MAX_AGE_SECONDS = 86_400
const ALLOWED_METHODS = 'POST, GET, OPTIONS'
/** What a JSON-RPC client sends besides the CORS-safelisted headers (viem, ethers: content-type). */
const DEFAULT_ALLOWED_HEADERS = 'content-type, authorization'

export type Cors = {
  /** The headers every answer gets when any origin may call (`--cors-origins '*'`); `null` for a list of origins. */
  anyOrigin: Readonly<Record<string, string>> | null
  /** Headers for an answer to this request: `Access-Control-Allow-Origin` (and `Vary: Origin` for a list). */
  headers(request: IncomingMessage): Record<string, string>
  /** Headers for the 204 answer to a preflight (`OPTIONS`). */
  preflight(request: IncomingMessage): Record<string, string>
}

/**
 * CORS for the JSON-RPC endpoints (https://fetch.spec.whatwg.org/#http-cors-protocol), from `--cors-origins`:
 * `*` (any page may call, as public RPCs allow) or a comma-separated list of origins, echoed when they match.
 */
export function createCors(origins: string): Cors {
  const list = origins
    .split(',')
    .map((origin) => origin.trim())
    .filter((origin) => origin !== '')
  const any = list.includes('*')
  const allowed = new Set(list.map((origin) => origin.toLowerCase()))

  // The same headers for every request when any origin may call: made once (callers copy, never change them).
  const anyOrigin: Readonly<Record<string, string>> = Object.freeze({ 'access-control-allow-origin': '*' })

  function headers(request: IncomingMessage): Record<string, string> {
    if (any) return anyOrigin
    const origin = request.headers.origin
    if (origin !== undefined && allowed.has(origin.toLowerCase())) return { 'access-control-allow-origin': origin, vary: 'Origin' }
    return { vary: 'Origin' }
  }

  return {
    anyOrigin: any ? anyOrigin : null,
    headers,
    preflight(request) {
      const requested = request.headers['access-control-request-headers']
      return {
        ...headers(request),
        'access-control-allow-methods': ALLOWED_METHODS,
        'access-control-allow-headers': requested !== undefined && requested !== '' ? requested : DEFAULT_ALLOWED_HEADERS,
        'access-control-max-age': String(PREFLIGHT_MAX_AGE_SECONDS),
      }
    },
  }
}
