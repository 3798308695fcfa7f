export { BUILDER_CODE_PATTERN, generateBuilderCode } from './builder-code.js'
export {
  attributionSuffix,
  type DecodedAttribution,
  decodeAttribution,
  hasAttributionMarker,
  isAttributionCode,
} from './decode.js'
