export type { GraphqlContext } from './builder.js'
export { createLoaders, type Loaders } from './loaders.js'
export { printedSchema, schema } from './schema.js'
export { createGraphqlServer, DEFAULT_GRAPHIQL_QUERY, GRAPHQL_PATH, type GraphqlServer } from './server.js'
