import { createRequire } from 'node:module'

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

export const VERSION = version
export const CLIENT_VERSION = `flashgate/v${version}`
