import { type DeflatedText, inflateAny } from '../codecs/deflated.js'

/**
 * An answer that is already JSON text, e.g. receipts built as text by SQL (resolvers/receipts.ts) or taken
 * from the answer cache. The JSON-RPC layer writes its bytes into the response as they are
 * (src/jsonrpc/serialize.ts), so a large answer costs no object building and no `JSON.stringify` per
 * request. Anything else that serialises it (`JSON.stringify`, GraphQL) gets the parsed value.
 */
export class RawJson {
  #bytes: Buffer | undefined
  /** The same text as an open DEFLATE stream, when it was stored that way (codecs/deflated.ts). */
  readonly deflated: DeflatedText | undefined

  private constructor(bytes: Buffer | undefined, deflated?: DeflatedText) {
    this.#bytes = bytes
    this.deflated = deflated
  }

  /** UTF-8 JSON text: outside the JS heap, and written to a socket without another encoding pass. */
  get bytes(): Buffer {
    this.#bytes ??= inflateAny(this.deflated!.stream, this.deflated!.length)
    return this.#bytes
  }

  /** UTF-8 JSON bytes, taken as they are (not copied). */
  static fromBytes(bytes: Buffer): RawJson {
    return new RawJson(bytes)
  }

  /** JSON kept deflated: inflated only if something reads its bytes, not when it is sent as it is. */
  static fromDeflated(deflated: DeflatedText): RawJson {
    return new RawJson(undefined, deflated)
  }

  /** Both forms of the same JSON: the bytes for a plain answer, the stream for a client accepting `deflate`. */
  static withDeflated(bytes: Buffer, deflated: DeflatedText): RawJson {
    return new RawJson(bytes, deflated)
  }

  static fromText(text: string): RawJson {
    return new RawJson(Buffer.from(text, 'utf8'))
  }

  static fromValue(value: unknown): RawJson {
    return RawJson.fromText(JSON.stringify(value))
  }

  get byteLength(): number {
    return this.#bytes?.length ?? this.deflated!.length
  }

  /**
   * Memory it holds once its bytes have been read: its stream, and its text, counted before it is inflated.
   * Reading `bytes` keeps the text with it, so whatever keeps it where others read it (the call memo) counts
   * the text from the start: counted as the stream alone, a block's receipts (~3 KB deflated, ~107 KB of JSON
   * once written to a plain client) let the memo hold 35 times its budget.
   */
  get heldBytes(): number {
    return (this.#bytes?.length ?? this.deflated?.length ?? 0) + (this.deflated?.stream.length ?? 0)
  }

  /** Whether it holds its text: given as text, or inflated since (its bytes were read). */
  get inflated(): boolean {
    return this.#bytes !== undefined
  }

  parse<value = unknown>(): value {
    return JSON.parse(this.bytes.toString('utf8')) as value
  }

  /** What `JSON.stringify` writes for it: the same JSON. */
  toJSON(): unknown {
    return this.parse()
  }
}
