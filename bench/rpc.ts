/** Per-request timeout of the bench's own JSON-RPC calls (chain generation, verification, probes). */
const RPC_TIMEOUT_MS = 60_000

export type RpcCall = { method: string; params: unknown[] }
export type RpcAnswer = { id: number; result?: unknown; error?: { code: number; message: string } }

export class RpcCallError extends Error {
  override readonly name = 'RpcCallError'
}

/** A bare JSON-RPC client over fetch: one call, or a batch answered in request order. */
export function createRpcClient(url: string) {
  async function post(body: unknown, timeoutMs: number): Promise<unknown> {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    })
    if (!response.ok) throw new RpcCallError(`${url} answered HTTP ${response.status}`)
    return response.json()
  }

  /** Every answer, errors included, in the order of `calls`. */
  async function batchAnswers(calls: RpcCall[], timeoutMs = RPC_TIMEOUT_MS): Promise<RpcAnswer[]> {
    if (calls.length === 0) return []
    const answers = (await post(
      calls.map((call, id) => ({ jsonrpc: '2.0', id, method: call.method, params: call.params })),
      timeoutMs,
    )) as RpcAnswer[]
    return answers.sort((a, b) => a.id - b.id)
  }

  /** Results in the order of `calls`; throws on the first error. */
  async function batch<result = unknown>(calls: RpcCall[], timeoutMs?: number): Promise<result[]> {
    const answers = await batchAnswers(calls, timeoutMs)
    return answers.map((answer, index) => {
      if (answer.error !== undefined) throw new RpcCallError(`${calls[index]!.method} failed: ${answer.error.code} ${answer.error.message}`)
      return answer.result as result
    })
  }

  async function call<result = unknown>(method: string, params: unknown[] = [], timeoutMs?: number): Promise<result> {
    const [result] = await batch<result>([{ method, params }], timeoutMs)
    return result as result
  }

  return { url, call, batch, batchAnswers }
}

export type RpcClient = ReturnType<typeof createRpcClient>
