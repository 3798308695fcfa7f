// Foundry's `cast`, the first client many developers point at an RPC, prints the same through flashgate as
// straight from anvil: every common read command (block, tx, receipt, logs, balance, nonce, code, storage,
// proof, call, estimate, access-list, age, basefee, find-block, rpc, run) at every block argument it takes,
// default output and `--json`, on a chain with legacy, EIP-2930, EIP-1559 and EIP-7702 transactions, contract
// creations, a token with storage and events, and reverted transactions. The chain is idle while comparing
// (anvil automines and nothing is sent), so both answer for the same head.
//
// Differences by design, left out: `cast client` (flashgate names itself), `cast block pending` (without a
// Flashblocks feed flashgate's pending block is its latest, anvil's is the block it would mine next), `cast rpc
// eth_accounts` (flashgate holds no keys). `eth_feeHistory` is compared as parsed JSON: anvil writes a zero
// ratio `0.0`, and the forwarded answer is parsed and written again as `0`.
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { type Address, createPublicClient, createWalletClient, type Hash, type Hex, http, pad } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Anvil, DEV_MNEMONIC, startAnvil } from '../src/devnet/anvil.js'
import { resolveCastBinary } from './fixtures/cast.js'
import { generateChain } from './fixtures/chain.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEVNET_CHAIN } from './fixtures/flashblocks.js'
import { result, rpc, startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { until, waitForSameHead } from './fixtures/sync.js'

const SEED = 4242
const BLOCKS = 12
const CAST_TIMEOUT_MS = 20_000
/** cast processes run at once (each side of a comparison is one). */
const CAST_CONCURRENCY = 8
/** anvil's ninth dev account: delegates itself to the token with an EIP-7702 transaction. */
const DELEGATOR_INDEX = 8
const TRANSFER_SIGNATURE = 'Transfer(address indexed from, address indexed to, uint256 value)'
const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef'

const castBinary = resolveCastBinary()

type RpcTransaction = { hash: Hash; type: Hex; to: Address | null; from: Address }
type RpcBlock = { number: Hex; hash: Hash; timestamp: Hex; transactions: RpcTransaction[] }

let anvil: Anvil
let database: TestDatabase
let gateway: TestGateway
let home: string
let token: Address
let sender: Address
let recipient: Address
let head: number
/** A block with transactions of several types, by number and hash. */
let busy: { number: number; hash: Hash; timestamp: number }
/** One transaction of each kind the chain holds. */
let samples: Record<'legacy' | 'eip2930' | 'eip1559' | 'eip7702' | 'reverted' | 'creation', Hash>

beforeAll(async () => {
  anvil = await startAnvil()
  const chain = await generateChain(anvil.rpcUrl, { seed: SEED, blocks: BLOCKS })
  token = chain.contracts[0]!
  const delegator = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: DELEGATOR_INDEX })
  const wallet = createWalletClient({ account: delegator, chain: DEVNET_CHAIN, transport: http(anvil.rpcUrl) })
  const authorization = await wallet.signAuthorization({ contractAddress: token, executor: 'self' })
  const delegation = await wallet.sendTransaction({ authorizationList: [authorization], to: delegator.address, data: '0x' })
  await createPublicClient({ transport: http(anvil.rpcUrl) }).waitForTransactionReceipt({ hash: delegation, pollingInterval: 50 })

  database = await createTestDatabase()
  gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
  head = await waitForSameHead(gateway, anvil.rpcUrl)
  // flashgate learns the upstream's safe and finalized heads after a commit: wait until it has them.
  const knowsFinalized = async () => (await rpc(gateway.dedicatedUrl, 'eth_getBlockByNumber', ['finalized', false])).result != null
  await until(knowsFinalized, 10_000, () => 'flashgate never learnt the finalized head')

  const blocks = await Promise.all(
    Array.from({ length: head + 1 }, (_, number) => result<RpcBlock>(anvil.rpcUrl, 'eth_getBlockByNumber', [`0x${number.toString(16)}`, true])),
  )
  const transactions = blocks.flatMap((block) => block.transactions)
  const statuses = new Map(
    await Promise.all(
      transactions.map(
        async (transaction) =>
          [transaction.hash, (await result<{ status: Hex }>(anvil.rpcUrl, 'eth_getTransactionReceipt', [transaction.hash])).status] as const,
      ),
    ),
  )
  const first = (found: RpcTransaction | undefined, kind: string): Hash => {
    if (found === undefined) throw new Error(`the generated chain has no ${kind} transaction: pick another seed`)
    return found.hash
  }
  const succeeded = (transaction: RpcTransaction) => statuses.get(transaction.hash) === '0x1'
  samples = {
    legacy: first(
      transactions.find((transaction) => transaction.type === '0x0' && transaction.to !== null && succeeded(transaction)),
      'legacy',
    ),
    eip2930: first(
      transactions.find((transaction) => transaction.type === '0x1' && succeeded(transaction)),
      'EIP-2930',
    ),
    eip1559: first(
      transactions.find((transaction) => transaction.type === '0x2' && transaction.to !== null && succeeded(transaction)),
      'EIP-1559',
    ),
    eip7702: delegation,
    reverted: first(
      transactions.find((transaction) => !succeeded(transaction)),
      'reverted',
    ),
    creation: first(
      transactions.find((transaction) => transaction.to === null),
      'creation',
    ),
  }
  sender = transactions.find((transaction) => transaction.hash === samples.eip1559)!.from
  recipient = chain.recipients.find((address) => address.toLowerCase() !== sender.toLowerCase())!
  const richest = blocks.reduce((best, block) =>
    new Set(block.transactions.map((t) => t.type)).size > new Set(best.transactions.map((t) => t.type)).size ? block : best,
  )
  busy = { number: Number(richest.number), hash: richest.hash, timestamp: Number(richest.timestamp) }
  home = await mkdtemp(join(tmpdir(), 'flashgate-cast-parity-'))
}, 60_000)

afterAll(async () => {
  await gateway?.stop()
  await anvil?.stop()
  await database?.drop()
  if (home) await rm(home, { recursive: true, force: true })
})

type CastOutcome = { stdout: string; failed: boolean }

/** Runs cast with `--rpc-url`; a failing command's outcome is its error text, so that failures compare too. */
async function cast(args: string[], rpcUrl: string): Promise<CastOutcome> {
  const env = { PATH: process.env.PATH ?? '', HOME: home, NO_COLOR: '1', FOUNDRY_DISABLE_NIGHTLY_WARNING: '1' }
  try {
    const { stdout } = await promisify(execFile)(castBinary!, [...args, '--rpc-url', rpcUrl], { env, cwd: home, timeout: CAST_TIMEOUT_MS })
    return { stdout: stdout.trim(), failed: false }
  } catch (error) {
    const { stderr } = error as { stderr?: string }
    return { stdout: (stderr ?? String(error)).trim(), failed: true }
  }
}

/** Each command through flashgate and through anvil, at most CAST_CONCURRENCY processes at once. */
async function bothWays(commands: string[][]): Promise<{ args: string[]; ours: CastOutcome; theirs: CastOutcome }[]> {
  const outcomes: { args: string[]; ours: CastOutcome; theirs: CastOutcome }[] = []
  let next = 0
  const runner = async () => {
    while (next < commands.length) {
      const args = commands[next++]!
      const [ours, theirs] = await Promise.all([cast(args, gateway.dedicatedUrl), cast(args, anvil.rpcUrl)])
      outcomes.push({ args, ours, theirs })
    }
  }
  await Promise.all(Array.from({ length: CAST_CONCURRENCY / 2 }, runner))
  return outcomes
}

/** Expects every command to print the same through both, and to succeed unless listed as failing on anvil too. */
async function expectSameOutput(commands: string[][], { mayFail = false } = {}) {
  const outcomes = await bothWays(commands)
  const differing = outcomes
    .filter(({ ours, theirs }) => ours.stdout !== theirs.stdout || ours.failed !== theirs.failed)
    .map(({ args, ours, theirs }) => ({ command: `cast ${args.join(' ')}`, flashgate: ours.stdout, anvil: theirs.stdout }))
  expect(differing).toEqual([])
  if (!mayFail) expect(outcomes.filter(({ theirs }) => theirs.failed).map(({ args, theirs }) => `cast ${args.join(' ')}: ${theirs.stdout}`)).toEqual([])
  return outcomes
}

/** Block numbers, a hash and every tag but pending (safe and finalized are block 0 on a chain this short). */
const blockArguments = () => ['1', String(busy.number), busy.hash, 'latest', 'earliest', 'safe', 'finalized']

describe.skipIf(castBinary === undefined)('cast prints the same through flashgate as from anvil', () => {
  test('cast block (default, --json, --full, -f, --raw) at numbers, a hash and every tag but pending; cast block-number, age, basefee', async () => {
    const commands: string[][] = [
      ...blockArguments().map((block) => ['block', block, '--json']),
      ...['latest', busy.hash].flatMap((block) => [
        ['block', block],
        ['block', block, '--full', '--json'],
      ]),
      ['block', String(busy.number), '--full'],
      ['block', `0x${busy.number.toString(16)}`, '-f', 'hash'],
      ['block', String(busy.number), '--raw'],
      ['block-number'],
      ['age', String(busy.number)],
      ['basefee', busy.hash],
    ]
    await expectSameOutput(commands)
  })

  test('cast tx and cast receipt (default, --json, a field) for legacy, 2930, 1559, 7702, reverted and creating transactions', async () => {
    const commands: string[][] = Object.values(samples).flatMap((hash) => [
      ['tx', hash, '--json'],
      ['receipt', hash, '--json'],
    ])
    commands.push(['tx', samples.eip7702], ['receipt', samples.reverted], ['tx', samples.eip2930, 'from'], ['receipt', samples.creation, 'contractAddress'])
    await expectSameOutput(commands)
  })

  test('cast logs over ranges and tags, by address, topics and event signature', async () => {
    const range = ['--from-block', '0', '--to-block', String(head)]
    const commands = [
      ['logs', ...range, '--address', token, '--json'],
      ['logs', ...range, '--address', token, TRANSFER_SIGNATURE, sender, recipient],
      ['logs', '--from-block', busy.hash, '--to-block', busy.hash, '--json'],
      ['logs', '--from-block', '1', '--to-block', String(busy.number), TRANSFER_TOPIC, pad(sender)],
      ['logs', '--from-block', 'earliest', '--to-block', 'finalized', '--address', token],
      ['logs', '--from-block', 'safe', '--to-block', 'latest', TRANSFER_SIGNATURE],
      ['logs', '--from-block', String(busy.number), '--to-block', '1'],
      ['logs', '--from-block', 'latest', '--to-block', 'pending'],
    ]
    await expectSameOutput(commands)
  })

  test('cast balance, nonce and call at a number, a hash, latest, earliest and pending; code, codesize, storage, proof', async () => {
    const commands: string[][] = [
      ['codesize', token],
      ['code', token],
      ['storage', token, '2'],
      ['proof', token, '0'],
      ['balance', sender, '-e'],
    ]
    for (const block of [String(busy.number), busy.hash, 'latest', 'earliest', 'pending']) {
      const at = ['--block', block]
      commands.push(['balance', sender, ...at], ['nonce', sender, ...at], ['call', token, 'balanceOf(address)(uint256)', sender, ...at])
    }
    // At earliest (block 0) the token is not deployed yet: the call fails on both.
    const outcomes = await expectSameOutput(commands, { mayFail: true })
    const succeeded = outcomes.filter(({ theirs }) => !theirs.failed).map(({ args }) => args.join(' '))
    expect(succeeded.length).toBe(commands.length - 1)
  })

  test('cast estimate, access-list, call --trace, gas-price, chain-id, find-block, rpc, run', async () => {
    const transfer = [token, 'transfer(address,uint256)', recipient, '1', '--from', sender]
    const commands: string[][] = [
      ['estimate', ...transfer],
      ['estimate', ...transfer, '--block', String(busy.number)],
      ['access-list', ...transfer, '--json'],
      ['access-list', ...transfer, '--block', 'pending'],
      ['call', ...transfer, '--trace'],
      ['gas-price'],
      ['chain-id'],
      ['chain'],
      ['find-block', String(busy.timestamp)],
      ['rpc', 'eth_getBlockByNumber', `0x${busy.number.toString(16)}`, 'true'],
      ['rpc', 'eth_getBlockReceipts', busy.hash],
      ['rpc', 'eth_getTransactionByBlockNumberAndIndex', `0x${busy.number.toString(16)}`, '0x1'],
      ['rpc', 'eth_getLogs', JSON.stringify({ blockHash: busy.hash })],
      ['rpc', 'eth_maxPriorityFeePerGas'],
      ['run', samples.eip1559],
      ['run', samples.reverted],
      ['run', samples.legacy, '--quick'],
    ]
    await expectSameOutput(commands)
    // A transfer of more than the sender holds reverts the same way through both.
    await expectSameOutput([['estimate', token, 'transfer(address,uint256)', recipient, `${10n ** 30n}`, '--from', sender]], { mayFail: true })
    const [ours, theirs] = await Promise.all([
      cast(['rpc', 'eth_feeHistory', '4', 'latest', '[25,75]'], gateway.dedicatedUrl),
      cast(['rpc', 'eth_feeHistory', '4', 'latest', '[25,75]'], anvil.rpcUrl),
    ])
    expect(JSON.parse(ours.stdout)).toEqual(JSON.parse(theirs.stdout))
  })
})
