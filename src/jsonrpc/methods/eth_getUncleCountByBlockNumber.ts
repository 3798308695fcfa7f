import { z } from 'zod'
import { blockNumberOrTagSelector } from '../../codecs/index.js'
import { defineMethod } from '../define-method.js'
import { pinAt } from '../memo.js'

/** Answered from the index (it was forwarded): `latest` is the index's head here as everywhere else. */
export const eth_getUncleCountByBlockNumber = defineMethod({
  params: z.tuple([blockNumberOrTagSelector]),
  pins: pinAt(0),
  handler: (resolvers, [block]) => resolvers.getUncleCount({ block }),
})
