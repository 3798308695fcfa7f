import { defineConfig } from 'vitest/config'

/**
 * Tests that measure the server under load, or load the machine themselves (Base-shaped traffic executed as it
 * arrives): they run after the rest, alone, so no other file competes for the two cores.
 */
const ALONE = ['test/load-limit.test.ts', 'test/pending-execute.test.ts']

export default defineConfig({
  // One graphql instance: Node loads graphql's CommonJS build for graphql-yoga and Pothos, so source files
  // under test must get the same one, not its ES build (graphql refuses types from "another realm").
  resolve: { alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }] },
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // anvil, PGlite and the gateway all run in-process or on loopback; two cores.
    maxWorkers: 2,
    // A worker keeps the modules it loaded for its next file: loading the sources and their packages again for each
    // of ~130 files took 370 s of the PGlite pass (1,073 s -> 820 s without). Nothing here keeps state in a module
    // that a file relies on being fresh (each gateway has its own metrics registry, caches and pools).
    isolate: false,
    // One migrated PGlite database per run, copied for each file's (test/global-setup.ts).
    globalSetup: ['test/global-setup.ts'],
    projects: [
      { extends: true, test: { name: 'suite', include: ['src/**/*.test.ts', 'test/**/*.test.ts'], exclude: ALONE, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'load', include: ALONE, sequence: { groupOrder: 1 } } },
    ],
  },
})
