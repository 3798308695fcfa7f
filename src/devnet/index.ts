export {
  ANVIL_READY_TIMEOUT_MS,
  ANVIL_STOP_TIMEOUT_MS,
  type Anvil,
  type DevnetLogger,
  type StartAnvilOptions,
  startAnvil,
} from './anvil.js'
export {
  CUSTOM_TOPIC,
  TOKEN_DEPLOY_BYTECODE,
  TOKEN_RUNTIME_BYTECODE,
  TRANSFER_TOPIC,
  ZERO_AMOUNT_REASON,
  deployToken,
  tokenAbi,
} from './contracts.js'
export {
  DEFAULT_TRAFFIC_RATE_PER_SECOND,
  type TrafficGenerator,
  type TrafficGeneratorOptions,
  createTrafficGenerator,
} from './traffic.js'
export {
  DEFAULT_BLOCK_TIME_MS,
  DEFAULT_DEVNET_RPC_PORT,
  DEFAULT_FLASHBLOCK_INTERVAL_MS,
  DEFAULT_FLASHBLOCKS_PORT,
  type Devnet,
  type StartDevnetOptions,
  startDevnet,
} from './devnet.js'
export { type EncodeFlashblockOptions, type FeedFormat, type FlashblockSource, buildFlashblockMessage, encodeFlashblock } from './flashblock-message.js'
export { type PendingBlock, PRECONFIRMED_BLOCK_HASH, readAsNode } from './node-view.js'
export {
  BASE_TRANSACTIONS_PER_BLOCK,
  DEFAULT_PROFILE_SEED,
  type LoadProfile,
  type LoadProfileOptions,
  type LoadProfileStats,
  createBaseProfile,
} from './profile.js'
export { ATTRIBUTED_SHARE, BASE_MIX, type BaseContracts, PROFILE_BUILDER_CODES, expectedLogsPerTransaction } from './base-mix.js'
export { LOGS_PER_HOP, POOL_DEPLOY_BYTECODE, POOL_RUNTIME_BYTECODE, SWAP_TOPIC, SYNC_TOPIC, poolAbi } from './pool.js'
export { type FlashblocksServer, type FlashblocksServerOptions, createFlashblocksServer } from './flashblocks-server.js'
export { type Sequencer, type SequencerOptions, SEQUENCER_ANVIL_ARGS, createSequencer, ticksPerSlot } from './sequencer.js'
