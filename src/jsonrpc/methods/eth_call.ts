import { callParams } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

/** Forwarded as sent, or run on the executed pending state at `pending` (resolvers/calls.ts). */
export const eth_call = defineMethod({
  params: callParams,
  handler: (resolvers, params) => resolvers.calls.call('eth_call', params),
})
