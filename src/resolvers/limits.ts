// Defaults of the read limits, in a module of their own: the CLI's configuration reads them without loading
// the resolvers (and with them the database drivers and viem) for `--help` or a bad option.

/** Largest `eth_getLogs` answer of a dedicated endpoint by default (reth bounds any answer at 160 MB). */
export const DEFAULT_MAX_LOGS_BYTES = 100 * 1024 * 1024
