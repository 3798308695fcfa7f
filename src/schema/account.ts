import type { Address } from 'viem'
import type { BlockSelector } from '../codecs/index.js'
import { UnknownBlockError } from '../errors.js'
import type { AccountState } from '../resolvers/index.js'
import { builder, type GraphqlContext } from './builder.js'
import {
  BlockInput,
  blockSelector,
  type BlockInputShape,
  type Cursor,
  DEFAULT_PAGE_SIZE,
  encodeCursor,
  logFilterSchema,
  MAX_PAGE_SIZE,
  parseArgument,
} from './inputs.js'
import { LogConnection } from './log.js'
import { expectCursorBlock, logsPage, PAGE_SIZE_DESCRIPTION, pageCursor, pageSize } from './pagination.js'
import { TransactionConnection } from './transaction.js'

export type AccountShape = { address: Address; block: BlockInputShape; state: () => Promise<AccountState> }

export const Account = builder.objectRef<AccountShape>('Account')

/**
 * The blocks an account's history page reads. By default they end at the block the account was asked at and
 * start `--public-max-block-range` blocks before; that window moves with the head, so the first page's start is
 * kept in its cursor (`window`), and later pages read the same window: from that start, ending where the window
 * the first page read would (never skipping what the head moved past, nor reading more blocks than a page may).
 */
async function historyRange(
  account: AccountShape,
  args: { fromBlock?: BlockInputShape | null; toBlock?: BlockInputShape | null },
  context: GraphqlContext,
  after: Cursor | null,
): Promise<{ fromBlock: BlockInputShape; toBlock: BlockInputShape; window: number | null }> {
  const toBlock = args.toBlock ?? account.block
  if (args.fromBlock !== undefined && args.fromBlock !== null) return { fromBlock: args.fromBlock, toBlock, window: null }
  const toSelector = parseArgument(blockSelector, toBlock, 'toBlock')
  const recent = Number(((await context.resolvers.recentBlocksStart(toSelector, context.limits)) as Extract<BlockSelector, { kind: 'number' }>).number)
  const window = after?.fromBlock ?? recent
  // The head has moved past the first page's window: it ends where it did.
  const end = recent > window ? { number: BigInt(window + context.limits.maxBlockRange - 1) } : toBlock
  return { fromBlock: { number: BigInt(window) }, toBlock: end, window }
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
        'Logs the account emitted (as a contract), oldest first. The range defaults to the newest `--public-max-block-range` blocks up to the account’s block; later pages read the window the first page read, however far the head has moved.',
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
        const after = pageCursor(args.after)
        const range = await historyRange(account, args, context, after)
        const [fromBlock, toBlock] = await Promise.all([byNumber(range.fromBlock, 'fromBlock', context), byNumber(range.toBlock, 'toBlock', context)])
        const filter = parseArgument(logFilterSchema, { fromBlock, toBlock, addresses: [account.address], topics: args.topics }, 'filter')
        return logsPage(context, filter, { first: args.first, after })
      },
    }),
    transactions: t.field({
      type: TransactionConnection,
      description:
        'Transactions the account sent or received, oldest first. The range defaults to the newest `--public-max-block-range` blocks up to the account’s block; later pages read the window the first page read, however far the head has moved.',
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
        const after = pageCursor(args.after)
        await expectCursorBlock(context, after)
        const range = await historyRange(account, args, context, after)
        const page = await context.resolvers.getAccountTransactions({
          address: account.address,
          fromBlock: parseArgument(blockSelector, range.fromBlock, 'fromBlock'),
          toBlock: parseArgument(blockSelector, range.toBlock, 'toBlock'),
          first: pageSize(args.first, context),
          after: after ? { blockNumber: after.blockNumber, transactionIndex: after.index } : null,
          limits: context.limits,
        })
        const last = page.transactions.at(-1)
        return { ...page, endCursor: last ? encodeCursor(last.blockNumber!, last.transactionIndex!, range.window, last.blockHash) : null }
      },
    }),
  }),
})
