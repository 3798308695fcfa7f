import { randomBytes } from 'node:crypto'

/** `bc_` + 8 of `[a-z0-9]`: 36^8 ≈ 2.8e12 codes, and within the on-chain registry's 1–32 of `[0-9a-z_]`. */
const BUILDER_CODE_PREFIX = 'bc_'
const BUILDER_CODE_RANDOM_CHARS = 8
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789'
/** The largest multiple of 36 below 256: bytes at or above it are redrawn, so every character is equally likely. */
const UNBIASED_BYTE_LIMIT = 252

export const BUILDER_CODE_PATTERN = /^bc_[a-z0-9]{8}$/

/** A fresh random builder code; uniqueness is the database's job (primary key, retried on collision). */
export function generateBuilderCode(): string {
  let code = BUILDER_CODE_PREFIX
  while (code.length < BUILDER_CODE_PREFIX.length + BUILDER_CODE_RANDOM_CHARS) {
    for (const byte of randomBytes(BUILDER_CODE_RANDOM_CHARS * 2)) {
      if (byte >= UNBIASED_BYTE_LIMIT) continue
      code += ALPHABET[byte % ALPHABET.length]
      if (code.length === BUILDER_CODE_PREFIX.length + BUILDER_CODE_RANDOM_CHARS) break
    }
  }
  return code
}
