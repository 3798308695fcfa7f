import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { createPublicClient, http } from 'viem'
import { describe, expect, test } from 'vitest'
import { startAnvil } from './anvil.js'

const PROJECT_ROOT = fileURLToPath(new URL('../..', import.meta.url))
const ANVIL_MODULE_URL = new URL('./anvil.ts', import.meta.url).href
const EXIT_WAIT_MS = 5_000

const clientFor = (rpcUrl: string) => createPublicClient({ transport: http(rpcUrl, { retryCount: 0, timeout: 1_000 }) })

/** Gone, or a zombie waiting for a reaper that may never come (PID 1 in a container need not reap). */
function isProcessGone(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return true
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? false
  } catch {
    return true
  }
}

/** The processes whose parent is `pid`, from /proc. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((child) => {
      try {
        return Number(readFileSync(`/proc/${child}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]) === pid
      } catch {
        return false
      }
    })
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\u0000', ' ')
  } catch {
    return ''
  }
}

async function waitUntilGone(pid: number): Promise<boolean> {
  const deadline = Date.now() + EXIT_WAIT_MS
  while (Date.now() < deadline) {
    if (isProcessGone(pid)) return true
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return isProcessGone(pid)
}

/** Runs a Node script that starts anvil, prints its pid, then ends the way `ending` says. */
function runOrphanScript(ending: string): Promise<{ anvilPid: number; code: number | null; signal: NodeJS.Signals | null }> {
  const script = `
    const { startAnvil } = await import(${JSON.stringify(ANVIL_MODULE_URL)})
    const anvil = await startAnvil()
    console.log('PID ' + anvil.process.pid)
    ${ending}
  `
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: PROJECT_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      const match = /PID (\d+)/.exec(stdout)
      if (!match) reject(new Error(`script printed no anvil pid (code ${code}):\n${stdout}\n${stderr}`))
      else resolve({ anvilPid: Number(match[1]), code, signal })
    })
  })
}

describe('startAnvil', () => {
  test('starts on a free loopback port and answers eth_chainId; stop() ends the process and frees the port', async () => {
    const anvil = await startAnvil({ chainId: 8453 })
    expect(anvil.port).toBeGreaterThan(0)
    expect(anvil.rpcUrl).toBe(`http://127.0.0.1:${anvil.port}`)
    expect(anvil.wsUrl).toBe(`ws://127.0.0.1:${anvil.port}`)
    expect(await clientFor(anvil.rpcUrl).getChainId()).toBe(8453)

    const pid = anvil.process.pid!
    await anvil.stop()
    expect(anvil.process.exitCode !== null || anvil.process.signalCode !== null).toBe(true)
    expect(await waitUntilGone(pid)).toBe(true)
    await expect(clientFor(anvil.rpcUrl).getChainId()).rejects.toThrow()
    await anvil.stop() // idempotent
  })

  test('concurrent anvils get distinct ports', async () => {
    const anvils = await Promise.all([startAnvil(), startAnvil(), startAnvil()])
    try {
      expect(new Set(anvils.map((anvil) => anvil.port)).size).toBe(3)
      const chainIds = await Promise.all(anvils.map((anvil) => clientFor(anvil.rpcUrl).getChainId()))
      expect(chainIds).toEqual([31337, 31337, 31337])
    } finally {
      await Promise.all(anvils.map((anvil) => anvil.stop()))
    }
  })

  test('an explicit port that is taken fails with anvil output in the error', async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as { port: number }
    try {
      await expect(startAnvil({ port })).rejects.toThrow(/address already in use/i)
    } finally {
      server.close()
    }
  })

  test('noMining leaves sent transactions pending until evm_mine', async () => {
    const anvil = await startAnvil({ noMining: true })
    try {
      const client = clientFor(anvil.rpcUrl)
      const [from] = (await client.request({ method: 'eth_accounts' } as never)) as [string]
      await client.request({ method: 'eth_sendTransaction', params: [{ from, to: from, value: '0x1' }] } as never)
      expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(0n)
      await client.request({ method: 'evm_mine' } as never)
      expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(1n)
    } finally {
      await anvil.stop()
    }
  })

  test('blockTime mines blocks on an interval', async () => {
    const anvil = await startAnvil({ blockTime: 1 })
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_500))
      expect(await clientFor(anvil.rpcUrl).getBlockNumber({ cacheTime: 0 })).toBeGreaterThanOrEqual(1n)
    } finally {
      await anvil.stop()
    }
  })

  test('no orphan when the owning process calls process.exit without stop()', async () => {
    const { anvilPid, code } = await runOrphanScript('process.exit(3)')
    expect(code).toBe(3)
    expect(await waitUntilGone(anvilPid)).toBe(true)
  })

  test('no orphan when the owning process is terminated by SIGTERM without a handler of its own', async () => {
    const { anvilPid, signal } = await runOrphanScript("process.kill(process.pid, 'SIGTERM'); setTimeout(() => {}, 10_000)")
    // The signal is re-raised after cleanup, so the process still dies "by SIGTERM".
    expect(signal).toBe('SIGTERM')
    expect(await waitUntilGone(anvilPid)).toBe(true)
  })

  test('no orphan when the owning process is killed by SIGKILL, which it cannot catch (kill -9, the OOM killer)', async () => {
    const { anvilPid, signal } = await runOrphanScript("process.kill(process.pid, 'SIGKILL')")
    expect(signal).toBe('SIGKILL')
    const gone = await waitUntilGone(anvilPid)
    if (!gone) process.kill(anvilPid, 'SIGKILL')
    expect(gone).toBe(true)
  })

  test('the watchdog leaves with anvil: stop() ends both, and nothing is left to signal a process id used again', async () => {
    const anvil = await startAnvil()
    const watchdogs = () => childrenOf(process.pid).filter((pid) => commandOf(pid).includes(`kill -KILL ${anvil.process.pid}`))
    expect(watchdogs()).toHaveLength(1)
    const [watchdog] = watchdogs()
    await anvil.stop()
    expect(await waitUntilGone(watchdog!)).toBe(true)
  })

  test('no orphan when the owning process crashes with an uncaught exception', async () => {
    const { anvilPid, code } = await runOrphanScript("setTimeout(() => { throw new Error('crash') }, 0)")
    expect(code).toBe(1)
    expect(await waitUntilGone(anvilPid)).toBe(true)
  })
})
