import * as Address from 'ox/Address'

/**
 * `--entry-points`, read by the configuration: which ERC-4337 EntryPoints are attributed, by version and,
 * where not canonical, address. Kept apart from the ABIs (user-operations.ts binds them) so that reading a
 * command line does not load them.
 */
export const ENTRY_POINT_VERSIONS = ['0.6', '0.7', '0.8'] as const

export type EntryPointVersion = (typeof ENTRY_POINT_VERSIONS)[number]

/** `canonical` (0.6, 0.7 and 0.8 at their canonical addresses), or the EntryPoints listed. */
export type EntryPointSetting = 'canonical' | readonly { version: EntryPointVersion; address: Address.Address }[]

/**
 * `canonical`, or a comma-separated list of `version=address` (say `0.7=0x…,0.7=0x…`) for a chain whose
 * EntryPoints live elsewhere. Throws a RangeError naming what is wrong.
 */
export function parseEntryPointSetting(setting: string): EntryPointSetting {
  if (setting.trim() === 'canonical') return 'canonical'
  return setting.split(',').map((item) => {
    const [version, address, extra] = item.trim().split('=')
    const known = ENTRY_POINT_VERSIONS.find((candidate) => candidate === version?.trim())
    if (known === undefined || extra !== undefined)
      throw new RangeError(`${JSON.stringify(item.trim())} is not version=address with a version of ${ENTRY_POINT_VERSIONS.join(', ')}`)
    const trimmed = address?.trim() ?? ''
    if (!Address.validate(trimmed, { strict: false })) throw new RangeError(`${JSON.stringify(address ?? '')} is not an address`)
    return { version: known, address: trimmed }
  })
}
