import { readFileSync, readdirSync } from 'node:fs'

// CPU and memory of the processes in a follow run, read from /proc (Linux): utime + stime in clock ticks,
// and the resident set without shared memory (RssAnon + RssFile: Postgres backends all map the shared
// buffers, which a sum of their VmRSS would count once per backend). Sampled once a second; CPU is the
// share of one core over the measured window.

/** `getconf CLK_TCK` on Linux. */
export const CLOCK_TICKS_PER_SECOND = 100
const KIB = 1024
const MIB = 1024 * 1024

type Sample = { at: number; cpuTicks: number; rssBytes: number }

export type ProcessFigures = {
  pids: number[]
  /** Share of one core over the window, in percent (200 = both cores of a two-core machine). */
  cpuPercent: number
  cpuSeconds: number
  rssMeanMiB: number
  rssMaxMiB: number
}

/** utime + stime and private RSS of one process, or null once it has gone. */
export function readStat(pid: number): { cpuTicks: number; rssBytes: number; parent: number } | null {
  let stat: string
  let status: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    status = readFileSync(`/proc/${pid}/status`, 'utf8')
  } catch {
    return null
  }
  // The command name (field 2) may hold spaces; the fields after its closing parenthesis are fixed.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0)
  return { parent: Number(fields[1]), cpuTicks: Number(fields[11]) + Number(fields[12]), rssBytes: (kib('RssAnon') + kib('RssFile')) * KIB }
}

/** The direct children of a process named `command` (anvil under the devnet process, beside tsx's esbuild). */
export function childPids(parent: number, command: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => readStat(pid)?.parent === parent && readCommand(pid) === command)
}

export function readCommand(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return null
  }
}

/**
 * Samples named groups of processes; a group's pids may change (load workers, database backends), so the
 * caller says which pids belong to it at each sample. CPU is summed over a group's pids from each pid's first
 * sample in the window to its last; RSS is the group's sum at each sample.
 */
export function createProcessSampler() {
  const samples = new Map<string, Map<number, Sample[]>>()
  const totals = new Map<string, number[]>()
  let started: number | undefined
  let ended: number | undefined

  function sample(groups: Record<string, number[]>) {
    const at = performance.now()
    started ??= at
    ended = at
    for (const [name, pids] of Object.entries(groups)) {
      const byPid = samples.get(name) ?? new Map<number, Sample[]>()
      samples.set(name, byPid)
      let rss = 0
      for (const pid of pids) {
        const stat = readStat(pid)
        if (stat === null) continue
        rss += stat.rssBytes
        const series = byPid.get(pid) ?? []
        series.push({ at, cpuTicks: stat.cpuTicks, rssBytes: stat.rssBytes })
        byPid.set(pid, series)
      }
      totals.set(name, [...(totals.get(name) ?? []), rss])
    }
  }

  function figures(): Record<string, ProcessFigures> {
    const seconds = started === undefined || ended === undefined ? 0 : (ended - started) / 1000
    const result: Record<string, ProcessFigures> = {}
    for (const [name, byPid] of samples) {
      let ticks = 0
      for (const series of byPid.values()) ticks += series.at(-1)!.cpuTicks - series[0]!.cpuTicks
      const rss = (totals.get(name) ?? []).filter((value) => value > 0)
      const cpuSeconds = ticks / CLOCK_TICKS_PER_SECOND
      result[name] = {
        pids: [...byPid.keys()],
        cpuPercent: seconds > 0 ? (100 * cpuSeconds) / seconds : 0,
        cpuSeconds,
        rssMeanMiB: rss.length === 0 ? 0 : rss.reduce((sum, value) => sum + value, 0) / rss.length / MIB,
        rssMaxMiB: rss.length === 0 ? 0 : Math.max(...rss) / MIB,
      }
    }
    return result
  }

  return { sample, figures }
}
