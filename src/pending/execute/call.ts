import type { Block } from '@ethereumjs/block'
import { type AccessList, createTx, getMinimumGasLimit } from '@ethereumjs/tx'
import { bigIntMax, bigIntMin, bytesToHex, createAddressFromString, createContractAddress, createZeroAddress } from '@ethereumjs/util'
import { type RunTxResult, runTx, type VM } from '@ethereumjs/vm'
import { decodeErrorResult, type Hex } from 'viem'
import { type CallRequest, toQuantity } from '../../codecs/index.js'
import { ExecutionFailedError, ExecutionRevertedError } from '../../errors.js'
import type { ExecutionState } from './state.js'

/** geth's and reth's default `--rpc.gascap`: no call runs with more gas. */
const RPC_GAS_CAP = 50_000_000n
/** geth's `estimateGasErrorRatio`: the search stops once its answer is less than 1.5% above the lowest that succeeds. */
const ESTIMATE_GAS_ERROR_RATIO = 0.015
/** A plain value transfer's gas (`params.TxGas`), tried first for a call without data to an account without code. */
const TX_GAS = 21_000n
/** `params.CallStipend`, part of geth's first guess at an estimate. */
const CALL_STIPEND = 2_300n
/** ethereumjs' `EVMError` messages for the outcomes that answer differently. */
const REVERT = 'revert'
const OUT_OF_GAS = 'out of gas'
/** Runs of one `eth_createAccessList` at most; geth's loop has no bound, and a request must not run forever. */
const MAX_ACCESS_LIST_ROUNDS = 10

export type CallKind = 'eth_call' | 'eth_estimateGas' | 'eth_createAccessList'

/** geth's `accessListResult`: the list, the gas used with it, and the error of a call that failed with it. */
export type AccessListResult = { accessList: AccessList; error?: string; gasUsed: Hex }

type CallContext = {
  vm: VM
  /** A copy of the pending state: every run is undone on it. */
  state: ExecutionState
  header: Block
  request: CallRequest
}

/** The `Error(string)` reason of revert bytes, as geth puts it in the message; `null` for anything else. */
function revertReason(data: Hex): string | null {
  try {
    const decoded = decodeErrorResult({ data })
    return decoded.errorName === 'Error' ? String(decoded.args[0]) : null
  } catch {
    return null
  }
}

function revertError(result: RunTxResult): ExecutionRevertedError {
  const data = bytesToHex(result.execResult.returnValue)
  return new ExecutionRevertedError(data, revertReason(data))
}

const sortedAccessList = (list: AccessList): AccessList =>
  list
    .map(({ address, storageKeys }) => ({ address, storageKeys: [...storageKeys].sort() }))
    .sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0))

/**
 * Runs `request` as geth runs a call (`TransactionArgs.ToMessage` with the nonce check skipped): an unsigned
 * transaction from `from` (the zero address by default), its fees from the request (none by default: then the
 * block's base fee is taken as zero, as geth's `NoBaseFee` does, and only `value` has to be paid for).
 * Whatever the EVM refuses to run (funds short of gas and value, a fee under the base fee, a sender with code)
 * throws, and the call is left to the node.
 */
function createRunner({ vm, state, header, request }: CallContext) {
  const from = request.from === undefined ? createZeroAddress() : createAddressFromString(request.from)
  const feeMarket = request.maxFeePerGas !== undefined || request.maxPriorityFeePerGas !== undefined

  function transaction(gasLimit: bigint, accessList: AccessList | undefined) {
    const tx = createTx(
      {
        type: feeMarket ? 2 : accessList === undefined ? 0 : 1,
        to: request.to,
        value: request.value,
        data: request.data,
        gasLimit,
        ...(feeMarket
          ? { maxFeePerGas: request.maxFeePerGas ?? 0n, maxPriorityFeePerGas: request.maxPriorityFeePerGas ?? 0n }
          : { gasPrice: request.gasPrice ?? 0n }),
        ...(accessList === undefined ? {} : { accessList }),
      },
      { common: vm.common, freeze: false },
    )
    tx.getSenderAddress = () => from
    return tx
  }

  const unsized = transaction(RPC_GAS_CAP, request.accessList)
  return {
    from,
    intrinsicGas: unsized.getIntrinsicGas(),
    /** The least gas the transaction is valid with: its intrinsic gas, or EIP-7623's calldata floor. */
    minimumGas: getMinimumGasLimit(unsized, from),
    /**
     * The gas `from` can pay for after `value` at the request's fee (geth's and reth's cap for a priced call);
     * a `value` it cannot cover throws (the node's "insufficient funds for transfer").
     */
    async allowance(): Promise<bigint> {
      const feeCap = request.gasPrice ?? request.maxFeePerGas ?? 0n
      if (feeCap === 0n) return RPC_GAS_CAP
      const available = ((await state.getAccount(from))?.balance ?? 0n) - request.value
      if (available <= 0n) throw new Error('insufficient funds for transfer')
      return available / feeCap
    },
    async run(gasLimit: bigint, { accessList = request.accessList, reportAccessList = false } = {}): Promise<RunTxResult> {
      const tx = transaction(gasLimit, accessList)
      await state.checkpoint()
      try {
        return await runTx(vm, { tx, block: header, skipNonce: true, skipBlockGasLimitValidation: true, skipHardForkValidation: true, reportAccessList })
      } finally {
        await state.revert()
      }
    },
  }
}

type Runner = ReturnType<typeof createRunner>

/** The gas a call runs with: the request's, or the block's limit within what `from` can pay; never above the cap. */
async function callGas(runner: Runner, { header, request }: CallContext): Promise<bigint> {
  return bigIntMin(request.gas ?? bigIntMin(header.header.gasLimit, await runner.allowance()), RPC_GAS_CAP)
}

/** https://ethereum.github.io/execution-apis/api-documentation/ (eth_call), answered as geth's `Call`. */
async function call(runner: Runner, context: CallContext): Promise<Hex> {
  const result = await runner.run(await callGas(runner, context))
  const error = result.execResult.exceptionError
  if (error === undefined) return bytesToHex(result.execResult.returnValue)
  if (error.error === REVERT) throw revertError(result)
  throw new ExecutionFailedError(error.error)
}

/**
 * geth's `gasestimator.Estimate`: the lowest gas the call succeeds with, found by binary search between the
 * gas the first (unbounded) run used and the most allowed, after a first guess just above what it used; it
 * stops within `ESTIMATE_GAS_ERROR_RATIO` of the answer, as geth and reth do.
 */
async function estimateGas(runner: Runner, { state, request, header }: CallContext): Promise<Hex> {
  const requested = request.gas !== undefined && request.gas >= TX_GAS ? request.gas : header.header.gasLimit
  let hi = bigIntMin(requested, await runner.allowance(), RPC_GAS_CAP)
  // Below the transaction's own minimum it is not run (`null`): it fails, as geth's `ErrIntrinsicGas` does.
  const attempt = async (gas: bigint) => (gas < runner.minimumGas ? null : await runner.run(gas))
  const failed = (result: RunTxResult | null) => result === null || result.execResult.exceptionError !== undefined

  if (request.data === '0x' && request.to !== undefined && (await state.getCodeSize(createAddressFromString(request.to))) === 0)
    if (!failed(await attempt(TX_GAS))) return toQuantity(TX_GAS)
  const first = await attempt(hi)
  if (first === null || failed(first)) {
    const error = first?.execResult.exceptionError
    if (error?.error === REVERT) throw revertError(first!)
    if (error !== undefined && error.error !== OUT_OF_GAS) throw new ExecutionFailedError(error.error)
    throw new ExecutionFailedError(`gas required exceeds allowance (${hi})`)
  }
  let lo = first.totalGasSpent - 1n
  // The gas used before refunds (geth's `MaxUsedGas`), with room for a call's stipend and the 1/64 kept back.
  const peak = bigIntMax(first.totalGasSpent, first.execResult.executionGasUsed + runner.intrinsicGas)
  const optimistic = ((peak + CALL_STIPEND) * 64n) / 63n
  if (optimistic < hi) {
    if (failed(await attempt(optimistic))) lo = optimistic
    else hi = optimistic
  }
  while (lo + 1n < hi) {
    if (Number(hi - lo) / Number(hi) < ESTIMATE_GAS_ERROR_RATIO) break
    // Most calls need little more than they used: bisect towards the low side.
    const mid = bigIntMin((hi + lo) / 2n, lo * 2n)
    if (failed(await attempt(mid))) lo = mid
    else hi = mid
  }
  return toQuantity(hi)
}

/**
 * geth's `AccessList`: runs the call with the list found so far until running it with the list finds no
 * more, and answers that list, the gas used with it and the error the call ended with. Like geth's tracer it
 * leaves out the sender, the recipient (or the created contract) and precompiles, unless their storage was read.
 */
async function createAccessList(runner: Runner, context: CallContext): Promise<AccessListResult> {
  const { vm, state, request } = context
  const gas = await callGas(runner, context)
  const to = request.to ?? createContractAddress(runner.from, (await state.getAccount(runner.from))?.nonce ?? 0n).toString()
  const excluded = new Set([runner.from.toString().slice(2), to.slice(2), ...vm.evm.precompiles.keys()])
  let accessList = sortedAccessList(request.accessList ?? [])
  for (let round = 1; ; round++) {
    const result = await runner.run(gas, { accessList, reportAccessList: true })
    const found = sortedAccessList(
      (result.accessList ?? [])
        .map(({ address, storageKeys }) => ({
          address: address.toLowerCase() as Hex,
          storageKeys: storageKeys.map((key) => `0x${key.slice(2).padStart(64, '0')}` as Hex),
        }))
        .filter(({ address, storageKeys }) => storageKeys.length > 0 || !excluded.has(address.slice(2))),
    )
    // A call whose accesses keep changing with the list (it reads gas left) stops after a few rounds, not never.
    if (JSON.stringify(found) === JSON.stringify(accessList) || round === MAX_ACCESS_LIST_ROUNDS) {
      const error = result.execResult.exceptionError?.error
      const gasUsed = toQuantity(result.totalGasSpent)
      return error === undefined ? { accessList, gasUsed } : { accessList, error: error === REVERT ? 'execution reverted' : error, gasUsed }
    }
    accessList = found
  }
}

/** Runs one of the three calls on `state`, leaving it as it was. */
export async function runPendingCall(kind: CallKind, context: CallContext): Promise<Hex | AccessListResult> {
  const runner = createRunner(context)
  switch (kind) {
    case 'eth_call':
      return call(runner, context)
    case 'eth_estimateGas':
      return estimateGas(runner, context)
    case 'eth_createAccessList':
      return createAccessList(runner, context)
  }
}
