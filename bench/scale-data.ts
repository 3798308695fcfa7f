import { sql as drizzleSql } from 'drizzle-orm'
import type postgres from 'postgres'
import { BODY_DEFLATE_LEVEL, deflateSegmented } from '../src/codecs/segmented.js'
import type { Db } from '../src/db/index.js'
import { type ReceiptJsonRow, receiptJsonRows, renderReceipts } from '../src/db/upgrade.js'
import type { ScaleLayout } from './scale-layouts.js'

/**
 * Synthetic Base-shaped history, generated inside Postgres (`INSERT … SELECT` over `generate_series`, no
 * round trip per row) into the tables the ingester fills, with the rows it writes (src/ingest/block-data.ts):
 * headers as the upstream's JSON, each transaction's keys, one row per log, the balance and nonce changes of
 * each block, and each block's transactions and receipts answers deflated in segments. The bodies of the
 * first blocks are generated as the upstream's JSON and rendered by the ingester's own code into templates,
 * which every later block's rows reuse in turn (same sizes, without rendering 100M logs in Node). Every value is a hash of its position (block,
 * transaction, log), so a run repeats exactly and the parameters of the measured queries can be drawn from
 * the same distributions (the `bench_*` SQL functions below are the one definition of them).
 */

/** Base: a block every 2 s. */
export const BLOCK_TIME_S = 2
export const CHAIN_ID = 8_453
/** Where the synthetic chain starts (about Base's height in 2025), and that block's timestamp. */
export const FIRST_BLOCK = 30_000_000
const FIRST_BLOCK_TIMESTAMP_S = 1_748_000_000
/** Transactions per block, the first of them the L1-attributes deposit that every OP-stack block opens with. */
export const TRANSACTIONS_PER_BLOCK = 250
/** Blocks written per statement: ~150,000 logs, a few seconds each. */
export const BLOCKS_PER_CHUNK = 100

/**
 * How many distinct accounts, tokens, pools… each draw picks from. A draw takes rank `floor(n^u)` for a
 * uniform `u`: rank r comes up with probability ~ 1/(r ln n) (Zipf with exponent 1), so a few hot ones
 * (rank 1 and 2 of the tokens are the USDC- and WETH-like ones) and a long tail.
 */
export const POPULATION = {
  accounts: 5_000_000,
  tokens: 200_000,
  pools: 50_000,
  routers: 20,
  tailContracts: 1_000_000,
  /** Event signatures of the long-tail contracts (Transfer, Approval, Sync and Swap are the common four). */
  tailEvents: 200,
} as const

/** `bench_addr(kind, rank)`: one address space per kind of account. */
export const ADDRESS_KIND = { account: 1, token: 2, pool: 3, tailContract: 4, router: 5 } as const
/** The seed that makes each tail event signature: `bench_b32(rank, EVENT_SIGNATURE_SALT)`. */
export const EVENT_SIGNATURE_SALT = 90

/** topic0 of the common events (keccak256 of their signatures). */
export const EVENT_TOPICS = {
  transfer: '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef',
  approval: '0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925',
  sync: '0x1c411e9a96e071241c2f21f7726b17ae89e3cab4c78be50e062b03a9fffbbad1',
  swap: '0xd78ad95fa46c994b6551d0da85fc275fe613ce37657fb8d5e3d130840159d822',
} as const

/** OP-stack system accounts: the depositor of the L1-attributes transaction, L1Block, and the three fee vaults. */
export const SYSTEM_ADDRESSES = {
  depositor: '0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001',
  l1Block: '0x4200000000000000000000000000000000000015',
  sequencerFeeVault: '0x4200000000000000000000000000000000000011',
  baseFeeVault: '0x4200000000000000000000000000000000000019',
  l1FeeVault: '0x420000000000000000000000000000000000001a',
} as const

/**
 * Kinds of transaction after the deposit, by share, and the logs each emits (in order):
 * ETH transfer: none; token transfer: Transfer; approve-and-transfer: Approval, Transfer;
 * DEX swap: Transfer×2, Sync, Swap; two-hop swap: that twice; long-tail contract call: 8-49 logs of
 * the tail's events. About 6 logs per transaction: ~1,500 per block.
 */
const KIND = { deposit: 0, eth: 1, transfer: 2, approve: 3, swap: 4, twoHop: 5, tail: 6 } as const
const KIND_SHARES: [kind: number, cumulativeShare: number, logs: string][] = [
  [KIND.eth, 0.1, '0'],
  [KIND.transfer, 0.4, '1'],
  [KIND.approve, 0.45, '2'],
  [KIND.swap, 0.75, '4'],
  [KIND.twoHop, 0.88, '8'],
  [KIND.tail, 1, `8 + floor(bench_u(b * 256 + t, 2) * 42)::int`],
]

const hexLiteral = (hex: string) => `'\\x${hex.replace(/^0x/, '')}'::bytea`
const ZERO_WORD = hexLiteral('00'.repeat(32))

/** The draws, the per-transaction plan and its derived accounts, as SQL functions that the planner inlines. */
const FUNCTIONS = `
create function bench_u(k bigint, salt int) returns float8 language sql immutable parallel safe as
  $$ select (hashint8extended(k, salt) & 4503599627370495)::float8 / 4503599627370496.0 $$;
create function bench_zipf(u float8, n bigint) returns bigint language sql immutable parallel safe as
  $$ select floor(exp(u * ln(n::float8)))::bigint $$;
create function bench_b32(k bigint, salt int) returns bytea language sql immutable parallel safe as
  $$ select int8send(hashint8extended(k, salt)) || int8send(hashint8extended(k, salt + 100000))
       || int8send(hashint8extended(k, salt + 200000)) || int8send(hashint8extended(k, salt + 300000)) $$;
create function bench_addr(kind int, rank bigint) returns bytea language sql immutable parallel safe as
  $$ select substr(bench_b32(rank, kind), 1, 20) $$;
create function bench_word(address bytea) returns bytea language sql immutable parallel safe as
  $$ select ${hexLiteral('00'.repeat(12))} || address $$;
create function bench_amount(k bigint, salt int) returns bytea language sql immutable parallel safe as
  $$ select ${hexLiteral('00'.repeat(20))} || substr(bench_b32(k, salt), 1, 12) $$;
create function bench_hex(value bytea) returns text language sql immutable parallel safe as
  $$ select '0x' || encode(value, 'hex') $$;
create function bench_qty(value bigint) returns text language sql immutable parallel safe as
  $$ select '0x' || to_hex(value) $$;
create function bench_block_hash(b bigint) returns bytea language sql immutable parallel safe as
  $$ select bench_b32(b, 17) $$;
create function bench_timestamp(b bigint) returns bigint language sql immutable parallel safe as
  $$ select ${FIRST_BLOCK_TIMESTAMP_S} + ${BLOCK_TIME_S} * (b - ${FIRST_BLOCK}) $$;

-- Each transaction's kind, log count and the index of its first log in the block.
create function bench_txs(b0 bigint, b1 bigint) returns table(b bigint, t int, kind int, n int, first_log int)
language sql immutable as $$
  select b, t, kind, n, (sum(n) over (partition by b order by t) - n)::int
  from (
    select b, t, kind,
      case kind ${KIND_SHARES.map(([kind, , logs]) => `when ${kind} then ${logs}`).join(' ')} else 0 end as n
    from (
      select b, t, case when t = 0 then ${KIND.deposit}
        ${KIND_SHARES.map(([kind, share]) => `when bench_u(b * 256 + t, 1) < ${share} then ${kind}`).join(' ')} end as kind
      from generate_series(b0, b1) b, generate_series(0, ${TRANSACTIONS_PER_BLOCK - 1}) t
    ) drawn
  ) counted
$$;

-- The accounts a transaction involves: sender, recipient, token, router and tail contract (each used by some kinds).
create function bench_tx_rows(b0 bigint, b1 bigint) returns table(
  b bigint, t int, kind int, n int, first_log int, k bigint, hash bytea,
  sender bytea, recipient bytea, token bytea, router bytea, contract bytea, target bytea)
language sql immutable as $$
  select b, t, kind, n, first_log, k, hash, sender, recipient, token, router, contract,
    case kind when ${KIND.deposit} then ${hexLiteral(SYSTEM_ADDRESSES.l1Block)} when ${KIND.eth} then recipient
      when ${KIND.transfer} then token when ${KIND.approve} then token
      when ${KIND.swap} then router when ${KIND.twoHop} then router else contract end
  from (
    select x.b, x.t, x.kind, x.n, x.first_log, x.b * 256 + x.t as k, bench_b32(x.b * 256 + x.t, 7) as hash,
      case when x.t = 0 then ${hexLiteral(SYSTEM_ADDRESSES.depositor)}
        else bench_addr(${ADDRESS_KIND.account}, bench_zipf(bench_u(x.b * 256 + x.t, 3), ${POPULATION.accounts})) end as sender,
      bench_addr(${ADDRESS_KIND.account}, bench_zipf(bench_u(x.b * 256 + x.t, 9), ${POPULATION.accounts})) as recipient,
      bench_addr(${ADDRESS_KIND.token}, bench_zipf(bench_u(x.b * 256 + x.t, 4), ${POPULATION.tokens})) as token,
      bench_addr(${ADDRESS_KIND.router}, bench_zipf(bench_u(x.b * 256 + x.t, 8), ${POPULATION.routers})) as router,
      bench_addr(${ADDRESS_KIND.tailContract}, bench_zipf(bench_u(x.b * 256 + x.t, 6), ${POPULATION.tailContracts})) as contract
    from bench_txs(b0, b1) x
  ) accounts
$$;

create table bench_receipts_template (slot int primary key, deflated bytea not null, plain_length int not null, adler32 bigint not null,
  segment_offsets int[] not null);
create table bench_transactions_template (like bench_receipts_template);
`

/** Blocks whose transactions and receipts are rendered (by the ingester's own code) and reused, in turn, for every block's rows. */
const RECEIPT_TEMPLATES = 16

const BLOCKS = `
insert into blocks (number, hash, parent_hash, timestamp, header)
select b, bench_block_hash(b), bench_block_hash(b - 1), bench_timestamp(b), format(
  '{"baseFeePerGas":"%s","blobGasUsed":"0x0","difficulty":"0x0","excessBlobGas":"0x0","extraData":"0x00000000fa00000006","gasLimit":"0x8f0d180","gasUsed":"%s","hash":"%s","logsBloom":"0x%s","miner":"${SYSTEM_ADDRESSES.sequencerFeeVault}","mixHash":"%s","nonce":"0x0000000000000000","number":"%s","parentBeaconBlockRoot":"%s","parentHash":"%s","receiptsRoot":"%s","requestsHash":"0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","sha3Uncles":"0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347","size":"%s","stateRoot":"%s","timestamp":"%s","totalDifficulty":"0x0","transactions":[],"transactionsRoot":"%s","uncles":[],"withdrawals":[],"withdrawalsRoot":"%s"}',
  bench_qty(1000000 + floor(bench_u(b, 50) * 5000000)::bigint), bench_qty(40000000 + floor(bench_u(b, 51) * 80000000)::bigint),
  bench_hex(bench_block_hash(b)), repeat('ff', 256), bench_hex(bench_b32(b, 52)), bench_qty(b), bench_hex(bench_b32(b, 53)),
  bench_hex(bench_block_hash(b - 1)), bench_hex(bench_b32(b, 54)), bench_qty(100000 + floor(bench_u(b, 55) * 200000)::bigint),
  bench_hex(bench_b32(b, 56)), bench_qty(bench_timestamp(b)), bench_hex(bench_b32(b, 57)), bench_hex(bench_b32(b, 58))
)::json
from generate_series($1::bigint, $2::bigint) b`

/**
 * Transactions with their bodies as the upstream's JSON, for the template blocks only (the index keeps bodies
 * per block, in `block_transactions`). Calldata: a selector, then ABI words (addresses, amounts, small
 * integers) repeated to the kind's length.
 */
const TRANSACTIONS = `
insert into transactions (hash, block_number, transaction_index, "from", "to", body)
select x.hash, x.b, x.t, x.sender, x.target, case when x.t = 0 then format(
  '{"blockHash":"%s","blockNumber":"%s","from":"${SYSTEM_ADDRESSES.depositor}","gas":"0xf4240","gasPrice":"0x0","hash":"%s","input":"%s","nonce":"%s","to":"${SYSTEM_ADDRESSES.l1Block}","transactionIndex":"0x0","value":"0x0","type":"0x7e","v":"0x0","r":"0x0","s":"0x0","sourceHash":"%s","mint":"0x0","isSystemTx":false,"depositReceiptVersion":"0x1"}',
  bench_hex(bench_block_hash(x.b)), bench_qty(x.b), bench_hex(x.hash), c.input, bench_qty(x.b - 1000000), bench_hex(bench_b32(x.k, 32))
) else format(
  '{"blockHash":"%s","blockNumber":"%s","from":"%s","gas":"%s","gasPrice":"%s","maxFeePerGas":"%s","maxPriorityFeePerGas":"%s","hash":"%s","input":"%s","nonce":"%s","to":"%s","transactionIndex":"%s","value":"%s","type":"0x2","accessList":[],"chainId":"${`0x${CHAIN_ID.toString(16)}`}","v":"%s","r":"%s","s":"%s","yParity":"%s"}',
  bench_hex(bench_block_hash(x.b)), bench_qty(x.b), bench_hex(x.sender), bench_qty(c.gas * 5 / 4), bench_qty(c.gas_price), bench_qty(c.gas_price * 2),
  bench_qty(c.gas_price / 5), bench_hex(x.hash), c.input, bench_qty(floor(bench_u(x.k, 14) * 200000)::bigint), bench_hex(x.target), bench_qty(x.t),
  case when x.kind = ${KIND.eth} then bench_qty(floor(bench_u(x.k, 15) * 1e17)::bigint) else '0x0' end,
  c.parity, bench_hex(bench_b32(x.k, 30)), bench_hex(bench_b32(x.k, 31)), c.parity
) end::json
from bench_tx_rows($1::bigint, $2::bigint) x
cross join lateral (
  select case x.kind when ${KIND.deposit} then 5 when ${KIND.eth} then 0 when ${KIND.transfer} then 2 when ${KIND.approve} then 3
    when ${KIND.swap} then 8 + floor(bench_u(x.k, 16) * 13)::int when ${KIND.twoHop} then 16 + floor(bench_u(x.k, 16) * 25)::int
    else 1 + floor(bench_u(x.k, 16) * 30)::int end as words
) w
cross join lateral (
  select case when w.words = 0 then '0x' else '0x' || encode(substr(bench_b32(x.k, 33), 1, 4), 'hex') || substr(repeat(encode(
    bench_word(x.sender) || bench_amount(x.k, 34) || ${hexLiteral(`${'00'.repeat(31)}01`)} || bench_word(x.target), 'hex'), (w.words + 3) / 4), 1, 64 * w.words) end as input,
    21000 + 16 * (4 + 32 * w.words) + 30000 * x.n as gas,
    5000000 + floor(bench_u(x.k, 35) * 1000000)::bigint as gas_price,
    case when bench_u(x.k, 36) < 0.5 then '0x0' else '0x1' end as parity
) c`

/**
 * Receipts without logs, as the index stored them before migration 0009, for the template blocks only
 * (rendered with their logs by the legacy renderer); the bloom holds about as many random bytes as its logs
 * would set bits.
 */
const RECEIPTS = `
insert into receipts (transaction_hash, block_number, transaction_index, body)
select x.hash, x.b, x.t, case when x.t = 0 then format(
  '{"blockHash":"%s","blockNumber":"%s","contractAddress":null,"cumulativeGasUsed":"0xb0c7","depositNonce":"%s","depositReceiptVersion":"0x1","effectiveGasPrice":"0x0","from":"${SYSTEM_ADDRESSES.depositor}","gasUsed":"0xb0c7","logs":[],"logsBloom":"0x%s","status":"0x1","to":"${SYSTEM_ADDRESSES.l1Block}","transactionHash":"%s","transactionIndex":"0x0","type":"0x7e"}',
  bench_hex(bench_block_hash(x.b)), bench_qty(x.b), bench_qty(x.b - 1000000), repeat('00', 256), bench_hex(x.hash)
) else format(
  '{"blockHash":"%s","blockNumber":"%s","contractAddress":null,"cumulativeGasUsed":"%s","effectiveGasPrice":"%s","from":"%s","gasUsed":"%s","l1BaseFeeScalar":"0x8dd","l1BlobBaseFee":"0x1","l1BlobBaseFeeScalar":"0x101c12","l1Fee":"%s","l1GasPrice":"%s","l1GasUsed":"%s","logs":[],"logsBloom":"0x%s","status":"0x1","to":"%s","transactionHash":"%s","transactionIndex":"%s","type":"0x2"}',
  bench_hex(bench_block_hash(x.b)), bench_qty(x.b), bench_qty(150000 * x.t), bench_qty(5000000 + floor(bench_u(x.k, 35) * 1000000)::bigint), bench_hex(x.sender),
  bench_qty(21000 + 30000 * x.n + floor(bench_u(x.k, 37) * 100000)::bigint), bench_qty(floor(bench_u(x.k, 38) * 1e12)::bigint),
  bench_qty(1000000000 + floor(bench_u(x.k, 39) * 1e9)::bigint), bench_qty(1600 + floor(bench_u(x.k, 40) * 8000)::bigint),
  encode(substr(bench_b32(x.k, 41) || bench_b32(x.k, 42) || bench_b32(x.k, 43) || bench_b32(x.k, 44) || bench_b32(x.k, 45)
    || bench_b32(x.k, 46) || bench_b32(x.k, 47) || bench_b32(x.k, 48), 1, least(256, 10 * x.n)), 'hex') || repeat('00', 256 - least(256, 10 * x.n)),
  bench_hex(x.target), bench_hex(x.hash), bench_qty(x.t)
) end::json
from bench_tx_rows($1::bigint, $2::bigint) x`

/**
 * Each log's columns as SQL over `x` (its transaction), `j` (its position in the transaction) and `p` (its
 * role: 1 Transfer, 2 Approval, 3 Sync, 4 Swap, 5 a tail event; `pool` for swaps; `lk` its key).
 */
const LOG_COLUMN_SQL = {
  block_number: 'x.b',
  log_index: 'x.first_log + j',
  block_hash: 'bench_block_hash(x.b)',
  block_timestamp: 'bench_timestamp(x.b)',
  transaction_hash: 'x.hash',
  transaction_index: 'x.t',
  address: 'e.address',
  topic0: 'e.topic0',
  topic1: 'e.topic1',
  topic2: 'e.topic2',
  topic3: 'e.topic3',
  data: 'e.data',
} as const

export type LogColumn = keyof typeof LOG_COLUMN_SQL

const pool = `bench_addr(${ADDRESS_KIND.pool}, p.pool)`
const tailAccount = (salt: number) => `bench_word(bench_addr(${ADDRESS_KIND.account}, bench_zipf(bench_u(p.lk, ${salt}), ${POPULATION.accounts})))`

function logsInsert(table: string, columns: readonly LogColumn[]): string {
  return `
insert into ${table} (${columns.join(', ')})
select ${columns.map((column) => LOG_COLUMN_SQL[column]).join(', ')}
from bench_tx_rows($1::bigint, $2::bigint) x
cross join lateral generate_series(0, x.n - 1) j
cross join lateral (
  select x.k * 64 + j as lk,
    bench_zipf(bench_u(x.k * 4 + j / 4, 5), ${POPULATION.pools}) as pool,
    case when x.kind = ${KIND.transfer} then 1
      when x.kind = ${KIND.approve} then case when j = 0 then 2 else 1 end
      when x.kind in (${KIND.swap}, ${KIND.twoHop}) then case j % 4 when 2 then 3 when 3 then 4 else 1 end
      else 5 end as role
) p
cross join lateral (
  select
    case when p.role = 5 then x.contract
      when x.kind in (${KIND.transfer}, ${KIND.approve}) then x.token
      when p.role in (3, 4) then ${pool}
      when j % 4 = 0 then bench_addr(${ADDRESS_KIND.token}, bench_zipf(bench_u(p.pool, 10), ${POPULATION.tokens}))
      else bench_addr(${ADDRESS_KIND.token}, case when p.pool % 3 = 0 then 1 else 2 end) end as address,
    case p.role when 1 then ${hexLiteral(EVENT_TOPICS.transfer)} when 2 then ${hexLiteral(EVENT_TOPICS.approval)}
      when 3 then ${hexLiteral(EVENT_TOPICS.sync)} when 4 then ${hexLiteral(EVENT_TOPICS.swap)}
      else bench_b32(bench_zipf(bench_u(p.lk, 11), ${POPULATION.tailEvents}), ${EVENT_SIGNATURE_SALT}) end as topic0,
    case p.role when 1 then bench_word(case when x.kind in (${KIND.swap}, ${KIND.twoHop}) and j % 4 = 1 then ${pool} else x.sender end)
      when 2 then bench_word(x.sender) when 3 then null when 4 then bench_word(x.router)
      else case when bench_u(p.lk, 12) < 0.7 then ${tailAccount(19)} end end as topic1,
    case p.role when 1 then bench_word(case when x.kind = ${KIND.transfer} then x.recipient when x.kind = ${KIND.approve} then x.router
        when j % 4 = 0 then ${pool} else x.sender end)
      when 2 then bench_word(x.router) when 3 then null when 4 then bench_word(x.sender)
      else case when bench_u(p.lk, 12) < 0.5 then ${tailAccount(20)} end end as topic2,
    case when p.role = 5 and bench_u(p.lk, 12) < 0.1 then bench_b32(p.lk, 21) end as topic3,
    case p.role when 3 then bench_amount(p.lk, 22) || bench_amount(p.lk, 23)
      when 4 then bench_amount(p.lk, 22) || ${ZERO_WORD} || ${ZERO_WORD} || bench_amount(p.lk, 23)
      when 5 then substr(bench_amount(p.lk, 22) || bench_amount(p.lk, 23) || bench_amount(p.lk, 24) || bench_amount(p.lk, 25),
        1, 32 * (1 + floor(bench_u(p.lk, 26) * 4)::int))
      else bench_amount(p.lk, 22) end as data
) e`
}

/**
 * One row per account a block changed (what `prestateTracer` diffs fold into): each sender, each ETH
 * recipient, the depositor and the three fee vaults, every block.
 */
const ACCOUNT_CHANGES = `
insert into account_changes (address, block_number, balance_before, nonce_before, balance, nonce)
select a.address, a.b, v.balance + (hashint8extended(v.ak + a.b, 61) & 281474976710655)::numeric, v.nonce - 1, v.balance, v.nonce
from (
  select x.b, x.sender as address from bench_tx_rows($1::bigint, $2::bigint) x
  union
  select x.b, x.recipient from bench_tx_rows($1::bigint, $2::bigint) x where x.kind = ${KIND.eth}
  union
  select b, vault from generate_series($1::bigint, $2::bigint) b, (values (${hexLiteral(SYSTEM_ADDRESSES.sequencerFeeVault)}),
    (${hexLiteral(SYSTEM_ADDRESSES.baseFeeVault)}), (${hexLiteral(SYSTEM_ADDRESSES.l1FeeVault)})) vaults (vault)
) a
cross join lateral (select ('x' || encode(substr(a.address, 1, 7), 'hex'))::bit(56)::bigint as ak) h
cross join lateral (
  select (hashint8extended(h.ak + a.b, 60) & 9223372036854775807)::numeric as balance, (h.ak % 100000) + (a.b - ${FIRST_BLOCK}) / 16 + 1 as nonce, h.ak
) v`

/** Each transaction's keys, as the ingester writes them (its body is in `block_transactions`). */
const TRANSACTION_KEYS = `
insert into transactions (hash, block_number, transaction_index, "from", "to")
select x.hash, x.b, x.t, x.sender, x.target from bench_tx_rows($1::bigint, $2::bigint) x`

/** A block's stored answer (`block_receipts` or `block_transactions`), from its template. */
const fromTemplate = (table: string) => `
insert into ${table} (block_number, deflated, plain_length, adler32, segment_offsets)
select b, t.deflated, t.plain_length, t.adler32, t.segment_offsets
from generate_series($1::bigint, $2::bigint) b join bench_${table.replace('block_', '')}_template t on t.slot = b % ${RECEIPT_TEMPLATES}`

const SYNC_STATE = `
insert into sync_state (key, value) values ('chain_id', to_jsonb($1::bigint)), ('first_block', to_jsonb($2::bigint)),
  ('account_source', '"trace"'), ('safe', to_jsonb($3::bigint)), ('finalized', to_jsonb($3::bigint))
on conflict (key) do update set value = excluded.value`

export type LoadedCounts = { blocks: number; transactions: number; logs: number }

/**
 * `all`: every block-keyed table. `logs`: what `eth_getLogs` reads (blocks, logs, and the transactions' keys
 * when the layout joins transaction hashes from them), for sizes the disk cannot hold whole.
 */
export type LoadScope = 'all' | 'logs'

export type ScaleLoader = {
  /** What the database holds so far. */
  counts(): LoadedCounts
  /** The next block to write. */
  nextBlock(): number
  /** Writes the next `BLOCKS_PER_CHUNK` blocks (logs on one connection, the other tables on another, at once). */
  loadChunk(): Promise<void>
}

/**
 * A loader for one database of `layout`, holding nothing yet: creates the generator's functions and writes
 * blocks from `FIRST_BLOCK` on. `db` renders the receipts templates through the resolvers' renderer.
 */
export async function createScaleLoader({
  sql,
  db,
  layout,
  scope,
}: {
  sql: postgres.Sql
  db: Db
  layout: ScaleLayout
  scope: LoadScope
}): Promise<ScaleLoader> {
  await sql.unsafe(FUNCTIONS)
  const logs = logsInsert(layout.logsTable, layout.logColumns)
  const counts: LoadedCounts = { blocks: 0, transactions: 0, logs: 0 }
  let next = FIRST_BLOCK
  let templates = false

  /** Everything but the logs; the template blocks' bodies too, the first time. */
  async function otherTables(from: number, to: number): Promise<number> {
    await sql.unsafe(BLOCKS, [from, to])
    if (scope === 'logs') {
      if (layout.logColumns.includes('transaction_hash')) return 0
      return (await sql.unsafe(TRANSACTION_KEYS, [from, to])).count
    }
    const transactions = await sql.unsafe(templates ? TRANSACTION_KEYS : TRANSACTIONS, [from, to])
    if (!templates) await sql.unsafe(RECEIPTS, [from, to])
    await sql.unsafe(ACCOUNT_CHANGES, [from, to])
    return transactions.count
  }

  return {
    counts: () => ({ ...counts }),
    nextBlock: () => next,
    async loadChunk() {
      const from = next
      const to = from + BLOCKS_PER_CHUNK - 1
      await layout.prepare?.({ sql, db }, from, to)
      const [logRows, transactions] = await Promise.all([sql.unsafe(logs, [from, to]), otherTables(from, to)])
      if (scope === 'all') {
        if (!templates) await renderTemplates(sql, db, from)
        templates = true
        await sql.unsafe(fromTemplate('block_transactions'), [from, to])
        await sql.unsafe(fromTemplate('block_receipts'), [from, to])
      }
      await sql.unsafe(SYNC_STATE, [CHAIN_ID, FIRST_BLOCK, to])
      counts.blocks += to - from + 1
      counts.transactions += transactions
      counts.logs += logRows.count
      next = to + 1
    },
  }
}

/**
 * Renders the first blocks' transactions and receipts answers as the ingester stores them (open DEFLATE
 * streams in segments, with length and checksum; src/codecs/segmented.ts), then leaves those blocks as the
 * ingester would: transaction keys without bodies, and no legacy receipt rows.
 */
async function renderTemplates(sql: postgres.Sql, db: Db, firstBlock: number): Promise<void> {
  for (let slot = 0; slot < RECEIPT_TEMPLATES; slot++) {
    const block = firstBlock + slot
    const bodies = await sql<{ body: string }[]>`select body::text as body from transactions where block_number = ${block} order by transaction_index`
    const receipts = renderReceipts(
      await db.query<ReceiptJsonRow>(receiptJsonRows(drizzleSql`receipts.block_number = ${block}`, drizzleSql`logs.block_number = ${block}`)),
    )
    for (const [table, items] of [
      ['bench_transactions_template', bodies.map((row) => row.body)],
      ['bench_receipts_template', receipts],
    ] as const) {
      const { stream, length, adler32, offsets } = deflateSegmented(items, BODY_DEFLATE_LEVEL)
      await sql`insert into ${sql(table)} ${sql({ slot: block % RECEIPT_TEMPLATES, deflated: stream, plain_length: length, adler32, segment_offsets: offsets })}`
    }
  }
  await sql`update transactions set body = null where body is not null`
  await sql`delete from receipts`
  // Nothing of the bodies' dead row versions is left to count in the tables' sizes.
  await sql`vacuum full transactions, receipts`
}
