import { readdirSync } from 'node:fs'
import { CLOCK_TICKS_PER_SECOND, readCommand, readStat } from './follow-processes.js'

/**
 * CPU time of the machine's processes, read from /proc (Linux, as the follow bench reads its own), to say where
 * the cores went during a load run: the load generator, flashgate's processes, Postgres, and the rest.
 */
export type ProcessTable = Map<number, { parent: number; name: string; seconds: number }>

/** Every process's parent, name and CPU seconds so far (user + system); empty where /proc is absent. */
export function readProcesses(): ProcessTable {
  const table: ProcessTable = new Map()
  let entries: string[]
  try {
    entries = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))
  } catch {
    return table
  }
  for (const pid of entries.map(Number)) {
    const stat = readStat(pid)
    if (stat === null) continue // it exited meanwhile
    table.set(pid, { parent: stat.parent, name: readCommand(pid) ?? '', seconds: stat.cpuTicks / CLOCK_TICKS_PER_SECOND })
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
