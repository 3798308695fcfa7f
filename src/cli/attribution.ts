import { CommandLineError } from './flags.js'
import { attributionSuffix } from '../attribution/index.js'
import { attributedActions, type ReceiptForAttribution, type TransactionForAttribution } from '../attribution/user-operations.js'
import { UsageError } from './usage-error.js'

const ATTRIBUTION_TIMEOUT_MS = 30_000

/** `flashgate suffix <code…>`: the hex to pass as viem's `dataSuffix` (schema 0, canonical registry). */
export function suffix(codes: string[]) {
  if (codes.length === 0) throw new CommandLineError('usage: flashgate suffix <code…>')
  try {
    console.log(attributionSuffix(codes))
  } catch (error) {
    throw new CommandLineError((error as Error).message)
  }
}

/**
 * `flashgate attribution <txHash>`: the client-side check of the spec's §4.3, through the gateway: the codes
 * the transaction attributes, as the index counts them: its own calldata's, then those of the user operations
 * it bundles when it calls an EntryPoint (v0.6, v0.7 or v0.8 at their canonical addresses), each once. `url` is
 * the gateway's, read and checked with the configuration (`readGatewayUrl`).
 */
export async function attribution(hash: string | undefined, url: string) {
  if (hash === undefined || !/^0x[0-9a-fA-F]{64}$/.test(hash)) throw new CommandLineError('usage: flashgate attribution <txHash> [--url URL | --port PORT]')
  let response: Response
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'eth_getTransactionByHash', params: [hash] },
        { jsonrpc: '2.0', id: 2, method: 'eth_getTransactionReceipt', params: [hash] },
      ]),
      signal: AbortSignal.timeout(ATTRIBUTION_TIMEOUT_MS),
    })
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause
    const reason = cause?.code ?? cause?.message ?? (error as Error).message
    throw new UsageError(`cannot reach the gateway at ${url} (${reason}); point at it with --url or FLASHGATE_URL`)
  }
  type Answer = { id?: unknown; result?: unknown; error?: { message: string } }
  const answers = (await response.json().catch(() => null)) as Answer[] | Answer | null
  if (answers === null) throw new UsageError(`${url} did not answer JSON-RPC (HTTP ${response.status}); is it a flashgate gateway?`)
  if (!Array.isArray(answers)) throw new UsageError(`the gateway answered: ${answers.error?.message ?? 'not a batch'}`)
  const [found, receipt] = [1, 2].map((id) => answers.find((answer) => answer.id === id))
  if (found?.error) throw new UsageError(`the gateway answered: ${found.error.message}`)
  const transaction = found?.result as TransactionForAttribution | null | undefined
  if (transaction === null || transaction === undefined) throw new UsageError(`transaction ${hash} is not known to ${url}`)
  // Without its receipt (pending, or refused) the bundle's operations are read from its calldata alone.
  const actions = attributedActions(transaction, receipt?.error ? null : ((receipt?.result ?? null) as ReceiptForAttribution))
  const codes = new Set(actions.flatMap((action) => action.attribution.codes))
  if (codes.size === 0) throw new UsageError(`transaction ${hash} carries no ERC-8021 attribution, in its calldata or in user operations it bundles`)
  for (const code of codes) console.log(code)
}
