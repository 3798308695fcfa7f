import type { IncomingMessage, ServerResponse } from 'node:http'
import { format } from 'node:util'
import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases'
import { maxTokensPlugin } from '@escape.tech/graphql-armor-max-tokens'
import { GraphQLError } from 'graphql'
import { createYoga, type GraphiQLOptions, maskError } from 'graphql-yoga'
import type { Logger } from 'pino'
import { toGraphQLError } from '../errors.js'
import { createUnexpectedErrorLog } from '../logger.js'
import type { ChainEvents } from '../jsonrpc/subscriptions.js'
import type { LogLimits, Resolvers } from '../resolvers/index.js'
import type { GraphqlContext } from './builder.js'
import { createLoaders } from './loaders.js'
import { complexityGatePlugin, createComplexityGate } from './admission.js'
import { maxBreadthPlugin } from './breadth.js'
import { maxNestingPlugin } from './nesting.js'
import { schema } from './schema.js'
import { urlParamsJsonPlugin } from './url-params.js'

export const GRAPHQL_PATH = '/graphql'
/** Aliases per operation: each alias is another resolver run, so they are counted apart from depth. */
const MAX_ALIASES = 15
/** Tokens per document, checked while parsing, before any other work (GraphiQL's introspection fits). */
const MAX_TOKENS = 5_000

/** What GraphiQL opens with: the newest block with its transactions, and the newest logs. */
export const DEFAULT_GRAPHIQL_QUERY = `# flashgate: blocks, transactions, receipts, logs and accounts from the index.
# Every block argument takes a number, a hash or a tag; tag PENDING is the pre-confirmed (Flashblocks) view.
query Latest {
  block(tag: LATEST) {
    number
    hash
    timestamp
    transactionCount
    transactions {
      hash
      from
      to
      value
      receipt {
        status
        gasUsed
      }
    }
  }
  logs(filter: { fromBlock: { tag: LATEST } }, first: 5) {
    nodes {
      address
      topics
      blockNumber
      transactionHash
    }
    pageInfo {
      endCursor
      hasNextPage
    }
  }
}
`

function isGraphQLError(error: unknown): error is GraphQLError {
  return error instanceof Error && error.name === 'GraphQLError'
}

export type GraphqlServerConfig = {
  resolvers: Resolvers
  /** The `eth_getLogs` limits that bound log and history pages (the server passes the public endpoint's). */
  limits: LogLimits
  logger: Logger
  chainEvents?: ChainEvents | null
  /** GraphiQL's page; by default the library's, which inlines its 9 MB of scripts (src/server serves them apart). */
  renderGraphiQL?: (options?: GraphiQLOptions) => string | Promise<string>
  /** Largest request body, in bytes: the policy's (`--public-max-body`); a larger one is 413 `REQUEST_ENTITY_TOO_LARGE`. */
  maxBodyBytes: number
}

/**
 * graphql-yoga on `/graphql`: queries over GET and POST, subscriptions over server-sent events, GraphiQL
 * (bundled, no CDN) for browsers. Expected errors carry `extensions.code`; anything else is masked and
 * logged. https://the-guild.dev/graphql/yoga-server/docs
 */
export function createGraphqlServer(config: GraphqlServerConfig) {
  const { resolvers, logger } = config
  const logUnexpected = createUnexpectedErrorLog(logger)
  const log =
    (level: 'debug' | 'info' | 'warn' | 'error') =>
    (...args: unknown[]) =>
      logger[level](format(...args))
  // Queries that take memory in proportion to their complexity run a few at a time (admission.ts).
  const complexityGate = createComplexityGate()
  const yoga = createYoga<{ req: IncomingMessage; res: ServerResponse }, GraphqlContext>({
    schema,
    graphqlEndpoint: GRAPHQL_PATH,
    landingPage: false,
    // The server answers CORS for /graphql as for JSON-RPC (`--cors-origins`, no credentials); yoga's own would
    // let any origin in, with credentials.
    cors: false,
    maxRequestBodySize: config.maxBodyBytes,
    context: () => ({
      resolvers,
      limits: config.limits,
      loaders: createLoaders(resolvers),
      chainEvents: config.chainEvents ?? null,
    }),
    graphiql: { title: 'flashgate GraphiQL', defaultQuery: DEFAULT_GRAPHIQL_QUERY },
    // The library's page imported when first asked for: its bundle is ~28 MB of heap (src/server/graphiql.ts).
    renderGraphiQL: config.renderGraphiQL ?? (async (options) => (await import('@graphql-yoga/render-graphiql')).renderGraphiQL(options)),
    // yoga reports every error it answers with; the unexpected ones are logged at `error` by `maskError`.
    logging: { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('debug') },
    maskedErrors: {
      maskError(error, message, isDev) {
        // Duck-typed, not `instanceof`: graphql's CommonJS and ES builds can both be loaded (vitest does).
        const located = isGraphQLError(error) ? error : null
        const original = located?.originalError ?? error
        // Raised as a GraphQL error on purpose (scalar parsing, query limits, the document or its variables
        // refused): its code is kept, and one without a code gets one, as every answered error has.
        if (located !== null && isGraphQLError(original)) {
          // graphql-js's refusal of a variable names the variable before the inner error's words: kept whole.
          const variable = located.message.startsWith('Variable "$')
          const extensions = { ...located.extensions, ...(original === located ? {} : original.extensions) }
          extensions.code ??= variable ? 'BAD_USER_INPUT' : 'GRAPHQL_VALIDATION_FAILED'
          return new GraphQLError(variable ? located.message : original.message, { nodes: located.nodes, path: located.path, extensions })
        }
        const expected = toGraphQLError(original)
        if (expected !== null) return new GraphQLError(expected.message, { nodes: located?.nodes, path: located?.path, extensions: expected.extensions })
        if (!isGraphQLError(original)) {
          // Never the error itself: a database error's message holds the statement and its parameters.
          logUnexpected(original, 'unexpected error while serving GraphQL')
        }
        return maskError(error, message, isDev)
      },
    },
    // The nesting limit wraps the parser that max-tokens sets, so it comes after it.
    // The breadth is checked before graphql-js validates: its own check gives up on very wide documents.
    plugins: [
      urlParamsJsonPlugin(),
      maxAliasesPlugin({ n: MAX_ALIASES }),
      maxTokensPlugin({ n: MAX_TOKENS }),
      maxNestingPlugin(),
      maxBreadthPlugin(),
      complexityGatePlugin(complexityGate, schema),
    ],
  })
  return Object.assign(yoga, { complexityGate })
}

export type GraphqlServer = ReturnType<typeof createGraphqlServer>
