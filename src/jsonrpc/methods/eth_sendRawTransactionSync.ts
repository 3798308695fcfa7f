import { z } from 'zod'
import { hexData, quantity } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

/** Milliseconds, as an integer (viem sends a number) or a hex quantity; 0 is no wait, as Base's node takes it. */
const timeoutMs = z
  .union([z.number().int({ error: 'timeout must be an integer number of milliseconds' }).nonnegative(), quantity])
  .transform((value) => Number(value))
  .optional()

/** https://eips.ethereum.org/EIPS/eip-7966: the receipt once pre-confirmed or mined, or code 4 after the timeout. */
export const eth_sendRawTransactionSync = defineMethod({
  params: z.tuple([hexData, timeoutMs.nullable().transform((value) => value ?? undefined)]),
  handler: (resolvers, [raw, timeout]) => resolvers.sending.sendRawTransactionSync({ raw, timeoutMs: timeout }),
})
