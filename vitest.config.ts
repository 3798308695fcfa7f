import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // anvil, PGlite and the gateway all run in-process or on loopback; two cores.
    maxWorkers: 2,
  },
})
