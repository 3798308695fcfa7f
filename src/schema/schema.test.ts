import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { expect, test } from 'vitest'
import { printedSchema } from './index.js'

const COMMITTED_SCHEMA = fileURLToPath(new URL('../../schema.graphql', import.meta.url))

test('the committed schema.graphql is the schema the code builds (print it again after changing a type)', () => {
  // Regenerate: node --import tsx -e "import('./src/schema/index.ts').then(m => process.stdout.write(m.printedSchema()))" > schema.graphql
  expect(readFileSync(COMMITTED_SCHEMA, 'utf8')).toBe(printedSchema())
})
