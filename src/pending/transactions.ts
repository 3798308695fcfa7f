import { createRequire } from 'node:module'
import type { ecdsaRecover } from 'secp256k1'
import { recover as recoverInWasm } from 'tiny-secp256k1'
import {
  type Address,
  concatHex,
  fromRlp,
  type Hash,
  type Hex,
  hexToBytes,
  pad,
  recoverTransactionAddress,
  serializeTransaction,
  type TransactionSerializable,
  type TransactionSerialized,
  toRlp,
} from 'viem'
import { parseTransaction } from 'viem/op-stack'
import { hashAuthorization } from 'viem/utils'
import { toQuantity } from '../codecs/index.js'
import { signingPayload } from '../codecs/signing-payload.js'
import { bytesToHexText, hexBytes, keccak256Bytes, keccak256OfHex } from '../codecs/keccak.js'

/** A pre-confirmed transaction, decoded from its EIP-2718 bytes, with its sender recovered. */
export type PendingTransaction = {
  hash: Hash
  /** Position in its block (set when the flashblock is applied; undecodable transactions take one too). */
  index: number
  raw: Hex
  from: Address
  nonce: number
  to: Address | null
  type: number
  /** Fields for the RPC object, already hex-encoded (see `formatPendingTransaction`). */
  fields: Record<string, unknown>
  /** The sender's public key (64 bytes) where recovery gave it: flashgate's executor need not recover it again. */
  senderPublicKey?: Uint8Array
  /** EIP-7702 (type 4): the signers of its authorizations whose signatures recover, in its order. */
  authorities?: Authority[]
}

/**
 * An EIP-7702 authorization's signer and what it names: applied, it moves the signer's nonce from `nonce` by
 * one (after the sender's own), when `chainId` is 0 or the chain's.
 */
export type Authority = { address: Address; chainId: number; nonce: number }

const TYPE_BY_NAME: Record<string, number> = { legacy: 0, eip2930: 1, eip1559: 2, eip4844: 3, eip7702: 4, deposit: 0x7e }

/**
 * Public-key recovery by libsecp256k1: natively (the `secp256k1` package's prebuilt addon, ~65 µs) where
 * it loads, else in WebAssembly (tiny-secp256k1, ~280 µs). Recovery is most of a pending transaction's
 * decoding, at tens of transactions per flashblock. Measured in bench/pending.ts (frame → visible).
 */
const recoverPublicKey: (digest: Uint8Array, signature: Uint8Array, recoveryId: 0 | 1) => Uint8Array | null = (() => {
  try {
    const native = createRequire(import.meta.url)('secp256k1/bindings') as { ecdsaRecover: typeof ecdsaRecover }
    return (digest, signature, recoveryId) => {
      try {
        return native.ecdsaRecover(signature, recoveryId, digest, false)
      } catch {
        return null
      }
    }
  } catch {
    return (digest, signature, recoveryId) => recoverInWasm(digest, signature, recoveryId, false)
  }
})()

/** A parsed transaction without its signature: what viem re-encodes when the signed bytes cannot be cut. */
function unsignedFields(parsed: Record<string, unknown>): TransactionSerializable {
  const { r: _r, s: _s, v: _v, yParity: _yParity, ...unsigned } = parsed
  return unsigned as TransactionSerializable
}

/** A signature's recovery id from viem's parse: `yParity`, or a legacy `v` (27/28, or EIP-155's); `undefined` if neither gives 0 or 1. */
function recoveryIdOf(yParity: number | undefined, v: bigint | undefined): 0 | 1 | undefined {
  const legacyV = v === undefined ? undefined : Number(v)
  const recoveryId = yParity ?? (legacyV === undefined ? undefined : legacyV <= 28 ? legacyV - 27 : (legacyV - 35) % 2)
  return recoveryId === 0 || recoveryId === 1 ? recoveryId : undefined
}

/**
 * Who signed `digest` with (`r`, `s`, `recoveryId`): the address and the public key (64 bytes); `null` when
 * it does not recover. Throws on an `r` or `s` longer than 32 bytes.
 */
function recoverSigner(digest: Uint8Array, r: Hex, s: Hex, recoveryId: 0 | 1): { address: Address; publicKey: Uint8Array } | null {
  const signature = new Uint8Array(64)
  // Left-padded: a parse may give an `r` or `s` with its leading zero bytes cut (viem's, of a legacy transaction).
  signature.set(hexToBytes(pad(r, { size: 32 })), 0)
  signature.set(hexToBytes(pad(s, { size: 32 })), 32)
  const publicKey = recoverPublicKey(digest, signature, recoveryId)
  if (publicKey === null) return null
  return { address: bytesToHexText(keccak256Bytes(publicKey.subarray(1)).subarray(12)), publicKey: publicKey.subarray(1) }
}

/**
 * The sender of a signed transaction (`bytes`: its encoding, when its hex was well formed); viem's recovery
 * stays as the fallback for anything unusual.
 */
async function recoverSender(raw: Hex, bytes: Uint8Array | null, parsed: Record<string, unknown>): Promise<{ address: Address; publicKey?: Uint8Array }> {
  try {
    const { r, s, v, yParity } = parsed as Record<string, unknown> & { r: Hex; s: Hex; v?: bigint; yParity?: number }
    const recoveryId = recoveryIdOf(yParity, v)
    if (recoveryId === undefined) throw new Error('no recovery id')
    const payload = bytes === null ? null : signingPayload(bytes, v)
    const digest = payload === null ? keccak256OfHex(serializeTransaction(unsignedFields(parsed))) : keccak256Bytes(payload)
    const signer = recoverSigner(digest, r, s, recoveryId)
    if (signer === null) throw new Error('no key')
    return signer
  } catch {
    return { address: await recoverTransactionAddress({ serializedTransaction: raw as TransactionSerialized }) }
  }
}

/** An EIP-7702 authorization as viem parses it: numbers, and `v` beside `yParity`. */
type ParsedAuthorization = { chainId: number; address: Address; nonce: number; yParity?: number; v?: bigint; r: Hex; s: Hex }

/**
 * An authorization as nodes write it (geth's `SetCodeAuthorization`, alloy's `SignedAuthorization`): every
 * number a quantity, `r` and `s` too, in their key order. viem's parse holds numbers and a bigint `v`, which
 * JSON cannot write.
 */
function authorizationJson({ chainId, address, nonce, yParity, v, r, s }: ParsedAuthorization): Record<string, string> {
  return {
    chainId: toQuantity(chainId),
    address: address.toLowerCase(),
    nonce: toQuantity(nonce),
    yParity: toQuantity(recoveryIdOf(yParity, v) ?? 0),
    r: toQuantity(BigInt(r)),
    s: toQuantity(BigInt(s)),
  }
}

/**
 * The transaction as a block holds it. A blob transaction sent in its network form (EIP-4844:
 * `0x03 || rlp([tx_payload_body, blobs, commitments, proofs])`) is the transaction with its sidecar; its hash,
 * its sender and the block see only `0x03 || rlp(tx_payload_body)`. Anything else is returned as it is.
 */
export function canonicalTransaction(raw: Hex): Hex {
  if (!raw.startsWith('0x03')) return raw
  try {
    const fields = fromRlp(`0x${raw.slice(4)}`, 'hex')
    return Array.isArray(fields) && Array.isArray(fields[0]) ? concatHex(['0x03', toRlp(fields[0])]) : raw
  } catch {
    return raw
  }
}

/** Decodes a raw transaction and recovers its sender (OP deposits carry `from` in the envelope). */
export async function decodePendingTransaction(raw: Hex): Promise<PendingTransaction> {
  const parsed = parseTransaction(raw) as Record<string, unknown> & { type: string }
  const type = TYPE_BY_NAME[parsed.type] ?? 0
  // Its bytes, once: for its hash and for the payload its sender signed (hex that Buffer would misread goes to viem).
  const bytes = hexBytes(raw)
  const sender = type === 0x7e ? { address: parsed.from as Address } : await recoverSender(raw, bytes, parsed)
  const from = sender.address
  const fields: Record<string, unknown> = { type: toQuantity(type) }
  if (parsed.chainId !== undefined) fields.chainId = toQuantity(parsed.chainId as number)
  fields.nonce = toQuantity((parsed.nonce as number | undefined) ?? 0)
  fields.gas = toQuantity((parsed.gas as bigint | undefined) ?? 0n)
  // viem's parse leaves out a fee that is zero (an empty RLP string): every fee the type has is written, as
  // nodes write it, "0x0" included (a tip of zero is common: a sequencer may take any tip).
  const fee = (name: string) => toQuantity((parsed[name] as bigint | undefined) ?? 0n)
  if (type === 0 || type === 1) fields.gasPrice = fee('gasPrice')
  else if (parsed.gasPrice !== undefined) fields.gasPrice = toQuantity(parsed.gasPrice as bigint)
  if (type === 2 || type === 3 || type === 4) {
    fields.maxFeePerGas = fee('maxFeePerGas')
    fields.maxPriorityFeePerGas = fee('maxPriorityFeePerGas')
  }
  if (type === 3) fields.maxFeePerBlobGas = fee('maxFeePerBlobGas')
  fields.to = ((parsed.to as string | undefined) ?? null)?.toLowerCase() ?? null
  fields.value = toQuantity((parsed.value as bigint | undefined) ?? 0n)
  if (type !== 0 && type !== 0x7e) fields.accessList = parsed.accessList ?? []
  if (parsed.blobVersionedHashes !== undefined) fields.blobVersionedHashes = parsed.blobVersionedHashes
  const authorizations = parsed.authorizationList as ParsedAuthorization[] | undefined
  if (authorizations !== undefined) fields.authorizationList = authorizations.map(authorizationJson)
  fields.input = (parsed.data as Hex | undefined) ?? '0x'
  if (type === 0x7e) {
    fields.sourceHash = parsed.sourceHash
    fields.mint = toQuantity((parsed.mint as bigint | undefined) ?? 0n)
    fields.isSystemTx = parsed.isSystemTx ?? false
  } else {
    fields.r = toQuantity(BigInt((parsed.r as Hex | undefined) ?? 0))
    fields.s = toQuantity(BigInt((parsed.s as Hex | undefined) ?? 0))
    if (type !== 0) fields.yParity = toQuantity((parsed.yParity as number | undefined) ?? 0)
    fields.v = type === 0 ? toQuantity((parsed.v as bigint | undefined) ?? 0n) : toQuantity((parsed.yParity as number | undefined) ?? 0)
  }
  return {
    hash: bytesToHexText(bytes === null ? keccak256OfHex(raw) : keccak256Bytes(bytes)),
    index: -1,
    raw,
    from: from.toLowerCase() as Address,
    nonce: (parsed.nonce as number | undefined) ?? 0,
    to: (fields.to as Address | null) ?? null,
    type,
    fields,
    ...(sender.publicKey !== undefined && { senderPublicKey: sender.publicKey }),
    ...(authorizations !== undefined && { authorities: recoverAuthorities(authorizations) }),
  }
}

/** The signers of EIP-7702 authorizations; one whose signature does not recover is left out (a node skips it). */
function recoverAuthorities(authorizations: readonly ParsedAuthorization[]): Authority[] {
  const authorities: Authority[] = []
  for (const { chainId, address, nonce, yParity, v, r, s } of authorizations) {
    const recoveryId = recoveryIdOf(yParity, v)
    if (recoveryId === undefined) continue
    try {
      const signer = recoverSigner(hashAuthorization({ chainId, address, nonce, to: 'bytes' }), r, s, recoveryId)
      if (signer !== null) authorities.push({ address: signer.address, chainId, nonce })
    } catch {
      // Not a signature secp256k1 takes: skipped, as a node skips it.
    }
  }
  return authorities
}

/**
 * An account's next nonce after `transaction`, from `nonce` before it: its own send moves it past the
 * transaction's nonce, then each EIP-7702 authorization it signed for this chain (or any) that names that
 * nonce moves it by one more, in order, as a node applies them (whether the call then succeeds or not).
 * An authorization a node would refuse for the authority's code (a contract's) is not known here and counts.
 */
export function nonceAfter(account: Address, nonce: bigint, transaction: Pick<PendingTransaction, 'from' | 'nonce' | 'authorities' | 'fields'>): bigint {
  let next = nonce
  if (transaction.from === account && BigInt(transaction.nonce) >= next) next = BigInt(transaction.nonce) + 1n
  if (transaction.authorities === undefined) return next
  const chainId = transaction.fields.chainId === undefined ? null : BigInt(transaction.fields.chainId as Hex)
  for (const authority of transaction.authorities)
    if (authority.address === account && BigInt(authority.nonce) === next && (authority.chainId === 0 || BigInt(authority.chainId) === chainId)) next++
  return next
}
