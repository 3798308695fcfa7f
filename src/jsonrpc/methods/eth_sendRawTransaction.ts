import { z } from 'zod'
import { hexData } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

/** Forwarded once; the pending nonce counts it from then on (resolvers/send.ts). */
export const eth_sendRawTransaction = defineMethod({
  params: z.tuple([hexData]),
  handler: (resolvers, [raw]) => resolvers.sending.sendRawTransaction({ raw }),
})
