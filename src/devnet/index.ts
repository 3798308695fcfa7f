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
