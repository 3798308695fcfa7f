import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

/**
 * CPU time of the machine's processes, read from /proc (Linux), to say where the cores went during a load
 * run: the load generator, flashgate's processes, Postgres, and the rest (anvil, the bench itself).
 */
export type ProcessTable = Map<number, { parent: number; name: string; seconds: number }>

/** Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`; 100 on every Linux this runs on). */
const TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  } catch {
    return 100
  }
})()

/** Every process's parent, name and CPU seconds so far (user + system); empty where /proc is absent. */
export function readProcesses(): ProcessTable {
  const table: ProcessTable = new Map()
  let entries: string[]
  try {
    entries = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))
  } catch {
    return table
  }
  for (const entry of entries) {
    let stat: string
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
    } catch {
      continue // it exited meanwhile
    }
    // "pid (name) state ppid … utime stime …": the name may hold spaces and parentheses, so split after the last ')'.
    const close = stat.lastIndexOf(')')
    const fields = stat.slice(close + 2).split(' ')
    table.set(Number(entry), {
      parent: Number(fields[1]),
      name: stat.slice(stat.indexOf('(') + 1, close),
      seconds: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND,
    })
  }
  return table
}

/** `root` and every process below it in `table`. */
export function processTree(table: ProcessTable, root: number): Set<number> {
  const tree = new Set([root])
  for (let grew = true; grew; ) {
    grew = false
    for (const [pid, { parent }] of table)
      if (!tree.has(pid) && tree.has(parent)) {
        tree.add(pid)
        grew = true
      }
  }
  return tree
}

/**
 * Cores each group used between two readings `seconds` apart: CPU seconds a process gained, summed over the
 * processes `groupOf` puts in a group (those it puts in none count as `other`), divided by the wall time.
 * A process that ended between the readings is not counted (the load generator measures itself instead).
 */
export function coresUsed(before: ProcessTable, after: ProcessTable, seconds: number, groupOf: (pid: number, name: string) => string | null) {
  const cores: Record<string, number> = {}
  /** What `other` is made of, by process name (`name pid`), the busiest first. */
  const others: Record<string, number> = {}
  for (const [pid, { name, seconds: now }] of after) {
    const gained = now - (before.get(pid)?.seconds ?? 0)
    if (gained <= 0) continue
    const group = groupOf(pid, name)
    cores[group ?? 'other'] = (cores[group ?? 'other'] ?? 0) + gained / seconds
    if (group === null) others[`${name} ${pid}`] = gained / seconds
  }
  return { cores, others: Object.entries(others).sort(([, a], [, b]) => b - a) }
}
