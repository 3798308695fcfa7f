import { type Address, encodeAbiParameters, encodeEventTopics, type Hex, numberToHex, pad } from 'viem'
import { describe, expect, test } from 'vitest'
import { createRegistryFold, isRegistryCode, registryAbi, registryDecodeFailures, registryEvents, registryTokenId } from './registry.js'

const REGISTRY: Address = '0x000000bc7e6457e610fe52dcc0ca5b3ce59c8e80'
const OWNER: Address = '0x1111111111111111111111111111111111111111'
const PAYOUT: Address = '0x2222222222222222222222222222222222222222'
const BLOCK = { number: 7, timestamp: 1_700_000_000 }

const log = (topics: Hex[], data: Hex, logIndex = 0, address: string = REGISTRY) => ({ address, topics, data, logIndex })
const registered = (code: string, tokenId = registryTokenId(code)) =>
  log(encodeEventTopics({ abi: registryAbi, eventName: 'CodeRegistered', args: { tokenId } }) as Hex[], encodeAbiParameters([{ type: 'string' }], [code]))
const minted = (code: string, to: Address = OWNER) =>
  log(
    encodeEventTopics({
      abi: registryAbi,
      eventName: 'Transfer',
      args: { from: '0x0000000000000000000000000000000000000000', to, tokenId: registryTokenId(code) },
    }) as Hex[],
    '0x',
  )
const payout = (code: string, to: Address = PAYOUT) =>
  log(
    encodeEventTopics({ abi: registryAbi, eventName: 'PayoutAddressUpdated', args: { tokenId: registryTokenId(code) } }) as Hex[],
    encodeAbiParameters([{ type: 'address' }], [to]),
  )

describe('registry codes', () => {
  test('valid codes are 1 to 32 of [0-9a-z_]', () => {
    for (const code of ['a', 'bc_abcd1234', '0', '_', 'a'.repeat(32)]) expect(isRegistryCode(code), code).toBe(true)
    for (const code of ['', 'A', 'bc-1', 'a'.repeat(33), 'é', 'a b', 'a,b']) expect(isRegistryCode(code), code).toBe(false)
  })

  test('the token id is the code left-aligned in 32 bytes', () => {
    expect(numberToHex(registryTokenId('ab'), { size: 32 })).toBe(`0x6162${'0'.repeat(60)}`)
    expect(() => registryTokenId('Nope')).toThrow()
  })
})

describe('registryEvents', () => {
  test('decodes a registration (mint, code, payout) into events the fold turns into the code state', () => {
    const events = registryEvents(
      REGISTRY,
      BLOCK,
      [minted('agent'), registered('agent'), payout('agent')].map((entry, index) => ({ ...entry, logIndex: index })),
    )
    expect(events.map((event) => event.kind)).toEqual(['transfer', 'registered', 'payout'])
    const fold = createRegistryFold()
    for (const event of events) fold.apply(event)
    expect(fold.entries.get('agent')).toEqual({
      tokenId: pad(numberToHex(registryTokenId('agent')), { size: 32 }),
      registeredBlock: 7,
      registeredAt: 1_700_000_000,
      owner: OWNER,
      payoutAddress: PAYOUT,
    })
  })

  test('other contracts, other events and hostile logs are skipped; the malformed ones are counted', () => {
    const before = registryDecodeFailures.events
    const hostile = [
      { ...registered('agent'), address: '0x3333333333333333333333333333333333333333' }, // another contract
      log([pad('0x1234', { size: 32 })], '0x'), // an event the registry view does not read
      log([registered('agent').topics[0]!], encodeAbiParameters([{ type: 'string' }], ['agent'])), // tokenId topic missing
      log(registered('agent').topics, '0xdeadbeef'), // data that is no string
      registered('Agent', registryTokenId('agent')), // a code the registry cannot mint
      registered('other'.padEnd(5, '_'), registryTokenId('agent')), // a code that is not its token id
      log(minted('agent').topics.slice(0, 3), pad('0x01', { size: 32 })), // an ERC-20 shaped Transfer
    ]
    expect(registryEvents(REGISTRY, BLOCK, hostile)).toEqual([])
    expect(registryDecodeFailures.events - before).toBe(5)
  })

  test('a burnt token takes its code out; a code registered again starts over', () => {
    const fold = createRegistryFold()
    const apply = (logs: ReturnType<typeof log>[], number: number) => {
      for (const event of registryEvents(REGISTRY, { number, timestamp: number * 2 }, logs)) fold.apply(event)
    }
    apply([minted('agent'), registered('agent'), payout('agent')], 1)
    apply([minted('agent', '0x0000000000000000000000000000000000000000')], 2)
    expect(fold.entries.has('agent')).toBe(false)
    apply([minted('agent', PAYOUT), registered('agent'), payout('agent', OWNER)], 3)
    expect(fold.entries.get('agent')).toMatchObject({ registeredBlock: 3, registeredAt: 6, owner: PAYOUT, payoutAddress: OWNER })
  })
})
