/**
 * JSON-RPC ids echoed exactly. `JSON.parse` turns `9007199254740993` into `…992` and a 30-digit id into
 * `1.2345678901234568e+29`; geth and reth keep the id's raw text and send it back as it came. Node 20 has
 * neither `JSON.rawJSON` nor the reviver's `context.source`, so the raw text of a numeric id is read from
 * the request by a small scan, only when the parsed number would not print back as it was written.
 * https://www.jsonrpc.org/specification#response_object
 */

/** A numeric id whose exact text `JSON.stringify` could not reproduce; serialised verbatim. */
export class NumericId {
  constructor(readonly text: string) {}
  /** Anything that stringifies a response without `serializeJsonRpc` still writes a number. */
  toJSON(): number {
    return Number(this.text)
  }
}

const isWhitespace = (code: number) => code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09

/**
 * A scanner over JSON text that `JSON.parse` has already accepted, so it only finds where values end;
 * it never validates.
 */
function createScanner(text: string) {
  let at = 0
  const skipWhitespace = () => {
    while (at < text.length && isWhitespace(text.charCodeAt(at))) at++
  }
  /** Moves past the string starting at `at` (on its opening quote) and returns its raw text. */
  const skipString = (): string => {
    const start = at
    at++
    for (;;) {
      const quote = text.indexOf('"', at)
      if (quote < 0) throw new Error('unterminated string')
      let backslashes = 0
      while (text.charCodeAt(quote - 1 - backslashes) === 0x5c) backslashes++
      at = quote + 1
      if (backslashes % 2 === 0) return text.slice(start, at)
    }
  }
  /** Moves past the value starting at `at` and returns its raw text. */
  const skipValue = (): string => {
    const start = at
    const first = text[at]
    if (first === '"') return skipString()
    if (first === '{' || first === '[') {
      let depth = 0
      while (at < text.length) {
        const char = text[at]
        if (char === '"') {
          skipString()
          continue
        }
        if (char === '{' || char === '[') depth++
        else if (char === '}' || char === ']') depth--
        at++
        if (depth === 0) break
      }
      return text.slice(start, at)
    }
    // A number or a literal (true, false, null): up to the next delimiter.
    while (at < text.length) {
      const char = text[at]!
      if (char === ',' || char === '}' || char === ']' || isWhitespace(char.charCodeAt(0))) break
      at++
    }
    return text.slice(start, at)
  }
  /** The raw text of an object's last `id` member (the one `JSON.parse` keeps), from `at` on its `{`. */
  const objectId = (): string | undefined => {
    let id: string | undefined
    at++
    skipWhitespace()
    if (text[at] === '}') {
      at++
      return id
    }
    for (;;) {
      skipWhitespace()
      const key = skipString()
      skipWhitespace()
      at++ // ':'
      skipWhitespace()
      const value = skipValue()
      if (key === '"id"' || (key.includes('\\') && JSON.parse(key) === 'id')) id = value
      skipWhitespace()
      if (text[at++] === '}') return id
    }
  }
  return { skipWhitespace, skipValue, objectId, peek: () => text[at], advance: () => at++ }
}

/**
 * The raw text of the `id` of a request (a top-level object), or of each entry of a batch (`undefined` for
 * an entry that is not an object or has no id). `text` must be JSON that `JSON.parse` accepted.
 */
export function scanRequestIds(text: string): string | undefined | (string | undefined)[] {
  const scanner = createScanner(text)
  scanner.skipWhitespace()
  const first = scanner.peek()
  if (first === '{') return scanner.objectId()
  if (first !== '[') return undefined
  const ids: (string | undefined)[] = []
  scanner.advance()
  scanner.skipWhitespace()
  if (scanner.peek() === ']') return ids
  for (;;) {
    scanner.skipWhitespace()
    if (scanner.peek() === '{') ids.push(scanner.objectId())
    else {
      scanner.skipValue()
      ids.push(undefined)
    }
    scanner.skipWhitespace()
    if (scanner.peek() === ']') return ids
    scanner.advance() // ','
  }
}

const idOf = (request: unknown) => (typeof request === 'object' && request !== null ? (request as { id?: unknown }).id : undefined)

/**
 * An id beyond 2^53, with more digits than a double keeps, or past a double's range (a 400-digit id, `1e999`:
 * `Infinity` once parsed, which the node echoes as it came, as any other number).
 */
const needsRawText = (id: unknown) => typeof id === 'number' && !Number.isSafeInteger(id)

/**
 * Whether a request's parsed id is a number that does not print back as written. At module level: a named
 * closure made per call costs a `__name` per request under tsx.
 */
const hasInexactId = (request: unknown) => needsRawText(idOf(request))

/**
 * The ids to answer with, one per request (one for a single request, one per entry of a batch): a
 * `NumericId` where the parsed number would not print back as the request wrote it, `undefined` where the
 * parsed id is already exact. `undefined` for all of them when none needs it; only then is the text scanned.
 */
export function exactIds(text: string, payload: unknown): (NumericId | undefined)[] | undefined {
  // A single request (nearly all of them) costs one look at its id, and no array.
  if (!(Array.isArray(payload) ? payload.some(hasInexactId) : hasInexactId(payload))) return undefined
  const requests: unknown[] = Array.isArray(payload) ? payload : [payload]
  const scanned = scanRequestIds(text)
  const raws = Array.isArray(scanned) ? scanned : [scanned]
  return requests.map((request, index) => {
    const parsed = idOf(request)
    const raw = raws[index]
    return needsRawText(parsed) && raw !== undefined && JSON.stringify(parsed) !== raw ? new NumericId(raw) : undefined
  })
}
