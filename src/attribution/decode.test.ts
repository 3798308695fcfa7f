import { randomBytes } from 'node:crypto'
import { Attribution } from 'ox/erc8021'
import { Cbor } from 'ox'
import { concat, type Hex, numberToHex, size } from 'viem'
import { describe, expect, test } from 'vitest'
import { attributionSuffix, decodeAttribution, isAttributionCode } from './decode.js'
import { BUILDER_CODE_PATTERN, generateBuilderCode } from './builder-code.js'

const MARKER = '80218021802180218021802180218021'
const CALL = '0xdddddddd'

describe('ERC-8021 vectors', () => {
  test('schema 0: one code', () => {
    expect(decodeAttribution('0xdddddddd62617365617070070080218021802180218021802180218021')).toMatchObject({
      codes: ['baseapp'],
      schemas: [0],
      suffixBytes: 25,
    })
  })

  test('schema 0: two codes, comma-separated', () => {
    expect(decodeAttribution(`${CALL}626173656170702c6d6f7270686f0e00${MARKER}`)?.codes).toEqual(['baseapp', 'morpho'])
  })

  test('schema 1: codes with a custom registry (address, chain id 8453)', () => {
    const data = `${CALL}${'cc'.repeat(20)}210502626173656170702C6D6F7270686F0E01${MARKER}`
    expect(decodeAttribution(data)).toMatchObject({ codes: ['baseapp', 'morpho'], schemas: [1], suffixBytes: 20 + 2 + 1 + 14 + 1 + 1 + 16 })
  })

  test('schema 1: a chain id written zero-padded in any width (a 32-byte word, say) reads as ox reads it', () => {
    const registry = `0x${'cc'.repeat(20)}` as Hex
    const codes = Buffer.from('baseapp,morpho').toString('hex')
    const suffixWith = (chainId: string) => `${CALL}${registry.slice(2)}${chainId}${(chainId.length / 2).toString(16).padStart(2, '0')}${codes}0e01${MARKER}`
    for (const width of [2, 7, 8, 32]) {
      const data = suffixWith('2105'.padStart(2 * width, '0'))
      expect(Attribution.fromData(data as Hex)).toEqual({ codes: ['baseapp', 'morpho'], codeRegistry: { address: registry, chainId: 8453 }, id: 1 })
      expect(decodeAttribution(data)).toMatchObject({ codes: ['baseapp', 'morpho'], schemas: [1], suffixBytes: 20 + width + 1 + 14 + 1 + 1 + 16 })
    }
    // A chain id past 2^53 is no number ox will give: it throws, and the suffix reads as none.
    const unsafe = suffixWith('ff'.repeat(8))
    expect(() => Attribution.fromData(unsafe as Hex)).toThrow()
    expect(decodeAttribution(unsafe)).toBeNull()
  })

  test('schema 2: CBOR map with an app code', () => {
    expect(decodeAttribution(`${CALL}a161616762617365617070000b02${MARKER}`)).toMatchObject({ codes: ['baseapp'], schemas: [2] })
  })

  test('schema 2: app, wallet and service codes all count', () => {
    const suffix = Attribution.toDataSuffix({ appCode: 'bc_app00001', walletCode: 'privy', serviceCodes: ['relay', 'solver'], metadata: { source: 'x' } })
    expect(decodeAttribution(concat([CALL, suffix]))?.codes).toEqual(['bc_app00001', 'privy', 'relay', 'solver'])
  })

  test('schema 2 in full: each code keeps its role, registries (chain id as hex or as a number) and metadata are kept', () => {
    const registry = '0x000000bc7e6457e610fe52dcc0ca5b3ce59c8e80'
    const suffixWith = (chainId: unknown) => {
      const cbor = Cbor.encode({
        a: 'bc_app00001',
        w: 'privy',
        s: ['relay', 'solver'],
        r: { a: { c: chainId, a: registry } },
        m: { source: 'webapp', version: 2 },
      })
      return concat([cbor, numberToHex(size(cbor), { size: 2 }), '0x02', Attribution.ercSuffix])
    }
    for (const chainId of ['0x2105', 8453]) {
      const decoded = decodeAttribution(concat([CALL, suffixWith(chainId)]))
      expect(decoded).toMatchObject({
        codes: ['bc_app00001', 'privy', 'relay', 'solver'],
        roles: ['app', 'wallet', 'service', 'service'],
        registries: { app: { address: registry, chainId: 8453 } },
        metadata: { source: 'webapp', version: 2 },
        schemas: [2],
      })
    }
    // Schemas 0 and 1 do not say what a code stands for.
    expect(decodeAttribution(concat([CALL, attributionSuffix(['baseapp', 'morpho'])]))).toMatchObject({
      roles: ['code', 'code'],
      registries: {},
      metadata: null,
    })
  })

  test('an unknown schema id is ignored', () => {
    expect(decodeAttribution(`${CALL}62617365617070070380218021802180218021802180218021`)).toBeNull()
    expect(decodeAttribution(`${CALL}626173656170700707ff${MARKER}`)).toBeNull()
  })

  test('suffix gas: 16 per non-zero byte, 4 per zero byte', () => {
    // 'baseapp' (7) + length (1) + marker (16) are non-zero; the schema id byte is zero.
    expect(decodeAttribution(`${CALL}62617365617070070080218021802180218021802180218021`)?.suffixGas).toBe(24 * 16 + 4)
  })

  test('upper-case hex reads the same', () => {
    expect(decodeAttribution(`${CALL}62617365617070070080218021802180218021802180218021`.toUpperCase().replace('0X', '0x'))?.codes).toEqual(['baseapp'])
  })
})

describe('ox is the oracle', () => {
  /** ox's codes of the outermost suffix, kept as flashgate keeps them (1–32 printable ASCII, each once); none when ox throws. */
  function oxCodes(data: Hex): string[] {
    let attribution: Attribution.Attribution | undefined
    try {
      attribution = Attribution.fromData(data)
    } catch {
      return []
    }
    if (attribution === undefined) return []
    const codes = attribution.id === 2 ? [attribution.appCode, attribution.walletCode, ...(attribution.serviceCodes ?? [])] : [...(attribution.codes ?? [])]
    return [...new Set(codes.filter((code): code is string => typeof code === 'string' && isAttributionCode(code)))]
  }
  const hex = (bytes: number) => randomBytes(bytes).toString('hex')
  const byte = (value: number) => value.toString(16).padStart(2, '0')

  test('2,000 random suffixes of schemas 0, 1 and 2 whose lengths fit the calldata: the codes ox reads', () => {
    const words = ['baseapp', 'bc_k3v9x0qa', 'a', 'x'.repeat(32), 'morpho', '']
    for (let round = 0; round < 2_000; round++) {
      const codes = Array.from({ length: 1 + (round % 3) }, (_, index) => words[(round + index * 7) % words.length]!)
      const codesHex = Buffer.from(codes.join(',')).toString('hex')
      let suffix: string
      if (round % 3 === 0) suffix = `${codesHex}${byte(codesHex.length / 2)}00${MARKER}`
      else if (round % 3 === 1) {
        const chainIdBytes = 1 + (round % 32)
        // Half of them a small chain id zero-padded to the width, half random bytes (past 2^53 from 7 bytes on).
        const chainId = round % 2 === 0 ? byte(round % 256).padStart(2 * chainIdBytes, '0') : hex(chainIdBytes)
        suffix = `${hex(20)}${chainId}${byte(chainIdBytes)}${codesHex}${byte(codesHex.length / 2)}01${MARKER}`
      } else {
        const cbor = Cbor.encode({ a: codes[0], w: codes[1], s: codes.slice(2) }).slice(2)
        suffix = `${cbor}${(cbor.length / 2).toString(16).padStart(4, '0')}02${MARKER}`
      }
      const data = `${CALL}${suffix}` as Hex
      const decoded = decodeAttribution(data)
      expect(decoded?.codes ?? [], data).toEqual(oxCodes(data))
    }
  })
})

describe('hostile calldata: no attribution, and nothing throws', () => {
  const cases: [string, string][] = [
    ['empty', '0x'],
    ['no marker', `${CALL}${'ab'.repeat(40)}`],
    ['the marker alone (shorter than any suffix)', `0x${MARKER}`],
    ['marker and a schema id, no length', `0x00${MARKER}`],
    ['a codes length of zero', `${CALL}0000${MARKER}`],
    ['a codes length past the data', `0x6261ff00${MARKER}`],
    ['a schema-1 chain id length of zero', `${CALL}${'cc'.repeat(20)}00626173656170700701${MARKER}`],
    ['a schema-1 chain id length past the data', `0x${'cc'.repeat(4)}40626173656170700701${MARKER}`],
    ['a schema-1 registry shorter than an address', `0x${'cc'.repeat(5)}210502626173656170700701${MARKER}`],
    ['a CBOR length of zero', `${CALL}000002${MARKER}`],
    ['a CBOR length past the data', `${CALL}a1616161ffff02${MARKER}`],
    ['invalid CBOR', `${CALL}ffffffff000402${MARKER}`],
    ['CBOR that is not a map', `${CALL}f6000102${MARKER}`],
    ['a truncated CBOR string', `${CALL}a161616762000602${MARKER}`],
    ['not hex at all', `0xzz${'zz'.repeat(20)}${MARKER}`],
  ]
  for (const [name, data] of cases)
    test(name, () => {
      expect(() => decodeAttribution(data)).not.toThrow()
      const decoded = decodeAttribution(data)
      expect(decoded === null || decoded.codes.length === 0).toBe(true)
    })

  test('non-ASCII codes are dropped, ASCII ones beside them kept', () => {
    const codes = Buffer.from('caf\u00e9,bc_ok123456', 'utf8').toString('hex')
    const length = (codes.length / 2).toString(16).padStart(2, '0')
    expect(decodeAttribution(`${CALL}${codes}${length}00${MARKER}`)?.codes).toEqual(['bc_ok123456'])
  })

  test('codes longer than 32 characters or with control characters are dropped', () => {
    const suffix = Attribution.toDataSuffix({ codes: ['a'.repeat(33), 'tab\there', 'fine'] })
    expect(decodeAttribution(concat([CALL, suffix]))?.codes).toEqual(['fine'])
  })

  test('a code with a space is printable ASCII (ERC-8021: ASCII codes, comma-delimited): kept when read, and written by attributionSuffix', () => {
    const suffix = attributionSuffix(['my app', ' edge ', 'fine'])
    expect(suffix).toBe(Attribution.toDataSuffix({ codes: ['my app', ' edge ', 'fine'] }))
    expect(decodeAttribution(concat([CALL, suffix]))?.codes).toEqual(['my app', ' edge ', 'fine'])
    expect(() => attributionSuffix(['a,b'])).toThrow(/not an attribution code/)
  })

  test('null, undefined and non-strings read as no attribution', () => {
    expect(decodeAttribution(undefined)).toBeNull()
    expect(decodeAttribution(null)).toBeNull()
    expect(decodeAttribution(42 as unknown as string)).toBeNull()
  })

  test('5,000 random tails behind the marker never throw', () => {
    for (let round = 0; round < 5_000; round++) {
      const tail = randomBytes(round % 64).toString('hex')
      const schema = (round % 4).toString(16).padStart(2, '0')
      expect(() => decodeAttribution(`0x${tail}${schema}${MARKER}`)).not.toThrow()
    }
  })
})

describe('stacked suffixes', () => {
  test('an app suffix then a wallet suffix: both codes, outermost first, gas of both', () => {
    const app = attributionSuffix(['bc_app00001'])
    const wallet = Attribution.toDataSuffix({ walletCode: 'bc_wal00002' })
    const decoded = decodeAttribution(concat([CALL, app, wallet]))
    expect(decoded?.codes).toEqual(['bc_wal00002', 'bc_app00001'])
    expect(decoded?.schemas).toEqual([2, 0])
    expect(decoded?.suffixBytes).toBe((app.length - 2) / 2 + (wallet.length - 2) / 2)
  })

  test('a code repeated across suffixes counts once', () => {
    const suffix = attributionSuffix(['bc_same0001'])
    expect(decodeAttribution(concat([CALL, suffix, suffix]))?.codes).toEqual(['bc_same0001'])
  })

  test('a valid suffix stacked on a broken one keeps the valid codes', () => {
    expect(decodeAttribution(concat([`0x6261ff00${MARKER}`, attributionSuffix(['bc_outer001'])]))?.codes).toEqual(['bc_outer001'])
  })

  test('at most four suffixes are peeled off', () => {
    const suffixes = Array.from({ length: 6 }, (_, index) => attributionSuffix([`code${index}`]))
    expect(decodeAttribution(concat([CALL, ...suffixes]))?.codes).toEqual(['code5', 'code4', 'code3', 'code2'])
  })
})

describe('builder codes and suffixes', () => {
  test('generated codes are bc_ and 8 of [a-z0-9], and differ', () => {
    const codes = new Set(Array.from({ length: 1_000 }, generateBuilderCode))
    expect(codes.size).toBe(1_000)
    for (const code of codes) expect(code).toMatch(BUILDER_CODE_PATTERN)
  })

  test('attributionSuffix encodes schema 0 and refuses what no one could decode', () => {
    const suffix: Hex = attributionSuffix(['bc_abcd1234', 'bc_efgh5678'])
    expect(suffix.endsWith(MARKER)).toBe(true)
    expect(decodeAttribution(concat([CALL, suffix]))?.codes).toEqual(['bc_abcd1234', 'bc_efgh5678'])
    expect(() => attributionSuffix(['a,b'])).toThrow(TypeError)
    expect(() => attributionSuffix([''])).toThrow(TypeError)
  })
})
