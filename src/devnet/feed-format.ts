/**
 * The devnet's Flashblocks format: Base's since Azul (no receipts, no balances), or the older one with them.
 * A module of its own, without viem: the configuration reads it on the CLI's light path (help, bad values).
 */
export const FEED_FORMATS = ['current', 'legacy'] as const
export type FeedFormat = (typeof FEED_FORMATS)[number]
