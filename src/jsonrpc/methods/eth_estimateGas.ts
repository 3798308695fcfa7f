import { callParams } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'

/** Forwarded as sent, or estimated on the executed pending state at `pending` (resolvers/calls.ts). */
export const eth_estimateGas = defineMethod({
  params: callParams,
  handler: (resolvers, params) => resolvers.calls.call('eth_estimateGas', params),
})
