import { complexityFromQuery } from '@pothos/plugin-complexity'
import { type DocumentNode, type GraphQLSchema, getOperationAST, getVariableValues } from 'graphql'
import type { Plugin } from 'graphql-yoga'
import { MAX_QUERY_COMPLEXITY } from './builder.js'

/**
 * Complexity the queries of one process may run at once: two of the largest a query may have. graphql-js
 * spends ~3–6 KB of heap per field it resolves, so a query at the complexity limit (15 aliases of 1,000 logs
 * with their blocks and transactions: a 2 KB request) takes 50–90 MB while it runs; sixteen at once took
 * ~750 MB and stalled the process for seconds. Past this, queries wait their turn, first come first served.
 */
export const MAX_COMPLEXITY_IN_FLIGHT = 2 * MAX_QUERY_COMPLEXITY
/** Queries this cheap (a block, an account, a page of a few logs) never wait: they hold next to nothing. */
export const UNGATED_COMPLEXITY = 1_000

/**
 * A weighted gate: `acquire(weight)` resolves once `weight` fits beside what runs (or nothing runs: a weight
 * over the budget goes alone), in arrival order; the function it resolves to gives the weight back.
 */
export function createComplexityGate(budget = MAX_COMPLEXITY_IN_FLIGHT) {
  let running = 0
  let peak = 0
  let waited = 0
  const waiting: { weight: number; start(): void }[] = []
  function admit(weight: number) {
    running += weight
    peak = Math.max(peak, running)
    let released = false
    return () => {
      if (released) return
      released = true
      running -= weight
      // Those at the head of the line that now fit go, in order: a later small one never passes an earlier large one.
      while (waiting.length > 0 && (running === 0 || running + waiting[0]!.weight <= budget)) waiting.shift()!.start()
    }
  }
  return {
    acquire(weight: number): Promise<() => void> {
      if (waiting.length === 0 && (running === 0 || running + weight <= budget)) return Promise.resolve(admit(weight))
      waited++
      return new Promise((resolve) => waiting.push({ weight, start: () => resolve(admit(weight)) }))
    },
    /** What runs and waits now, the most that ran at once, and how many had to wait: for tests and metrics. */
    figures: () => ({ running, waiting: waiting.length, peak, waited }),
  }
}

export type ComplexityGate = ReturnType<typeof createComplexityGate>

/** Errors in a request's variables past which graphql-js stops reading them, as execution does. */
const MAX_VARIABLE_ERRORS = 50

/**
 * Whether the variables fit the operation's definitions, read as execution reads them: stopping at the 50th
 * error. The complexity plugin reads them without that bound, building an error for each wrong item: a list
 * of 150,000 wrong values (a 900 KB request) held the event loop for 18 s, every other request waiting.
 */
function variablesFit(schema: GraphQLSchema, document: DocumentNode, operationName: string | null | undefined, inputs: Record<string, unknown>): boolean {
  const operation = getOperationAST(document, operationName)
  if (operation === null || operation === undefined) return false
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], inputs, { maxErrors: MAX_VARIABLE_ERRORS })
  return coerced.errors === undefined
}

/**
 * Runs each query (not subscriptions, which hold a stream rather than memory) through the gate, weighed by
 * the complexity the complexity plugin will find for it; cheap ones go straight through. A document whose
 * complexity cannot be worked out (its variables are wrong) goes straight on, to be refused by execution.
 */
export function complexityGatePlugin(gate: ComplexityGate, schema: GraphQLSchema): Plugin {
  return {
    onExecute({ args, executeFn, setExecuteFn }) {
      let weight = 0
      const variables = (args.variableValues ?? {}) as Record<string, unknown>
      if (!variablesFit(schema, args.document, args.operationName, variables)) return
      try {
        weight = complexityFromQuery(args.document, { schema, variables, ctx: args.contextValue as object }).complexity
      } catch {
        weight = 0
      }
      // Over the limit, the complexity plugin refuses it at once: no reason to make it wait for that.
      if (weight <= UNGATED_COMPLEXITY || weight > MAX_QUERY_COMPLEXITY) return
      setExecuteFn(async (executionArgs) => {
        const release = await gate.acquire(weight)
        try {
          return await executeFn(executionArgs)
        } finally {
          release()
        }
      })
    },
  }
}
