import type { Address } from 'viem'
import type { BlockSelector } from '../codecs/index.js'
import { UnknownBlockError } from '../errors.js'
import type { AccountState } from '../resolvers/index.js'
import { builder, type GraphqlContext } from './builder.js'
import {
  BlockInput,
  blockSelector,
  type BlockInputShape,
  cursorSchema,
  DEFAULT_PAGE_SIZE,
  encodeCursor,
  logFilterSchema,
  MAX_PAGE_SIZE,
  parseArgument,
} from './inputs.js'
import { LogConnection } from './log.js'
import { logsPage, PAGE_SIZE_DESCRIPTION, pageSize } from './pagination.js'
import { TransactionConnection } from './transaction.js'

export type AccountShape = { address: Address; block: BlockInputShape; state: () => Promise<AccountState> }

export const Account = builder.objectRef<AccountShape>('Account')

/** Where an account's history ends by default: the block the account was asked at. */
async function historyRange(account: AccountShape, args: { fromBlock?: BlockInputShape | null; toBlock?: BlockInputShape | null }, context: GraphqlContext) {
  const toBlock = args.toBlock ?? account.block
  const toSelector = parseArgument(blockSelector, toBlock, 'toBlock')
  const fromBlock: BlockInputShape = args.fromBlock ?? {
    number: ((await context.resolvers.recentBlocksStart(toSelector, context.limits)) as Extract<BlockSelector, { kind: 'number' }>).number,
  }
  return { fromBlock, toBlock }
}

/**
 * A range end given by hash (the account's block, or an argument) as its number: the log filter takes a hash
 * only as `blockHash`, one block, while an account's history ends at any block it is asked at.
 */
async function byNumber(end: BlockInputShape, name: string, context: GraphqlContext): Promise<BlockInputShape> {
  if (end.hash === undefined || end.hash === null) return end
  const number = await context.resolvers.blockNumberOf(parseArgument(blockSelector, end, name))
  if (number === null) throw new UnknownBlockError()
  return { number: BigInt(number) }
}

Account.implement({
  description: 'An address at a block: its balance and nonce, and the logs and transactions of its recent history.',
  fields: (t) => ({
    address: t.expose('address', { type: 'Address' }),
    balance: t.field({ type: 'BigInt', description: 'Wei.', resolve: async (account) => (await account.state()).balance }),
    transactionCount: t.field({
      type: 'BigInt',
      description: 'The nonce; at `PENDING`, including the pre-confirmed transactions.',
      resolve: async (account) => (await account.state()).nonce,
    }),
    logs: t.field({
      type: LogConnection,
      description:
        'Logs the account emitted (as a contract), oldest first. The range defaults to the newest `--public-max-block-range` blocks up to the account’s block.',
      args: {
        topics: t.arg({ type: t.arg.listRef(t.arg.listRef('Hash'), { required: false }) }),
        fromBlock: t.arg({ type: BlockInput }),
        toBlock: t.arg({ type: BlockInput }),
        first: t.arg.int({
          description: PAGE_SIZE_DESCRIPTION,
          validate: { min: 1, max: MAX_PAGE_SIZE },
        }),
        after: t.arg.string(),
      },
      complexity: (args) => ({ field: 1, multiplier: args.first ?? DEFAULT_PAGE_SIZE }),
      resolve: async (account, args, context) => {
        const range = await historyRange(account, args, context)
        const [fromBlock, toBlock] = await Promise.all([byNumber(range.fromBlock, 'fromBlock', context), byNumber(range.toBlock, 'toBlock', context)])
        const filter = parseArgument(logFilterSchema, { fromBlock, toBlock, addresses: [account.address], topics: args.topics }, 'filter')
        return logsPage(context, filter, args)
      },
    }),
    transactions: t.field({
      type: TransactionConnection,
      description:
        'Transactions the account sent or received, oldest first. The range defaults to the newest `--public-max-block-range` blocks up to the account’s block.',
      args: {
        fromBlock: t.arg({ type: BlockInput }),
        toBlock: t.arg({ type: BlockInput }),
        first: t.arg.int({
          description: PAGE_SIZE_DESCRIPTION,
          validate: { min: 1, max: MAX_PAGE_SIZE },
        }),
        after: t.arg.string(),
      },
      complexity: (args) => ({ field: 1, multiplier: args.first ?? DEFAULT_PAGE_SIZE }),
      resolve: async (account, args, context) => {
        const range = await historyRange(account, args, context)
        const after = parseArgument(cursorSchema, args.after, 'after')
        const page = await context.resolvers.getAccountTransactions({
          address: account.address,
          fromBlock: parseArgument(blockSelector, range.fromBlock, 'fromBlock'),
          toBlock: parseArgument(blockSelector, range.toBlock, 'toBlock'),
          first: pageSize(args.first, context),
          after: after ? { blockNumber: after.blockNumber, transactionIndex: after.index } : null,
          limits: context.limits,
        })
        const last = page.transactions.at(-1)
        return { ...page, endCursor: last ? encodeCursor(last.blockNumber!, last.transactionIndex!) : null }
      },
    }),
  }),
})
