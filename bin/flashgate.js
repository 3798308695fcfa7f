#!/usr/bin/env node
// Before anything loads: the heap is kept when the process goes quiet (see idle-heap.js).
import './idle-heap.js'

// Runs the TypeScript sources through tsx so that `npx flashgate` works without a build step.
const { register } = await import('tsx/esm/api')
register()
await import('../src/cli/index.ts')
