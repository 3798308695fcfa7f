import { type Hex, parseEther, toHex } from 'viem'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { compareWithReference } from './fixtures/compare.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startFaultyProxy } from './fixtures/faulty-proxy.js'
import { startTestGateway, type TestGateway } from './fixtures/gateway.js'
import { anvilCall, waitForSameHead } from './fixtures/sync.js'

// Withdrawals (EIP-4895, an L1 since Shanghai) pay their recipients after a block's transactions and outside
// them, so no transaction's trace shows them. anvil makes no withdrawals, so the payment is made in anvil's own
// state and the proxy in front of it lists it in the block's `withdrawals`, as a node would: anvil's state is
// the reference every answer is compared with. anvil keeps the live state as its head block's until it mines
// the next, so `anvil_setBalance` right after mining a block changes that block's state after its transactions:
// a withdrawal's very effect (and its transactions' traces, replayed from the parent, do not show it).

const GWEI = 1_000_000_000n
/** A recipient that transacted before its withdrawal, and keeps transacting after it. */
const STAKER = '0x00000000000000000000000000000000000057a1'
/** One whose first appearance is a withdrawal, and who is paid by a transaction later. */
const NEWCOMER = '0x00000000000000000000000000000000000057a2'
/** One paid by withdrawals only. */
const PAID_ONLY = '0x00000000000000000000000000000000000057a3'

let anvil: Anvil
let database: TestDatabase
let proxy: Awaited<ReturnType<typeof startFaultyProxy>>
let gateway: TestGateway
/** Block number → its withdrawals as the proxy lists them. */
const withdrawalsOf = new Map<number, { index: Hex; validatorIndex: Hex; address: Hex; amount: Hex }[]>()

beforeAll(async () => {
  anvil = await startAnvil({ noMining: true })
  proxy = await startFaultyProxy(anvil.rpcUrl, {
    rewriteResult: (method, _params, result) => {
      if (!method.startsWith('eth_getBlockBy') || result === null || typeof result !== 'object') return result
      const block = result as { number: Hex }
      const withdrawals = withdrawalsOf.get(Number(block.number))
      return withdrawals === undefined ? result : { ...block, withdrawals }
    },
  })
  database = await createTestDatabase()
})

afterAll(async () => {
  await gateway?.stop()
  await proxy?.stop()
  await anvil?.stop()
  await database?.drop()
})

const node = <value>(method: string, params: unknown[] = []) => anvilCall<value>(anvil.rpcUrl, method, params)

async function mine(): Promise<number> {
  await node('anvil_mine', ['0x1'])
  return Number(await node<Hex>('eth_blockNumber'))
}

/** Mines a block (with what is pending) that pays `payments` by withdrawals: in anvil's state, and in the block's list. */
async function mineWithWithdrawals(payments: [address: Hex, gwei: bigint][]): Promise<number> {
  const number = await mine()
  for (const [address, gwei] of payments) {
    const balance = BigInt(await node<Hex>('eth_getBalance', [address, 'latest']))
    await node('anvil_setBalance', [address, toHex(balance + gwei * GWEI)])
  }
  withdrawalsOf.set(
    number,
    payments.map(([address, gwei], index) => ({ index: toHex(index), validatorIndex: toHex(1000 + index), address, amount: toHex(gwei) })),
  )
  return number
}

async function send(from: Hex, to: Hex, value: bigint) {
  await node('eth_sendTransaction', [{ from, to, value: toHex(value) }])
}

test("withdrawals' payments are in the index's balances, at the block that paid them and every block after and before", async () => {
  const [funder, other] = await node<Hex[]>('eth_accounts')
  await send(funder!, STAKER, parseEther('1'))
  await mine()
  await mine()
  // An empty block paying two recipients, one of them twice (32 ETH and a partial withdrawal).
  const paid = await mineWithWithdrawals([
    [STAKER, 32n * GWEI],
    [NEWCOMER, 5n * GWEI],
    [STAKER, 1_234_567n],
  ])
  await send(funder!, NEWCOMER, parseEther('2'))
  await send(other!, STAKER, parseEther('3'))
  await mine()
  // A block whose transactions touch a recipient too (paid after them), and one paying a never-seen account.
  await node('anvil_impersonateAccount', [STAKER])
  await send(STAKER, other!, parseEther('1'))
  await mineWithWithdrawals([[STAKER, 2n * GWEI]])
  await mineWithWithdrawals([[PAID_ONLY, 7n]])
  await mine()

  gateway = await startTestGateway({ upstreamRpc: proxy.url, databaseUrl: database.databaseUrl })
  const head = await waitForSameHead(gateway, anvil.rpcUrl)
  expect(head).toBeGreaterThan(paid)
  // The proxy did list them: the index stored the block as the node (behind it) gave it.
  expect(await anvilCall<{ withdrawals: unknown[] }>(gateway.dedicatedUrl, 'eth_getBlockByNumber', [toHex(paid), false])).toMatchObject({
    withdrawals: withdrawalsOf.get(paid),
  })

  const queries = [STAKER, NEWCOMER, PAID_ONLY, funder!, other!].flatMap((account) =>
    [...Array.from({ length: head + 1 }, (_, number) => toHex(number)), 'latest', 'earliest'].flatMap((block) =>
      (['eth_getBalance', 'eth_getTransactionCount'] as const).map((method) => ({ method, params: [account, block] })),
    ),
  )
  const { compared, errors } = await compareWithReference(gateway.dedicatedUrl, anvil.rpcUrl, queries)
  expect(compared).toBe(queries.length)
  expect(errors).toBe(0)
})
