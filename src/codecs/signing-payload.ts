/**
 * The bytes a transaction's sender signed, cut from its signed EIP-2718 encoding instead of re-encoded from
 * its decoded fields: a signed transaction is an RLP list ending in its signature (`yParity|v, r, s`), and
 * what was signed is the same list without those three items (EIP-2718 typed transactions: behind the same
 * type byte; EIP-155 legacy: with `chainId, 0, 0` in their place; older legacy: nothing in their place).
 * Re-encoding with viem took ~16 µs of a pre-confirmed transaction's ~120 µs (src/pending/transactions.ts);
 * this is a walk over the list's item headers and one copy.
 *
 * `null` for anything this does not recognise as such a list; the caller then re-encodes.
 * https://eips.ethereum.org/EIPS/eip-2718 https://eips.ethereum.org/EIPS/eip-155
 */

/** Where an RLP item's payload starts and where the item ends, from its header at `at`; `null` if it overruns `end`. */
function itemBounds(bytes: Uint8Array, at: number, end: number): { payload: number; next: number; list: boolean } | null {
  if (at >= end) return null
  const first = bytes[at]!
  let payload: number
  let length: number
  let list = false
  if (first < 0x80) return { payload: at, next: at + 1, list }
  if (first < 0xb8) {
    payload = at + 1
    length = first - 0x80
  } else if (first < 0xc0) {
    const size = first - 0xb7
    payload = at + 1 + size
    length = readLength(bytes, at + 1, size, end)
  } else if (first < 0xf8) {
    list = true
    payload = at + 1
    length = first - 0xc0
  } else {
    list = true
    const size = first - 0xf7
    payload = at + 1 + size
    length = readLength(bytes, at + 1, size, end)
  }
  const next = payload + length
  return length < 0 || next > end ? null : { payload, next, list }
}

/** A big-endian length of `size` bytes (at most 4: no transaction is 4 GB); -1 if it does not fit. */
function readLength(bytes: Uint8Array, at: number, size: number, end: number): number {
  if (size > 4 || at + size > end) return -1
  let length = 0
  for (let offset = 0; offset < size; offset++) length = length * 256 + bytes[at + offset]!
  return length
}

/** An RLP list header for a payload of `length` bytes. */
function listHeader(length: number): Uint8Array {
  if (length < 56) return Uint8Array.of(0xc0 + length)
  const size = length < 0x100 ? 1 : length < 0x10000 ? 2 : length < 0x1000000 ? 3 : 4
  const header = new Uint8Array(1 + size)
  header[0] = 0xf7 + size
  for (let offset = size; offset >= 1; offset--) {
    header[offset] = length & 0xff
    length = Math.floor(length / 256)
  }
  return header
}

/** An unsigned integer as an RLP string item: minimal big-endian bytes, `0x80` for zero. */
function integerItem(value: bigint): Uint8Array {
  if (value === 0n) return Uint8Array.of(0x80)
  let hex = value.toString(16)
  if (hex.length % 2 === 1) hex = `0${hex}`
  const bytes = Buffer.from(hex, 'hex')
  if (bytes.length === 1 && bytes[0]! < 0x80) return bytes
  return Uint8Array.from([0x80 + bytes.length, ...bytes])
}

/**
 * The payload signed by the sender of `signed` (a transaction's EIP-2718 bytes: a type byte below 0x7f and
 * an RLP list, or a legacy RLP list), whose signature's `v` is `legacyV` for a legacy transaction.
 */
export function signingPayload(signed: Uint8Array, legacyV?: bigint): Uint8Array | null {
  const typed = signed.length > 0 && signed[0]! < 0x7f
  const start = typed ? 1 : 0
  const list = itemBounds(signed, start, signed.length)
  if (list === null || !list.list || list.next !== signed.length) return null
  // Where each item starts; the signature is the last three.
  const starts: number[] = []
  for (let at = list.payload; at < list.next; ) {
    const item = itemBounds(signed, at, list.next)
    if (item === null) return null
    starts.push(at)
    at = item.next
  }
  if (starts.length < 4) return null
  const fields = signed.subarray(list.payload, starts[starts.length - 3])
  let tail: Uint8Array = new Uint8Array(0)
  if (!typed) {
    if (legacyV === undefined) return null
    if (legacyV >= 35n) {
      const chainId = integerItem((legacyV - 35n) / 2n)
      tail = new Uint8Array(chainId.length + 2)
      tail.set(chainId, 0)
      tail[chainId.length] = 0x80
      tail[chainId.length + 1] = 0x80
    } else if (legacyV !== 27n && legacyV !== 28n) return null
  }
  const header = listHeader(fields.length + tail.length)
  const payload = new Uint8Array(start + header.length + fields.length + tail.length)
  if (typed) payload[0] = signed[0]!
  payload.set(header, start)
  payload.set(fields, start + header.length)
  payload.set(tail, start + header.length + fields.length)
  return payload
}
