/**
 * EIP-7966's `eth_sendRawTransactionSync` as Base's node serves it: the longest wait a caller may ask for, and
 * its refusal of a longer one (`-32602`, before anything is sent). flashgate and its devnet answer the same.
 */
export const SYNC_SEND_MAX_TIMEOUT_MS = 6_000

/** Base's message for a wait over the maximum. */
export function syncSendTimeoutTooLong(timeoutMs: number): string {
  return `time out too long, timeout: ${timeoutMs} ms, max: ${SYNC_SEND_MAX_TIMEOUT_MS} ms`
}
