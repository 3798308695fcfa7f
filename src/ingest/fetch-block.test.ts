import { describe, expect, test } from 'vitest'
import { isUnsupported } from './fetch-block.js'

/** An error as viem's transport throws it: the node's words in `details`, the request quoted in `message`. */
const rpcError = (code: number, details: string, method = 'debug_traceBlockByHash') => ({
  code,
  details,
  message: `Missing or invalid parameters.\nRequest body: {"method":"${method}","params":[]}\n\nDetails: ${details}`,
})

describe('isUnsupported', () => {
  test.each([
    [-32601, 'the method debug_traceBlockByHash does not exist/is not available'],
    [-32601, 'Method not found'],
    [-32004, 'method not supported'],
    [-32000, 'Unsupported method: debug_traceBlockByHash. See available methods at https://docs.example.com'],
    [-32001, 'debug_traceBlockByHash is not available on the Free tier - upgrade to a paid plan'],
    [-32000, 'method debug_traceBlockByHash is not whitelisted'],
    [-32000, 'tracer not found'],
    [-32602, 'unknown tracer "prestateTracer"'],
  ])('%i %s: the node does not offer it', (code, details) => {
    expect(isUnsupported(rpcError(code, details), 'debug_traceBlockByHash')).toBe(true)
  })

  test.each([
    [-32000, 'historical state not available'],
    [-32000, 'required historical state unavailable (reexec=128)'],
    [-32000, 'missing trie node 5b1c... (path ) state 0x5b1c is not available'],
    [-32000, 'block 0x1234 does not exist'],
    [-32000, 'header not found'],
    [-32603, 'backend is not available, retry later'],
    [-32005, 'request rate exceeded'],
    [-32000, 'execution timeout'],
  ])('%i %s: a failure to retry, not a missing method', (code, details) => {
    expect(isUnsupported(rpcError(code, details), 'debug_traceBlockByHash')).toBe(false)
  })

  test('the method named in the quoted request does not count as the node naming it', () => {
    const error = rpcError(-32000, 'state is not available', 'eth_getBlockReceipts')
    expect(error.message).toContain('eth_getBlockReceipts')
    expect(isUnsupported(error, 'eth_getBlockReceipts')).toBe(false)
  })
})
