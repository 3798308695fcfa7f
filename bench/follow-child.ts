import { randomUUID } from 'node:crypto'
import { pino } from 'pino'
import { type Gateway, startGateway } from '../src/app.js'
import { serveConfigSchema } from '../src/config.js'
import { type Devnet, startDevnet } from '../src/devnet/devnet.js'

// One process of a follow run (bench/follow.ts forks it), so that its CPU and memory are its own: the
// devnet (sequencer, Flashblocks feed and the `base` load profile; anvil is its child), or the gateway.

export type ChildJob = { role: 'devnet'; profileSeed: number } | { role: 'gateway'; upstreamRpc: string; flashblocksWs: string; databaseUrl: string }

export type DevnetReady = {
  role: 'devnet'
  rpcUrl: string
  flashblocksUrl: string
  contracts: { tokens: string[]; pools: string[] }
  senders: string[]
}
export type GatewayReady = { role: 'gateway'; url: string; dedicatedUrl: string }
export type ChildMessage = DevnetReady | GatewayReady | { stats: unknown } | { error: string } | { stopped: true }
export type ParentMessage = { stop: true } | { stats: true }

const logger = pino({ level: process.env.BENCH_LOG_LEVEL ?? 'warn' }, pino.destination(2))

process.once('message', (job: ChildJob) => {
  start(job).then(
    ({ ready, stop, stats }) => {
      process.send!(ready)
      process.on('message', (message: ParentMessage) => {
        if ('stats' in message) process.send!({ stats: stats() })
        if ('stop' in message) void stop().finally(() => process.send!({ stopped: true }, () => process.exit(0)))
      })
    },
    (error: unknown) => process.send!({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) }, () => process.exit(1)),
  )
})

async function start(job: ChildJob): Promise<{ ready: ChildMessage; stop: () => Promise<void>; stats: () => unknown }> {
  if (job.role === 'devnet') {
    const devnet: Devnet = await startDevnet({
      port: 0,
      flashblocksPort: 0,
      profile: 'base',
      profileSeed: job.profileSeed,
      logger: logger.child({ module: 'devnet' }),
    })
    const { contracts, senders } = devnet.profile!
    return {
      ready: { role: 'devnet', rpcUrl: devnet.rpcUrl, flashblocksUrl: devnet.flashblocksUrl, contracts, senders },
      stop: devnet.stop,
      stats: () => devnet.profile!.stats(),
    }
  }
  const config = serveConfigSchema.parse({
    port: 0,
    databaseUrl: job.databaseUrl,
    upstreamRpc: job.upstreamRpc,
    flashblocksWs: job.flashblocksWs,
    startBlock: '0',
    // One load generator from one address: the public endpoint's per-address rate must not throttle it.
    publicRateLimit: 0,
    logLevel: 'warn',
  })
  const gateway: Gateway = await startGateway({ config, logger })
  const { key } = await gateway.resolvers.createApiKey({ name: `follow-${randomUUID()}`, policy: 'dedicated', rateLimit: 0 })
  return {
    ready: { role: 'gateway', url: gateway.url, dedicatedUrl: `${gateway.url}/rpc/${key}` },
    stop: gateway.stop,
    stats: () => gateway.ingester.status(),
  }
}
