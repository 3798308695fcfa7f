import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startAnvil } from '../devnet/anvil.js'
import { UpstreamError, UpstreamRpcError } from '../errors.js'
import { createUpstream } from './index.js'
import { createPassThrough } from './pass-through.js'

// A loopback HTTP server standing in for a node that answers nonsense: a real socket, not a mock.
const garbage = createServer((_request, response) => response.end('{"jsonrpc":"2.0","id":1}'))
let garbageUrl: string

beforeAll(async () => {
  await new Promise<void>((resolve) => garbage.listen(0, '127.0.0.1', resolve))
  garbageUrl = `http://127.0.0.1:${(garbage.address() as AddressInfo).port}`
})

afterAll(() => new Promise<void>((resolve) => garbage.close(() => resolve())))

describe('createPassThrough', () => {
  test('a method off the allowlist is not forwarded at all', () => {
    const passThrough = createPassThrough({ upstream: createUpstream({ rpcUrl: 'http://127.0.0.1:1' }) })
    expect(passThrough('anvil_setBalance', [])).toBeNull()
    expect(passThrough('eth_getLogs', [])).toBeNull()
  })

  test('an unreachable upstream is an UpstreamError (-32603)', async () => {
    const passThrough = createPassThrough({ upstream: createUpstream({ rpcUrl: 'http://127.0.0.1:1' }) })
    const failure = await passThrough('eth_gasPrice', [])!.catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(UpstreamError)
    expect(failure).toMatchObject({ code: -32603, message: 'upstream unavailable' })
  })

  test("params nested too deeply to forward are the caller's mistake: -32602, and nothing is sent", async () => {
    let nested: unknown = 0
    for (let depth = 0; depth < 20_000; depth++) nested = [nested]
    const passThrough = createPassThrough({ upstream: createUpstream({ rpcUrl: garbageUrl }) })
    const failure = await passThrough('eth_call', [nested])!.catch((error: unknown) => error)
    expect(failure).toMatchObject({ code: -32602, message: 'invalid params: nested too deeply to forward' })
  })

  test('an eth_feeHistory block count over 64 bits is refused as geth refuses it, never sent: anvil panics on it and stops', async () => {
    const anvil = await startAnvil()
    try {
      const passThrough = createPassThrough({ upstream: createUpstream({ rpcUrl: anvil.rpcUrl }) })
      // In every form anvil's parser reads one (ruint's: prefixes in either case, `_` between digits, a JSON integer).
      for (const [count, kind] of [
        ['0xffffffffffffffffff', 'hex'],
        ['0X10000000000000000', 'hex'],
        ['18446744073709551616', 'decimal'],
        ['18_446_744_073_709_551_616', 'decimal'],
        [`0b1${'0'.repeat(64)}`, 'decimal'],
        [`0o2${'0'.repeat(22)}`, 'decimal'],
        [2 ** 64, 'decimal'],
      ] as const) {
        const failure = await passThrough('eth_feeHistory', [count, 'latest', []])!.catch((error: unknown) => error)
        expect(failure, String(count)).toMatchObject({ code: -32602, message: `invalid argument 0: ${kind} number > 64 bits` })
      }
      // A string no node reads as a number is refused here too: never guessed at by the node's parser.
      for (const count of ['0x', ' 0x5', '1e3', '0x_', '+5']) {
        const failure = await passThrough('eth_feeHistory', [count, 'latest', []])!.catch((error: unknown) => error)
        expect(failure, count).toMatchObject({ code: -32602, message: `invalid argument 0: invalid hex or decimal integer ${JSON.stringify(count)}` })
      }
      // A count that fits goes on as a hex quantity, whatever form it came in.
      for (const count of ['0X1', '0b1', '0o1', '1', 1, '0x_1']) {
        const history = (await passThrough('eth_feeHistory', [count, 'latest', []])) as { baseFeePerGas: string[] }
        expect(history.baseFeePerGas, String(count)).toHaveLength(2)
      }
      // The node is still there, and a count that fits is its to answer.
      const history = (await passThrough('eth_feeHistory', ['0xffffffffffffffff', 'latest', []])) as { baseFeePerGas: string[] }
      expect(history.baseFeePerGas.length).toBeGreaterThan(0)
    } finally {
      await anvil.stop()
    }
  })

  test('an answer without result or error is an UpstreamError, not a null result', async () => {
    const passThrough = createPassThrough({ upstream: createUpstream({ rpcUrl: garbageUrl }) })
    const failure = await passThrough('eth_gasPrice', [])!.catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(UpstreamError)
    expect(failure).not.toBeInstanceOf(UpstreamRpcError)
  })
})
