import { Attribution } from 'ox/erc8021'
import type { Hex } from 'viem'

/**
 * ERC-8021 suffixes are read backwards from the end of calldata: a 16-byte marker, a schema id, then the
 * schema's own length-prefixed data. https://eips.ethereum.org/EIPS/eip-8021
 * ox decodes a well-formed suffix but is lenient with lengths that run past the data (it slices what is
 * there) and throws on bad CBOR, so every length is checked here first and ox runs inside a try/catch.
 */
const MARKER = Attribution.ercSuffix.slice(2).toLowerCase()
const MARKER_BYTES = 16
const SCHEMA_ID_BYTES = 1
/** Schemas 0 and 1: `codes ∥ codesLength (1 byte) ∥ schemaId ∥ marker`. */
const CODES_LENGTH_BYTES = 1
/** Schema 1 prepends `registryAddress (20) ∥ chainId ∥ chainIdLength (1 byte)`. */
const REGISTRY_ADDRESS_BYTES = 20
/**
 * The chain id may take any number of bytes, zero-padded or not (a 32-byte word, say): ox reads its value and
 * throws when it is not a safe integer, so the value decides, not the length.
 */
const CHAIN_ID_LENGTH_BYTES = 1
/** Schema 2: `cbor ∥ cborLength (2 bytes) ∥ schemaId ∥ marker`. */
const CBOR_LENGTH_BYTES = 2
/**
 * Suffixes may be stacked (a wallet appending its own after the app's); each is peeled off in turn, up to
 * this many, so that hostile calldata cannot make the indexer loop for long.
 */
const MAX_STACKED_SUFFIXES = 4
/**
 * The on-chain code registry takes 1–32 characters. ERC-8021 codes are ASCII with the comma (0x2C) as their
 * delimiter, chosen to be human-readable: the printable characters, space (0x20) included, less the comma.
 * Control characters are not kept (unreadable, and NUL cannot be stored in Postgres text).
 */
const CODE_PATTERN = /^[\x20-\x2b\x2d-\x7e]{1,32}$/
/** Calldata gas of one suffix byte (EIP-2028). */
const GAS_PER_ZERO_BYTE = 4
const GAS_PER_NONZERO_BYTE = 16

/**
 * What a code stands for in its suffix: schema 2 names an app, a wallet and services (`a`, `w`, `s`);
 * schemas 0 and 1 list codes without saying (`code`).
 */
export const ATTRIBUTION_ROLES = ['app', 'wallet', 'service', 'code'] as const
export type AttributionRole = (typeof ATTRIBUTION_ROLES)[number]

/** A schema-2 registry of app or wallet codes: the chain id may be written as a hex string or a number (ox reads both). */
export type AttributionRegistry = { address: string; chainId: number }

export type DecodedAttribution = {
  /** Distinct codes of every stacked suffix, outermost suffix first. */
  codes: string[]
  /** The role of each of `codes`, aligned with it (the first role a code was given). */
  roles: AttributionRole[]
  /** Schema 2's registries (app, wallet) and metadata, kept as the suffix gave them; outermost suffix wins. */
  registries: { app?: AttributionRegistry; wallet?: AttributionRegistry }
  metadata: Record<string, unknown> | null
  /** Schema ids of the suffixes read, outermost first. */
  schemas: number[]
  /** Bytes of calldata taken by the suffixes. */
  suffixBytes: number
  /** Calldata gas those bytes cost: 16 per non-zero byte, 4 per zero byte. */
  suffixGas: number
}

/** Whether a code is one flashgate records: 1–32 printable ASCII characters (space included), no comma. */
export function isAttributionCode(code: string): boolean {
  return CODE_PATTERN.test(code)
}

/** Cheap pre-check on the hex text: does the calldata end with the ERC-8021 marker? */
export function hasAttributionMarker(input: string): boolean {
  const length = input.length
  if (length < 2 + 2 * (MARKER_BYTES + SCHEMA_ID_BYTES + CODES_LENGTH_BYTES)) return false
  const tail = input.slice(length - 2 * MARKER_BYTES)
  return tail === MARKER || tail.toLowerCase() === MARKER
}

function byteAt(hex: string, end: number, fromEnd: number): number {
  // `end` is the suffix's end, in hex characters; `fromEnd` counts bytes back from it (1 = last byte).
  const start = end - 2 * fromEnd
  return Number.parseInt(hex.slice(start, start + 2), 16)
}

/** Length in bytes of the suffix that ends at hex offset `end`, or `null` when its lengths do not add up. */
function suffixLength(hex: string, end: number, schema: number): number | null {
  const available = (end - 2) / 2
  const tail = MARKER_BYTES + SCHEMA_ID_BYTES
  if (schema === 0 || schema === 1) {
    if (available < tail + CODES_LENGTH_BYTES) return null
    const codesLength = byteAt(hex, end, tail + CODES_LENGTH_BYTES)
    if (codesLength === 0) return null
    let length = tail + CODES_LENGTH_BYTES + codesLength
    if (schema === 1) {
      if (available < length + CHAIN_ID_LENGTH_BYTES) return null
      const chainIdLength = byteAt(hex, end, length + CHAIN_ID_LENGTH_BYTES)
      if (chainIdLength === 0) return null
      length += CHAIN_ID_LENGTH_BYTES + chainIdLength + REGISTRY_ADDRESS_BYTES
    }
    return length <= available ? length : null
  }
  if (schema === 2) {
    if (available < tail + CBOR_LENGTH_BYTES) return null
    const cborLength = byteAt(hex, end, tail + 2) * 256 + byteAt(hex, end, tail + 1)
    if (cborLength === 0) return null
    const length = tail + CBOR_LENGTH_BYTES + cborLength
    return length <= available ? length : null
  }
  return null
}

function codesOf(attribution: Attribution.Attribution): [unknown, AttributionRole][] {
  if (attribution.id === 2) {
    const codes: [unknown, AttributionRole][] = []
    if (attribution.appCode !== undefined) codes.push([attribution.appCode, 'app'])
    if (attribution.walletCode !== undefined) codes.push([attribution.walletCode, 'wallet'])
    if (Array.isArray(attribution.serviceCodes)) for (const code of attribution.serviceCodes) codes.push([code, 'service'])
    return codes
  }
  return [...(attribution.codes ?? [])].map((code) => [code, 'code'])
}

function gasOf(hex: string, start: number, end: number): number {
  let gas = 0
  for (let index = start; index < end; index += 2)
    gas += hex.charCodeAt(index) === 48 && hex.charCodeAt(index + 1) === 48 ? GAS_PER_ZERO_BYTE : GAS_PER_NONZERO_BYTE
  return gas
}

/**
 * The attribution codes at the end of `input` (transaction calldata), or `null` when it carries no
 * readable ERC-8021 suffix. Never throws: unknown schemas, impossible lengths, bad CBOR and codes that are
 * not printable ASCII all read as "no attribution" (for that suffix or that code).
 */
export function decodeAttribution(input: Hex | string | null | undefined): DecodedAttribution | null {
  if (typeof input !== 'string' || !hasAttributionMarker(input)) return null
  const hex = input.toLowerCase()
  const codes = new Map<string, AttributionRole>()
  const schemas: number[] = []
  const registries: DecodedAttribution['registries'] = {}
  let metadata: Record<string, unknown> | null = null
  let end = hex.length
  for (let stacked = 0; stacked < MAX_STACKED_SUFFIXES; stacked++) {
    if (!hasAttributionMarker(hex.slice(0, end))) break
    const schema = byteAt(hex, end, MARKER_BYTES + SCHEMA_ID_BYTES)
    const length = suffixLength(hex, end, schema)
    if (length === null) break
    const start = end - 2 * length
    let attribution: Attribution.Attribution | undefined
    try {
      attribution = Attribution.fromData(`0x${hex.slice(start, end)}`)
    } catch {
      attribution = undefined
    }
    if (attribution === undefined) break
    for (const [code, role] of codesOf(attribution)) if (typeof code === 'string' && isAttributionCode(code) && !codes.has(code)) codes.set(code, role)
    if (attribution.id === 2) {
      registries.app ??= attribution.registries?.app
      registries.wallet ??= attribution.registries?.wallet
      if (attribution.metadata !== undefined && typeof attribution.metadata === 'object') metadata ??= attribution.metadata
    }
    schemas.push(schema)
    end = start
  }
  if (schemas.length === 0) return null
  if (registries.app === undefined) delete registries.app
  if (registries.wallet === undefined) delete registries.wallet
  return {
    codes: [...codes.keys()],
    roles: [...codes.values()],
    registries,
    metadata,
    schemas,
    suffixBytes: (hex.length - end) / 2,
    suffixGas: gasOf(hex, end, hex.length),
  }
}

/** The hex suffix that attributes a transaction to `codes` (schema 0, the canonical registry). */
export function attributionSuffix(codes: readonly string[]): Hex {
  for (const code of codes) if (!isAttributionCode(code)) throw new TypeError(`not an attribution code: ${JSON.stringify(code)}`)
  return Attribution.toDataSuffix({ codes })
}
