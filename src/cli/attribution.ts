import { attributionSuffix, decodeAttribution } from '../attribution/index.js'
import { nonEmpty } from '../config.js'
import { DEFAULT_GATEWAY_HOST, DEFAULT_GATEWAY_PORT } from './flags.js'
import { UsageError } from './usage-error.js'

const ATTRIBUTION_TIMEOUT_MS = 30_000

/** `flashgate suffix <code…>`: the hex to pass as viem's `dataSuffix` (schema 0, canonical registry). */
export function suffix(codes: string[]) {
  if (codes.length === 0) throw new UsageError('usage: flashgate suffix <code…>')
  try {
    console.log(attributionSuffix(codes))
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
}

/** `flashgate attribution <txHash>`: the client-side check of the spec's §4.3, through the gateway. */
export async function attribution(hash: string | undefined, flags: Record<string, string | undefined>) {
  if (hash === undefined || !/^0x[0-9a-fA-F]{64}$/.test(hash)) throw new UsageError('usage: flashgate attribution <txHash> [--url URL]')
  const url =
    nonEmpty(flags.url) ?? nonEmpty(process.env.FLASHGATE_URL) ?? `http://${DEFAULT_GATEWAY_HOST}:${nonEmpty(process.env.PORT) ?? DEFAULT_GATEWAY_PORT}`
  let response: Response
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionByHash', params: [hash] }),
      signal: AbortSignal.timeout(ATTRIBUTION_TIMEOUT_MS),
    })
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause
    const reason = cause?.code ?? cause?.message ?? (error as Error).message
    throw new UsageError(`cannot reach the gateway at ${url} (${reason}); point at it with --url or FLASHGATE_URL`)
  }
  const answer = (await response.json().catch(() => null)) as { result?: { input?: string } | null; error?: { message: string } } | null
  if (answer === null) throw new UsageError(`${url} did not answer JSON-RPC (HTTP ${response.status}); is it a flashgate gateway?`)
  if (answer.error) throw new UsageError(`the gateway answered: ${answer.error.message}`)
  if (answer.result === null || answer.result === undefined) throw new UsageError(`transaction ${hash} is not known to ${url}`)
  const decoded = decodeAttribution(answer.result.input)
  if (decoded === null || decoded.codes.length === 0) throw new UsageError(`transaction ${hash} carries no ERC-8021 attribution`)
  for (const code of decoded.codes) console.log(code)
}
