import { deflateRawSync } from 'node:zlib'
import type postgres from 'postgres'
import { type Hex, serializeTransaction } from 'viem'
import type { Random } from '../test/fixtures/random.js'

/** Blocks whose transaction and receipt bodies are sampled. */
const SAMPLED_BLOCKS = 20
/** Receipt fields another row already holds or the logs determine (the bloom), which a compact receipt would not store. */
const DERIVABLE_RECEIPT_FIELDS = [
  'blockHash',
  'blockNumber',
  'transactionHash',
  'transactionIndex',
  'from',
  'to',
  'type',
  'contractAddress',
  'logsBloom',
  'effectiveGasPrice',
  'cumulativeGasUsed',
  'logs',
] as const

/** Payload bytes per log of one way of storing a body (row headers and indexes not included). */
export type BodyEstimate = { storedJson: number; deflatedJson: number; compact: number }

export type BodyEstimates = { sampledLogs: number; transactions: BodyEstimate; receipts: BodyEstimate }

const deflatedLength = (text: string) => deflateRawSync(Buffer.from(text), { level: 6 }).length

/**
 * What the transaction and receipt JSON (two thirds of the current layout's bytes) would take stored otherwise,
 * from a sample of blocks: each body deflated on its own (as in-row compression would), and in a compact
 * form: a transaction as its signed RLP (viem's `serializeTransaction`; deposits keep their JSON), a
 * receipt without the fields other rows or its logs determine. Estimates for the report: no resolver reads them.
 */
export async function estimateBodies(sql: postgres.Sql, random: Random, firstBlock: number, head: number): Promise<BodyEstimates> {
  const blocks = Array.from({ length: SAMPLED_BLOCKS }, () => random.int(firstBlock, head))
  const [{ logs }] = (await sql`select count(*)::int as logs from logs where block_number = any(${blocks}::bigint[])`) as unknown as [{ logs: number }]
  const transactions = await sql`select body::text as body from transactions where block_number = any(${blocks}::bigint[])`
  const receipts = await sql`select body::text as body from receipts where block_number = any(${blocks}::bigint[])`
  const perLog = (bytes: number) => Math.round((bytes / logs) * 10) / 10
  const sum = (values: number[]) => values.reduce((total, value) => total + value, 0)
  const transactionTexts = transactions.map((row) => row.body as string)
  const receiptTexts = receipts.map((row) => row.body as string)
  return {
    sampledLogs: logs,
    transactions: {
      storedJson: perLog(sum(transactionTexts.map((text) => Buffer.byteLength(text)))),
      deflatedJson: perLog(sum(transactionTexts.map(deflatedLength))),
      compact: perLog(sum(transactionTexts.map(signedRlpLength))),
    },
    receipts: {
      storedJson: perLog(sum(receiptTexts.map((text) => Buffer.byteLength(text)))),
      deflatedJson: perLog(sum(receiptTexts.map(deflatedLength))),
      compact: perLog(sum(receiptTexts.map((text) => deflatedLength(withoutDerivable(text))))),
    },
  }
}

function signedRlpLength(text: string): number {
  const body = JSON.parse(text) as Record<string, Hex>
  if (body.type !== '0x2') return Buffer.byteLength(text)
  const serialized = serializeTransaction(
    {
      type: 'eip1559',
      chainId: Number(body.chainId),
      nonce: Number(body.nonce),
      gas: BigInt(body.gas!),
      maxFeePerGas: BigInt(body.maxFeePerGas!),
      maxPriorityFeePerGas: BigInt(body.maxPriorityFeePerGas!),
      to: body.to,
      value: BigInt(body.value!),
      data: body.input,
      accessList: [],
    },
    { r: body.r!, s: body.s!, yParity: Number(body.yParity) },
  )
  return (serialized.length - 2) / 2
}

function withoutDerivable(text: string): string {
  const body = JSON.parse(text) as Record<string, unknown>
  for (const field of DERIVABLE_RECEIPT_FIELDS) delete body[field]
  return JSON.stringify(body)
}
