import type { RpcTransactionReceipt } from 'viem'
import type { z } from 'zod'
import { MAX_BLOCKS_PER_QUERY } from '../resolvers/batches.js'
import { Account } from './account.js'
import { Block, present } from './block.js'
import { builder } from './builder.js'
import {
  BlockInput,
  type BlockInputShape,
  blockSelector,
  BlockTag,
  DEFAULT_PAGE_SIZE,
  LogFilterInput,
  logFilterSchema,
  MAX_PAGE_SIZE,
  parseArgument,
} from './inputs.js'
import { LogConnection } from './log.js'
import { logsPage, PAGE_SIZE_DESCRIPTION, pageCursor } from './pagination.js'
import { Receipt } from './receipt.js'
import { Transaction } from './transaction.js'

const LATEST: BlockInputShape = { tag: 'latest' }

/** How many blocks `blocks(from, to)` spans when both ends are numbers; the ceiling otherwise. */
function blockCount(from: BlockInputShape, to: BlockInputShape | null | undefined): number {
  if (typeof from.number !== 'bigint' || typeof to?.number !== 'bigint') return MAX_BLOCKS_PER_QUERY
  const count = Number(to.number - from.number) + 1
  return Math.min(Math.max(count, 0), MAX_BLOCKS_PER_QUERY)
}

builder.queryType({
  fields: (t) => ({
    chainId: t.field({ type: 'BigInt', resolve: (_root, _args, { resolvers }) => resolvers.chainId() }),
    blockNumber: t.field({
      type: 'BigInt',
      description: 'The newest indexed block.',
      resolve: (_root, _args, { resolvers }) => resolvers.blockNumber(),
    }),
    block: t.field({
      type: Block,
      nullable: true,
      description: 'A block by number, hash or tag (at most one; none means `LATEST`), as `eth_getBlockByNumber`/`ByHash`. `null` if unknown.',
      args: {
        number: t.arg({ type: 'BigInt' }),
        hash: t.arg({ type: 'Hash' }),
        tag: t.arg({ type: BlockTag }),
      },
      validate: [
        (args) => [args.number, args.hash, args.tag].filter((value) => value !== undefined && value !== null).length <= 1,
        { message: 'give at most one of number, hash and tag' },
      ],
      resolve: async (_root, args, { resolvers, loaders }) => {
        // Block 0 is a block (`0n` is falsy): only no argument at all means `LATEST`.
        const given = (args.number ?? args.hash ?? args.tag ?? null) !== null
        const block = parseArgument(blockSelector, given ? args : LATEST, 'block')
        const answer = await resolvers.getBlock({ block, includeTransactions: false })
        if (answer !== null && answer.number !== null) loaders.block.prime(Number(answer.number), answer as never)
        return answer as never
      },
    }),
    blocks: t.field({
      type: [Block],
      description: `Blocks \`from\` to \`to\` (default \`LATEST\`), at most ${MAX_BLOCKS_PER_QUERY}; \`to: {tag: PENDING}\` ends with the pre-confirmed block.`,
      args: {
        from: t.arg({ type: BlockInput, required: true }),
        to: t.arg({ type: BlockInput }),
      },
      complexity: (args) => ({ field: 1, multiplier: blockCount(args.from, args.to) }),
      resolve: async (_root, args, { resolvers, loaders }) => {
        const numbers = await resolvers.blockNumbersInRange({
          from: parseArgument(blockSelector, args.from, 'from'),
          to: parseArgument(blockSelector, args.to ?? LATEST, 'to'),
        })
        return present(await loaders.block.loadMany(numbers))
      },
    }),
    transaction: t.field({
      type: Transaction,
      nullable: true,
      description: 'A transaction by hash, confirmed or pre-confirmed, as `eth_getTransactionByHash`.',
      args: { hash: t.arg({ type: 'Hash', required: true }) },
      resolve: (_root, { hash }, { resolvers }) => resolvers.getTransaction({ hash }),
    }),
    receipt: t.field({
      type: Receipt,
      nullable: true,
      description: 'A receipt by transaction hash, as `eth_getTransactionReceipt`.',
      args: { hash: t.arg({ type: 'Hash', required: true }) },
      resolve: async (_root, { hash }, { resolvers }) => (await resolvers.getTransactionReceipt({ hash }))?.parse<RpcTransactionReceipt>() ?? null,
    }),
    receipts: t.field({
      type: [Receipt],
      nullable: true,
      description: 'Every receipt of a block, as `eth_getBlockReceipts`; `null` for an unknown block.',
      args: { block: t.arg({ type: BlockInput, required: true }) },
      resolve: async (_root, args, { resolvers }) =>
        (await resolvers.getBlockReceipts({ block: parseArgument(blockSelector, args.block, 'block') }))?.parse<RpcTransactionReceipt[]>() ?? null,
    }),
    logs: t.field({
      type: LogConnection,
      description:
        'Logs matching a filter, with the semantics and block-range limit of `eth_getLogs`, in pages of `first` ' +
        '(at most `--public-max-logs`); follow `pageInfo.endCursor` for more than one page. A range from a tag that moves ' +
        '(`LATEST`, `SAFE`, `FINALIZED`, `PENDING`) goes on from the block its first page started at, so that pages read ' +
        'while blocks arrive add up to one `eth_getLogs` answer, to the head when the last page is read.',
      args: {
        filter: t.arg({ type: LogFilterInput, required: true, validate: { schema: logFilterSchema as unknown as z.ZodType<never> } }),
        first: t.arg.int({
          description: PAGE_SIZE_DESCRIPTION,
          validate: { min: 1, max: MAX_PAGE_SIZE },
        }),
        after: t.arg.string(),
      },
      complexity: (args) => ({ field: 1, multiplier: args.first ?? DEFAULT_PAGE_SIZE }),
      resolve: async (_root, args, context) => {
        // The zod plugin has already turned the filter input into the resolvers' filter.
        const filter = args.filter as unknown as z.output<typeof logFilterSchema>
        return logsPage(context, filter, { first: args.first, after: pageCursor(args.after) })
      },
    }),
    account: t.field({
      type: Account,
      description: 'An address at a block (default `LATEST`); `PENDING` counts pre-confirmed transactions and balances.',
      args: {
        address: t.arg({ type: 'Address', required: true }),
        block: t.arg({ type: BlockInput }),
      },
      resolve: (_root, args, { resolvers }) => {
        const block = args.block ?? LATEST
        const selector = parseArgument(blockSelector, block, 'block')
        let state: ReturnType<typeof resolvers.getAccount> | null = null
        return { address: args.address, block, state: () => (state ??= resolvers.getAccount({ address: args.address, block: selector })) }
      },
    }),
  }),
})
