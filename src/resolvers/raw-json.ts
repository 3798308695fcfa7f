/**
 * An answer that is already JSON text, e.g. receipts built as text by SQL (resolvers/receipts.ts) or taken
 * from the answer cache. The JSON-RPC layer writes its bytes into the response as they are
 * (src/jsonrpc/serialize.ts), so a large answer costs no object building and no `JSON.stringify` per
 * request. Anything else that serialises it (`JSON.stringify`, GraphQL) gets the parsed value.
 */
export class RawJson {
  /** UTF-8 JSON text: outside the JS heap, and written to a socket without another encoding pass. */
  readonly bytes: Buffer

  private constructor(bytes: Buffer) {
    this.bytes = bytes
  }

  /** UTF-8 JSON bytes, taken as they are (not copied). */
  static fromBytes(bytes: Buffer): RawJson {
    return new RawJson(bytes)
  }

  static fromText(text: string): RawJson {
    return new RawJson(Buffer.from(text, 'utf8'))
  }

  static fromValue(value: unknown): RawJson {
    return RawJson.fromText(JSON.stringify(value))
  }

  get byteLength(): number {
    return this.bytes.length
  }

  parse<value = unknown>(): value {
    return JSON.parse(this.bytes.toString('utf8')) as value
  }

  /** What `JSON.stringify` writes for it: the same JSON. */
  toJSON(): unknown {
    return this.parse()
  }
}
