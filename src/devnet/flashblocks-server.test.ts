import { brotliDecompressSync } from 'node:zlib'
import { WebSocket } from 'ws'
import { afterEach, describe, expect, test } from 'vitest'
import type { FlashblockWireMessage } from '../pending/message.js'
import { type FlashblocksServer, createFlashblocksServer } from './flashblocks-server.js'

type Frame = { isBinary: boolean; data: Buffer }

const HASH = `0x${'ab'.repeat(32)}` as const
const SAMPLE_MESSAGE: FlashblockWireMessage = {
  payload_id: '0x0307de8ff1df8ed8',
  index: 1,
  diff: {
    state_root: HASH,
    receipts_root: HASH,
    logs_bloom: `0x${'00'.repeat(256)}`,
    gas_used: '0xa410',
    block_hash: HASH,
    transactions: ['0x02f86c827a6980843b9aca00'],
    withdrawals: [],
  },
  metadata: {
    block_number: 7,
    receipts: { [HASH]: { type: '0x2', status: '0x1', cumulativeGasUsed: '0xa410', logs: [] } },
    new_account_balances: { '0x70997970c51812dc3a010c7d01b50e0d17dc79c8': '0x10' },
  },
}

const servers: FlashblocksServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

async function start(plain: boolean): Promise<FlashblocksServer> {
  const server = await createFlashblocksServer({ port: 0, plain })
  servers.push(server)
  return server
}

/** Connects and resolves with the first frame received. */
async function firstFrame(server: FlashblocksServer, send: () => void): Promise<Frame> {
  const socket = new WebSocket(server.url)
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  const frame = new Promise<Frame>((resolve) => socket.once('message', (data: Buffer, isBinary) => resolve({ isBinary, data })))
  send()
  const result = await frame
  socket.close()
  return result
}

describe('flashblocks server', () => {
  test('compressed (binary Brotli) and plain (text) frames decode to the same JSON', async () => {
    const [compressed, plain] = await Promise.all([start(false), start(true)])
    const binaryFrame = await firstFrame(compressed, () => compressed.broadcast(SAMPLE_MESSAGE))
    const textFrame = await firstFrame(plain, () => plain.broadcast(SAMPLE_MESSAGE))

    expect(binaryFrame.isBinary).toBe(true)
    expect(textFrame.isBinary).toBe(false)
    const fromBinary = JSON.parse(brotliDecompressSync(binaryFrame.data).toString('utf8'))
    const fromText = JSON.parse(textFrame.data.toString('utf8'))
    expect(fromBinary).toEqual(fromText)
    expect(fromText).toEqual(SAMPLE_MESSAGE)
  })

  test('every connected client receives each message', async () => {
    const server = await start(true)
    const sockets = await Promise.all(
      [0, 1, 2].map(async () => {
        const socket = new WebSocket(server.url)
        await new Promise((resolve) => socket.once('open', resolve))
        return socket
      }),
    )
    await expect.poll(() => server.clientCount()).toBe(3)
    const received = sockets.map((socket) => new Promise<string>((resolve) => socket.once('message', (data) => resolve(String(data)))))
    server.broadcast(SAMPLE_MESSAGE)
    for (const text of await Promise.all(received)) expect(JSON.parse(text)).toEqual(SAMPLE_MESSAGE)
    for (const socket of sockets) socket.close()
  })

  test('close() disconnects clients and frees the port', async () => {
    const server = await start(false)
    const socket = new WebSocket(server.url)
    await new Promise((resolve) => socket.once('open', resolve))
    const closed = new Promise((resolve) => socket.once('close', resolve))
    await server.close()
    await closed
    const retry = new WebSocket(server.url)
    await expect(new Promise((resolve, reject) => retry.once('open', resolve).once('error', reject))).rejects.toThrow(/ECONNREFUSED/)
  })
})
