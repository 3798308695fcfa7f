import { eq } from 'drizzle-orm'
import { type Address, getAddress } from 'viem'
import { generateBuilderCode } from '../attribution/index.js'
import { type Db, hexToBytea, schema } from '../db/index.js'
import { InternalError } from '../errors.js'

/** A fresh code colliding with an existing one is a 1-in-10^12 event; a few draws always suffice. */
const MAX_CODE_DRAWS = 5

export type BuilderCodeRecord = {
  builderCode: string
  /** EIP-55 checksummed. */
  walletAddress: Address
}

export type RegisterBuilderCodeReturnType = BuilderCodeRecord & {
  /** `false` when the wallet already had a code (this call, or a concurrent one, did not create it). */
  created: boolean
}

/** Registration and look-ups of builder codes (DESIGN.md §7): one code per wallet, forever. */
/** `db` serves look-ups (a replica may lag by a moment); `primary` takes registrations, read and written whole. */
export function createBuilderCodeResolvers({ db, primary = db }: { db: Db; primary?: Db }) {
  async function codeOfWallet(wallet: Uint8Array, from: Db = db): Promise<string | null> {
    const rows = await from.drizzle.select({ code: schema.builderCodes.code }).from(schema.builderCodes).where(eq(schema.builderCodes.wallet, wallet)).limit(1)
    return rows[0]?.code ?? null
  }

  /**
   * The wallet's builder code, created on first call. Concurrent first calls race on the unique wallet
   * index: one insert wins, the others do nothing and read the winner's code.
   */
  async function registerBuilderCode(wallet: Address): Promise<RegisterBuilderCodeReturnType> {
    const walletAddress = getAddress(wallet)
    const walletBytes = hexToBytea(wallet.toLowerCase() as Address)
    const existing = await codeOfWallet(walletBytes, primary)
    if (existing !== null) return { builderCode: existing, walletAddress, created: false }
    for (let draw = 0; draw < MAX_CODE_DRAWS; draw++) {
      const code = generateBuilderCode()
      const inserted = await primary.drizzle
        .insert(schema.builderCodes)
        .values({ code, wallet: walletBytes })
        .onConflictDoNothing()
        .returning({ code: schema.builderCodes.code })
      if (inserted.length === 1) return { builderCode: code, walletAddress, created: true }
      const winner = await codeOfWallet(walletBytes, primary)
      if (winner !== null) return { builderCode: winner, walletAddress, created: false }
      // The drawn code belongs to another wallet: draw again.
    }
    throw new InternalError('could not allocate a builder code')
  }

  async function builderCodeOfWallet(wallet: Address): Promise<BuilderCodeRecord | null> {
    const code = await codeOfWallet(hexToBytea(wallet.toLowerCase() as Address))
    return code === null ? null : { builderCode: code, walletAddress: getAddress(wallet) }
  }

  return { registerBuilderCode, builderCodeOfWallet }
}
