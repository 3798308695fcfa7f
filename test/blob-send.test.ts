import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { toHex } from 'viem'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { resolveCastBinary } from './fixtures/cast.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall } from './fixtures/sync.js'

// EIP-4844 transactions as wallets send them: in the network form, with their blobs, commitments and proofs.
// The node mines the transaction without them; flashgate must know it by that hash and sender too.
const castBinary = resolveCastBinary()
const SENDER = DEV_ACCOUNTS[4]!
const SENDER_KEY = toHex(SENDER.getHdKey().privateKey!)
const RECIPIENT = '0x000000000000000000000000000000000000dEaD'

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let home: string

beforeAll(async () => {
  anvil = await startAnvil()
  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  home = await mkdtemp(join(tmpdir(), 'flashgate-blob-'))
  await writeFile(join(home, 'blob.txt'), 'a blob for flashgate\n'.repeat(64))
})

afterAll(async () => {
  await gateway?.stop()
  await database?.drop()
  await anvil?.stop()
  if (home) await rm(home, { recursive: true, force: true })
})

/** A signed blob transaction in its network form, made by foundry's cast. */
async function blobTransaction(nonce: number): Promise<`0x${string}`> {
  const env = { PATH: process.env.PATH ?? '', HOME: home, NO_COLOR: '1', FOUNDRY_DISABLE_NIGHTLY_WARNING: '1' }
  const args = ['mktx', '--blob', '--path', join(home, 'blob.txt'), '--nonce', String(nonce), '--private-key', SENDER_KEY, '--rpc-url', anvil.rpcUrl, RECIPIENT]
  const { stdout } = await promisify(execFile)(castBinary!, args, { env, cwd: home, timeout: 30_000 })
  return stdout.trim() as `0x${string}`
}

test.skipIf(castBinary === undefined)(
  "a blob transaction sent with its sidecar: eth_sendRawTransactionSync answers the node's receipt, and the sender's pending nonce counts it",
  async () => {
    const nonce = Number(await anvilCall<string>(anvil.rpcUrl, 'eth_getTransactionCount', [SENDER.address, 'latest']))
    const first = await blobTransaction(nonce)
    // The network form: its RLP list starts with the transaction's own list, not its chain id.
    expect(first.startsWith('0x03')).toBe(true)
    const synced = await rpc(gateway.dedicatedUrl, 'eth_sendRawTransactionSync', [first, 6_000])
    expect(synced.error).toBeUndefined()
    const receipt = synced.result as { transactionHash: `0x${string}`; status: string; from: string; blobGasUsed?: string }
    expect(receipt).toEqual(await anvilCall(anvil.rpcUrl, 'eth_getTransactionReceipt', [receipt.transactionHash]))
    expect(receipt.from).toBe(SENDER.address.toLowerCase())
    expect(receipt.status).toBe('0x1')

    // Sent without waiting, with the node not mining: known by the node's hash, from its real sender.
    await anvilCall(anvil.rpcUrl, 'evm_setAutomine', [false])
    try {
      const second = await blobTransaction(nonce + 1)
      const sent = await rpc(gateway.dedicatedUrl, 'eth_sendRawTransaction', [second])
      const hash = sent.result as `0x${string}`
      const transaction = (await rpc(gateway.dedicatedUrl, 'eth_getTransactionByHash', [hash])).result as { hash: string; from: string; nonce: string } | null
      expect(transaction).toMatchObject({ hash, from: SENDER.address.toLowerCase(), nonce: `0x${(nonce + 1).toString(16)}` })
      expect((await rpc(gateway.dedicatedUrl, 'eth_getTransactionCount', [SENDER.address, 'pending'])).result).toBe(`0x${(nonce + 2).toString(16)}`)
    } finally {
      await anvilCall(anvil.rpcUrl, 'evm_setAutomine', [true])
    }
  },
  60_000,
)
