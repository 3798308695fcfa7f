import { GraphQLError } from 'graphql'
import { z } from 'zod'
import { checkedAddress, hash, hexData } from '../codecs/index.js'
import { builder } from './builder.js'

/** Unsigned integers up to 256 bits, as decimal strings (JSON numbers lose precision past 2^53). */
const MAX_UINT256 = 2n ** 256n - 1n

/** Digits of the largest 256-bit integer: a longer decimal string is too large before it is converted. */
const MAX_UINT256_DIGITS = MAX_UINT256.toString().length

const NEGATIVE = 'expected a non-negative integer, got a negative one'

/** What is wrong with a decimal string, `null` for nothing. */
function decimalProblem(text: string): string | null {
  if (/^\d+$/.test(text)) return text.length > MAX_UINT256_DIGITS ? 'integer exceeds 256 bits' : null
  if (/^-\d+$/.test(text)) return NEGATIVE
  return 'expected a non-negative integer as a decimal string'
}

const unsignedInteger = z
  .union([z.string(), z.number().int({ error: 'expected an integer' }).nonnegative({ error: NEGATIVE })], {
    error: 'expected a non-negative integer as a decimal string',
  })
  .superRefine((value, context) => {
    const problem = typeof value === 'string' ? decimalProblem(value) : null
    if (problem !== null) context.addIssue({ code: 'custom', message: problem })
  })
  .transform((value) => BigInt(value))
  .refine((value) => value <= MAX_UINT256, { error: 'integer exceeds 256 bits' })

/** A scalar's input goes through the same zod codec as the JSON-RPC parameter of that kind. */
function parseWith<output>(codec: z.ZodType<output>, scalar: string) {
  return (value: unknown): output => {
    const parsed = codec.safeParse(value)
    if (parsed.success) return parsed.data
    throw new GraphQLError(`invalid ${scalar}: ${parsed.error.issues[0]?.message ?? 'invalid value'}`, {
      extensions: { code: 'BAD_USER_INPUT' },
    })
  }
}

builder.scalarType('Address', {
  description:
    'A 20-byte address, 0x-prefixed hex, as the node reports it on output. On input all lower-case, all upper-case or EIP-55 ' +
    'checksummed: mixed case with a wrong checksum is refused (BAD_USER_INPUT).',
  serialize: (value) => value,
  parseValue: parseWith(checkedAddress, 'Address'),
})

builder.scalarType('Hash', {
  description: 'A 32-byte hash or topic, 0x-prefixed hex.',
  serialize: (value) => value,
  parseValue: parseWith(hash, 'Hash'),
})

builder.scalarType('HexData', {
  description: 'Bytes as 0x-prefixed hex.',
  serialize: (value) => value,
  parseValue: parseWith(hexData, 'HexData'),
})

builder.scalarType('BigInt', {
  description: 'A non-negative integer as a decimal string (input also takes an Int literal).',
  // Answers carry hex quantities from the node; GraphQL shows them in decimal.
  serialize: (value) => BigInt(value).toString(),
  parseValue: parseWith(unsignedInteger, 'BigInt'),
})
