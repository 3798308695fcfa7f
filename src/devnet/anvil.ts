import { type ChildProcess, spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { createPublicClient, http } from 'viem'

/** How long anvil may take to bind its port and answer `eth_chainId`. */
/** The mnemonic whose accounts anvil unlocks and funds by default (the devnet's dev accounts). */
export const DEV_MNEMONIC = 'test test test test test test test test test test test junk'

export const ANVIL_READY_TIMEOUT_MS = 15_000
/** Pause between readiness probes. */
const READY_POLL_INTERVAL_MS = 50
/** Per-probe HTTP timeout; a probe that hangs must not eat the whole readiness budget. */
const READY_PROBE_TIMEOUT_MS = 1_000
/** Grace period after SIGTERM before stop() escalates to SIGKILL. */
export const ANVIL_STOP_TIMEOUT_MS = 3_000
/** How much of anvil's recent output is kept for error messages. */
const OUTPUT_TAIL_CHARS = 4_096
const LOOPBACK_HOST = '127.0.0.1'

/** The `@foundry-rs/anvil` wrapper picks its binary from one of these optional dependencies. */
const PLATFORM_PACKAGES: Record<string, string> = {
  'linux-x64': '@foundry-rs/anvil-linux-amd64',
  'linux-arm64': '@foundry-rs/anvil-linux-arm64',
  'darwin-x64': '@foundry-rs/anvil-darwin-amd64',
  'darwin-arm64': '@foundry-rs/anvil-darwin-arm64',
  'win32-x64': '@foundry-rs/anvil-win32-amd64',
}

/** pino-compatible: `logger.info({ port }, 'anvil ready')`. */
export type DevnetLogger = {
  info: (obj: object, msg?: string) => void
  warn: (obj: object, msg?: string) => void
  error?: (obj: object, msg?: string) => void
  debug?: (obj: object, msg?: string) => void
}

export type StartAnvilOptions = {
  /** 0 or omitted: a free loopback port chosen by the OS. */
  port?: number
  /** Interval mining, in seconds. Omitted: automine (one block per transaction). */
  blockTime?: number
  /** Mine only on `evm_mine` / `anvil_mine`. */
  noMining?: boolean
  chainId?: number
  /** Always loopback: a dev node with unlocked, funded accounts must not be reachable from the network. */
  host?: typeof LOOPBACK_HOST
  extraArgs?: string[]
  logger?: DevnetLogger
}

export type Anvil = {
  rpcUrl: string
  wsUrl: string
  port: number
  process: ChildProcess
  /** SIGTERM, then SIGKILL after ANVIL_STOP_TIMEOUT_MS; resolves once the process has exited. Idempotent. */
  stop: () => Promise<void>
}

export async function startAnvil(options: StartAnvilOptions = {}): Promise<Anvil> {
  const { command, prefixArgs } = resolveAnvilCommand()
  const args = [...prefixArgs, ...buildAnvilArgs(options)]
  const child = spawn(command, args, {
    // TARGET_TOOL lets the `@foundry-rs/anvil` bin.mjs fallback know which tool it wraps.
    env: { ...process.env, TARGET_TOOL: 'anvil' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A process group of its own: a terminal's Ctrl-C (SIGINT to the foreground group) reaches this process
    // alone, which stops its gateway and devnet while anvil still answers, then anvil (stop() below); in the
    // terminal's group, anvil died first and the devnet's shutdown logged the failures as warnings.
    detached: true,
  })
  trackChild(child)
  watchForOwnerDeath(child)

  const output = createOutputTail()
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve())
    // A spawn failure (ENOENT, EACCES) emits 'error' and never 'exit'.
    child.on('error', (error) => {
      if (child.pid === undefined) resolve()
      else options.logger?.warn({ err: error, pid: child.pid }, 'anvil process error')
    })
  })

  try {
    const port = await waitForListening(child, output)
    const rpcUrl = `http://${LOOPBACK_HOST}:${port}`
    await waitForRpc(rpcUrl, child, output)
    options.logger?.info({ rpcUrl, pid: child.pid }, 'anvil ready')
    return {
      rpcUrl,
      wsUrl: `ws://${LOOPBACK_HOST}:${port}`,
      port,
      process: child,
      stop: memoize(() => stopChild(child, exited)),
    }
  } catch (error) {
    await stopChild(child, exited)
    throw error
  }
}

function buildAnvilArgs(options: StartAnvilOptions): string[] {
  if (options.blockTime !== undefined && options.noMining) {
    throw new Error('startAnvil: blockTime and noMining are mutually exclusive')
  }
  // anvil binds port 0 itself and prints the port it got ("Listening on 127.0.0.1:PORT"), which avoids
  // the race of probing a free port and handing it over. That line is anvil's only report of the port,
  // so stdout is read (and drained) instead of passing --quiet.
  if (options.extraArgs?.some((arg) => arg === '--quiet' || arg === '-q')) {
    throw new Error('startAnvil: --quiet hides the "Listening on" line that reports the port; leave it out')
  }
  const args = ['--host', LOOPBACK_HOST, '--port', String(options.port ?? 0)]
  if (options.blockTime !== undefined) args.push('--block-time', String(options.blockTime))
  if (options.noMining) args.push('--no-mining')
  if (options.chainId !== undefined) args.push('--chain-id', String(options.chainId))
  args.push(...(options.extraArgs ?? []))
  return args
}

/** The platform binary directly, so that signals reach anvil itself and not a Node wrapper. */
function resolveAnvilCommand(): { command: string; prefixArgs: string[] } {
  const require = createRequire(import.meta.url)
  const platformPackage = PLATFORM_PACKAGES[`${process.platform}-${process.arch}`]
  const binaryName = process.platform === 'win32' ? 'anvil.exe' : 'anvil'
  if (platformPackage) {
    try {
      return { command: require.resolve(`${platformPackage}/bin/${binaryName}`), prefixArgs: [] }
    } catch {
      // optional dependency not installed (e.g. --no-optional); fall back to the wrapper below
    }
  }
  // The wrapper forwards SIGTERM/SIGINT but not SIGKILL, so a hard kill can orphan anvil on this path.
  return { command: process.execPath, prefixArgs: [require.resolve('@foundry-rs/anvil/bin.mjs')] }
}

type OutputTail = { append: (chunk: string) => void; text: () => string }

function createOutputTail(): OutputTail {
  let tail = ''
  return {
    append: (chunk) => {
      tail = (tail + chunk).slice(-OUTPUT_TAIL_CHARS)
    },
    text: () => tail.trim(),
  }
}

function waitForListening(child: ChildProcess, output: OutputTail): Promise<number> {
  return new Promise((resolve, reject) => {
    let stdoutBuffer = ''
    let settled = false
    const settle = (fn: () => void) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      child.off('close', onExit)
      child.off('error', onError)
      fn()
    }
    const timer = setTimeout(
      () => settle(() => reject(anvilError(`did not start listening within ${ANVIL_READY_TIMEOUT_MS} ms`, output))),
      ANVIL_READY_TIMEOUT_MS,
    )
    // 'close', not 'exit': 'exit' can come before the last of anvil's output is read (its reason for exiting).
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      settle(() => reject(anvilError(`exited before listening (code ${code}, signal ${signal})`, output)))
    const onError = (error: Error) => settle(() => reject(anvilError(`failed to spawn: ${error.message}`, output)))
    child.once('close', onExit)
    child.once('error', onError)

    // Both streams stay drained for the life of the process: a full pipe would block anvil.
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => output.append(chunk))
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      output.append(chunk)
      if (settled) return
      stdoutBuffer = (stdoutBuffer + chunk).slice(-OUTPUT_TAIL_CHARS)
      const match = /Listening on [^\s:]+:(\d+)/.exec(stdoutBuffer)
      if (match?.[1]) {
        const port = Number(match[1])
        settle(() => resolve(port))
      }
    })
  })
}

async function waitForRpc(rpcUrl: string, child: ChildProcess, output: OutputTail): Promise<void> {
  const client = createPublicClient({ transport: http(rpcUrl, { retryCount: 0, timeout: READY_PROBE_TIMEOUT_MS }) })
  const deadline = Date.now() + ANVIL_READY_TIMEOUT_MS
  let lastError: unknown
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw anvilError(`exited before answering eth_chainId (code ${child.exitCode})`, output)
    }
    try {
      await client.getChainId()
      return
    } catch (error) {
      lastError = error
    }
    await sleep(READY_POLL_INTERVAL_MS)
  }
  const reason = lastError instanceof Error ? lastError.message.split('\n')[0] : String(lastError)
  throw anvilError(`did not answer eth_chainId at ${rpcUrl} within ${ANVIL_READY_TIMEOUT_MS} ms (${reason})`, output)
}

function anvilError(message: string, output: OutputTail): Error {
  const text = output.text()
  return new Error(`anvil ${message}${text ? `\n--- anvil output (tail) ---\n${text}` : ''}`)
}

async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), ANVIL_STOP_TIMEOUT_MS)
    await exited
    clearTimeout(timer)
  }
  untrackChild(child)
}

// --- orphan protection -------------------------------------------------------------------------------
// A test run that crashes or calls process.exit() never reaches stop(); the children are killed here
// instead. SIGKILL of this process (or the OOM killer) cannot be caught: a watchdog covers that case.

/**
 * Kills anvil once this process is gone, however it went (SIGKILL included): a shell blocked reading a pipe
 * whose only writer is this process, which the kernel closes when the process dies. The shell's `read` then
 * returns and it kills anvil. While anvil lives the watchdog waits; once anvil has exited it is killed first,
 * so it never signals a process id used again. Neither the pipe nor the shell keeps this process running.
 * Not on Windows, which has no `sh`; a watchdog that cannot start leaves the hooks below as the only cover.
 */
function watchForOwnerDeath(child: ChildProcess): void {
  if (process.platform === 'win32' || child.pid === undefined) return
  // Out of the terminal's group with anvil, so that a Ctrl-C does not end the watch while anvil still runs.
  const watchdog = spawn('/bin/sh', ['-c', `read _; kill -KILL ${child.pid} 2>/dev/null`], { stdio: ['pipe', 'ignore', 'ignore'], detached: true })
  watchdog.on('error', () => {})
  watchdog.unref()
  ;(watchdog.stdin as (NodeJS.WritableStream & { unref?: () => void }) | null)?.unref?.()
  child.once('exit', () => watchdog.kill('SIGKILL'))
}

const liveChildren = new Set<ChildProcess>()
const FORWARDED_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP']
let hooksInstalled = false

function killAllChildren(): void {
  for (const child of liveChildren) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
  liveChildren.clear()
}

function onSignal(signal: NodeJS.Signals): void {
  // Someone else (the CLI) handles this signal and owns shutdown; the 'exit' hook is the backstop.
  if (process.listenerCount(signal) > 1) return
  // Nobody else listens, so without us the default action would have terminated the process: clean up,
  // then re-raise so the exit status still says "killed by signal".
  killAllChildren()
  uninstallHooks()
  process.kill(process.pid, signal)
}

function installHooks(): void {
  if (hooksInstalled) return
  hooksInstalled = true
  process.on('exit', killAllChildren)
  for (const signal of FORWARDED_SIGNALS) process.on(signal, onSignal)
}

function uninstallHooks(): void {
  if (!hooksInstalled) return
  hooksInstalled = false
  process.off('exit', killAllChildren)
  for (const signal of FORWARDED_SIGNALS) process.off(signal, onSignal)
}

function trackChild(child: ChildProcess): void {
  liveChildren.add(child)
  installHooks()
  child.once('exit', () => untrackChild(child))
}

function untrackChild(child: ChildProcess): void {
  liveChildren.delete(child)
  // Leave no listeners behind once nothing is running, so the hooks never keep state across uses.
  if (liveChildren.size === 0) uninstallHooks()
}

function memoize<T>(fn: () => Promise<T>): () => Promise<T> {
  let result: Promise<T> | undefined
  return () => (result ??= fn())
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
