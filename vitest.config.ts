import { defineConfig } from 'vitest/config'

export default defineConfig({
  // One graphql instance: Node loads graphql's CommonJS build for graphql-yoga and Pothos, so source files
  // under test must get the same one, not its ES build (graphql refuses types from "another realm").
  resolve: { alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }] },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // anvil, PGlite and the gateway all run in-process or on loopback; two cores.
    maxWorkers: 2,
  },
})
