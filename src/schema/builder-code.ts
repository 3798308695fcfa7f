import type { Address } from 'viem'
import { attributionCode, SERIES_INTERVALS, type SeriesInterval } from '../codecs/index.js'
import { InternalError } from '../errors.js'
import { DEFAULT_LEADERBOARD_SIZE, DEFAULT_SERIES_POINTS, MAX_LEADERBOARD_SIZE, MAX_SERIES_POINTS } from '../resolvers/attribution.js'
import type { AttributionFigures as Figures, BuilderCodeStats as Stats, LeaderboardEntry, RegistryStatus, Resolvers, SeriesPoint } from '../resolvers/index.js'
import { builder } from './builder.js'

const DEFAULT_INTERVAL: SeriesInterval = 'hour'

/** A builder code and a way to its stats, read through `builderCodeStats` once per interval and length. */
export type BuilderCodeShape = {
  code: string
  /** EIP-55 checksummed; `null` for a code seen on chain that nobody registered here. */
  wallet: Address | null
  stats: (options: { interval: SeriesInterval; points: number }) => Promise<Stats | null>
  onChain: () => Promise<RegistryStatus | null>
}

function builderCodeShape(resolvers: Resolvers, code: string, wallet: Address | null, known?: Stats): BuilderCodeShape {
  const answers = new Map<string, Promise<Stats | null>>()
  const key = (options: { interval: SeriesInterval; points: number }) => `${options.interval}:${options.points}`
  if (known !== undefined) answers.set(key({ interval: DEFAULT_INTERVAL, points: DEFAULT_SERIES_POINTS }), Promise.resolve(known))
  let onChain: Promise<RegistryStatus | null> | undefined = known === undefined ? undefined : Promise.resolve(known.onChain)
  return {
    code,
    wallet,
    onChain: () => (onChain ??= resolvers.builderCode(code).then((summary) => summary?.onChain ?? null)),
    stats(options) {
      let answer = answers.get(key(options))
      if (answer === undefined) answers.set(key(options), (answer = resolvers.builderCodeStats(code, options)))
      return answer
    },
  }
}

export const SeriesIntervalEnum = builder.enumType('SeriesInterval', {
  description: 'The bucket width of an attribution time series, in chain time.',
  values: Object.fromEntries(SERIES_INTERVALS.map((interval) => [interval.toUpperCase(), { value: interval }])) as {
    [interval in SeriesInterval as Uppercase<interval>]: { value: interval }
  },
})

export const AttributionRoleCounts = builder.objectRef<Figures['byRole']>('AttributionRoleCounts').implement({
  description: 'Attributed transactions and user operations by what the code stood for in the suffix.',
  fields: (t) => ({
    app: t.exposeInt('app', { description: 'As the app code of an ERC-8021 schema 2 suffix (`a`).' }),
    wallet: t.exposeInt('wallet', { description: 'As the wallet code of a schema 2 suffix (`w`).' }),
    service: t.exposeInt('service', { description: 'As one of the service codes of a schema 2 suffix (`s`).' }),
    code: t.exposeInt('code', { description: 'In a schema 0 or 1 suffix, which does not say.' }),
  }),
})

export const AttributionFigures = builder.objectRef<Figures>('AttributionFigures').implement({
  description: 'Figures of one builder code over a set of attributed transactions and user operations (ERC-4337).',
  fields: (t) => ({
    transactions: t.exposeInt('transactions', {
      description: "Transactions attributed by their own calldata (an EOA's, or a bundler's that carries a suffix).",
    }),
    userOperations: t.exposeInt('userOperations', {
      description: 'User operations (ERC-4337) attributed by their `callData`, each counted apart from its bundle.',
    }),
    reach: t.exposeInt('reach', { description: "Distinct senders: the transactions' senders and the operations' smart accounts (never their bundlers)." }),
    userOperationReach: t.exposeInt('userOperationReach', { description: 'Distinct smart accounts among them.' }),
    contracts: t.exposeInt('contracts', { description: 'Distinct call targets (`to`); contract creations have none.' }),
    gasUsed: t.expose('gasUsed', { type: 'BigInt', description: "Gas of both: each transaction's receipt, each operation's `actualGasUsed`." }),
    userOperationGasUsed: t.expose('userOperationGasUsed', { type: 'BigInt', description: "Of which the user operations' (`actualGasUsed`)." }),
    suffixGas: t.expose('suffixGas', {
      type: 'BigInt',
      description: 'Calldata gas of the attribution suffixes: 16 per non-zero byte, 4 per zero byte.',
    }),
    value: t.expose('value', { type: 'BigInt', description: 'Wei.' }),
    byRole: t.expose('byRole', { type: AttributionRoleCounts }),
    firstSeen: t.expose('firstSeen', {
      type: 'BigInt',
      nullable: true,
      description: 'Block timestamp (seconds since the Unix epoch) of the first attributed transaction; `null` without any.',
    }),
    lastSeen: t.expose('lastSeen', { type: 'BigInt', nullable: true, description: 'Block timestamp of the last attributed transaction.' }),
  }),
})

export const AttributionSeriesPoint = builder.objectRef<SeriesPoint>('AttributionSeriesPoint').implement({
  description: 'One bucket of a confirmed attribution time series, counted as `AttributionFigures` are.',
  fields: (t) => ({
    timestamp: t.expose('timestamp', { type: 'BigInt', description: 'Start of the bucket, seconds since the Unix epoch.' }),
    transactions: t.exposeInt('transactions', { description: 'Transactions attributed by their own calldata; user operations are not among them.' }),
    userOperations: t.exposeInt('userOperations', { description: 'User operations (ERC-4337) attributed by their `callData`.' }),
    reach: t.exposeInt('reach', { description: 'Distinct senders in the bucket: EOAs and smart accounts.' }),
    gasUsed: t.expose('gasUsed', { type: 'BigInt', description: 'Gas of both.' }),
  }),
})

export const AttributionSeries = builder.objectRef<Stats['series']>('AttributionSeries').implement({
  description: 'A dense series of buckets of confirmed transactions and user operations, oldest first, ending with the bucket of the newest one.',
  fields: (t) => ({
    interval: t.expose('interval', { type: SeriesIntervalEnum }),
    bucketSeconds: t.exposeInt('bucketSeconds'),
    points: t.expose('points', { type: [AttributionSeriesPoint] }),
  }),
})

export const BuilderCodeOnChain = builder.objectRef<RegistryStatus>('BuilderCodeOnChain').implement({
  description: "What the on-chain Builder Codes registry (Base's ERC-721, `--builder-code-registry`) says of a code: a code earns only once registered there.",
  fields: (t) => ({
    registry: t.expose('registry', { type: 'Address', description: 'The registry followed.' }),
    validCode: t.exposeBoolean('validCode', { description: 'Whether the registry could hold the code at all: 1 to 32 of `[0-9a-z_]`.' }),
    registered: t.exposeBoolean('registered'),
    tokenId: t.expose('tokenId', { type: 'HexData', nullable: true, description: 'The token: the code, left-aligned in 32 bytes.' }),
    registeredBlock: t.expose('registeredBlock', { type: 'BigInt', nullable: true }),
    registeredAt: t.expose('registeredAt', {
      type: 'BigInt',
      nullable: true,
      description: 'Block timestamp of the registration, seconds since the Unix epoch.',
    }),
    owner: t.expose('owner', { type: 'Address', nullable: true, description: "The token's owner." }),
    payoutAddress: t.expose('payoutAddress', { type: 'Address', nullable: true }),
    complete: t.exposeBoolean('complete', { description: "`false` while the registry's events below the index are still being read from the upstream." }),
  }),
})

export const BuilderCodeStats = builder.objectRef<Stats>('BuilderCodeStats').implement({
  description:
    'Attribution of a builder code, as `GET /v1/builder-codes/{code}/stats`: confirmed figures up to `head`, pending ones above it ' +
    '(a transaction is counted in exactly one of them).',
  fields: (t) => ({
    head: t.field({
      type: 'BigInt',
      nullable: true,
      description: 'The indexed head the figures are consistent with.',
      resolve: (stats) => stats.head,
    }),
    confirmed: t.expose('confirmed', { type: AttributionFigures }),
    pending: t.expose('pending', { type: AttributionFigures, description: 'Pre-confirmed (Flashblocks) transactions above `head`.' }),
    series: t.expose('series', { type: AttributionSeries }),
  }),
})

export const BuilderCode = builder.objectRef<BuilderCodeShape>('BuilderCode').implement({
  description: 'An ERC-8021 builder code: registered here by a wallet, or only seen in calldata on chain.',
  fields: (t) => ({
    code: t.exposeString('code'),
    wallet: t.expose('wallet', { type: 'Address', nullable: true, description: 'The wallet that registered the code here; `null` if nobody did.' }),
    registered: t.boolean({ resolve: (code) => code.wallet !== null }),
    onChain: t.field({
      type: BuilderCodeOnChain,
      nullable: true,
      description: "The on-chain registry's word on the code; `null` when no registry is followed.",
      resolve: (code) => code.onChain(),
    }),
    stats: t.field({
      type: BuilderCodeStats,
      args: {
        interval: t.arg({ type: SeriesIntervalEnum, defaultValue: DEFAULT_INTERVAL }),
        points: t.arg.int({
          description: `Buckets in the series, at most ${MAX_SERIES_POINTS}.`,
          defaultValue: DEFAULT_SERIES_POINTS,
          validate: { min: 1, max: MAX_SERIES_POINTS },
        }),
      },
      resolve: async (code, args) => {
        const stats = await code.stats({ interval: args.interval ?? DEFAULT_INTERVAL, points: args.points ?? DEFAULT_SERIES_POINTS })
        // The code was registered or seen on chain when this object was made; only a reorg undoing every
        // transaction of an unregistered code, within this request, makes it unknown.
        if (stats === null) throw new InternalError(`builder code ${code.code} is no longer known`)
        return stats
      },
    }),
  }),
})

export const BuilderCodeRank = builder.objectRef<LeaderboardEntry>('BuilderCodeRank').implement({
  description: 'A line of the builder-code leaderboard, as `GET /v1/builder-codes`.',
  fields: (t) => ({
    code: t.exposeString('builderCode'),
    registered: t.exposeBoolean('registered'),
    transactions: t.exposeInt('transactions', { description: 'Confirmed transactions attributed by their own calldata.' }),
    userOperations: t.exposeInt('userOperations', { description: 'Confirmed user operations (ERC-4337).' }),
    pendingTransactions: t.exposeInt('pendingTransactions', { description: 'Pre-confirmed transactions and user operations above the indexed head.' }),
    reach: t.exposeInt('reach', { description: 'Distinct senders of the confirmed transactions.' }),
    gasUsed: t.expose('gasUsed', { type: 'BigInt' }),
    lastSeen: t.expose('lastSeen', { type: 'BigInt', nullable: true, description: 'Block timestamp of the last confirmed transaction.' }),
    onChain: t.expose('onChain', {
      type: BuilderCodeOnChain,
      nullable: true,
      description: "The on-chain registry's word on the code; `null` when no registry is followed.",
    }),
  }),
})

builder.queryFields((t) => ({
  builderCode: t.field({
    type: BuilderCode,
    nullable: true,
    description:
      'A builder code by the wallet that registered it or by the code itself (exactly one). `null` for a wallet without a code, or ' +
      'a code neither registered here nor seen on chain.',
    args: {
      // The `Address` scalar refuses a mixed-case address with a wrong checksum, as registration does.
      wallet: t.arg({ type: 'Address' }),
      code: t.arg.string({ validate: { schema: attributionCode } }),
    },
    validate: [
      (args) => (args.wallet === undefined || args.wallet === null) !== (args.code === undefined || args.code === null),
      { message: 'give exactly one of wallet and code' },
    ],
    resolve: async (_root, args, { resolvers }) => {
      if (args.wallet !== undefined && args.wallet !== null) {
        const record = await resolvers.builderCodeOfWallet(args.wallet)
        return record === null ? null : builderCodeShape(resolvers, record.builderCode, record.walletAddress)
      }
      const code = args.code!
      const stats = await resolvers.builderCodeStats(code, { interval: DEFAULT_INTERVAL, points: DEFAULT_SERIES_POINTS })
      return stats === null ? null : builderCodeShape(resolvers, code, stats.walletAddress, stats)
    },
  }),
  builderCodes: t.field({
    type: [BuilderCodeRank],
    description: 'Builder codes ranked by transactions and user operations (confirmed plus pending), registered here or not.',
    args: {
      limit: t.arg.int({
        description: `At most ${MAX_LEADERBOARD_SIZE}.`,
        defaultValue: DEFAULT_LEADERBOARD_SIZE,
        validate: { min: 1, max: MAX_LEADERBOARD_SIZE },
      }),
    },
    complexity: (args) => ({ field: 1, multiplier: args.limit ?? DEFAULT_LEADERBOARD_SIZE }),
    resolve: (_root, args, { resolvers }) => resolvers.builderCodeLeaderboard({ limit: args.limit ?? DEFAULT_LEADERBOARD_SIZE }),
  }),
}))
