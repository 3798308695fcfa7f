import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'

/**
 * PGlite is single-process: two processes on one data directory corrupt it. The process that opens a
 * directory writes this file into it (pid and start time) and removes it when it closes; a lock left by a
 * process that is gone is taken over.
 */
export const DIRECTORY_LOCK_FILE = 'flashgate.lock'
/** A lock file found empty may be one being written: read it again this long before calling it stale. */
const LOCK_WRITE_GRACE_MS = 200

export type LockHolder = {
  pid: number
  /** The process's start time in clock ticks since boot (Linux `/proc/<pid>/stat`), so a reused pid is not taken for the holder. */
  startTicks: string | null
  /** What the holder runs (`dev`, `serve`, …), for the message to whoever finds the directory taken. */
  command: string
  startedAt: string
}

export type DirectoryLock = {
  directory: string
  /** Removes the lock file (once; later calls do nothing). */
  release(): void
  /**
   * Leaves the lock held for the next `lockDirectory` of this directory in this process (`flashgate dev`
   * holds the directory while it wipes it, then the gateway opens it).
   */
  handOver(): void
}

/** The directory cannot be made (a path under `/proc`, a read-only filesystem, a file in the way): a bad `--database-url`. */
export class DatabaseDirectoryError extends Error {
  override readonly name = 'DatabaseDirectoryError'
  constructor(
    readonly directory: string,
    reason: string,
  ) {
    super(`cannot create the PGlite directory ${directory} (${reason}); give --database-url a directory that can be created`)
  }
}

/**
 * Creates `absolute` and its missing parents one by one. Node 20's `mkdirSync(…, { recursive: true })` never
 * returns for a path under `/proc` (it retries the ENOENT it gets there forever); this fails at once instead.
 */
function makeDirectory(absolute: string) {
  const missing: string[] = []
  for (let current = absolute; !existsSync(current); current = dirname(current)) {
    missing.push(current)
    if (dirname(current) === current) break
  }
  for (const directory of missing.reverse()) {
    try {
      mkdirSync(directory)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new DatabaseDirectoryError(absolute, (error as Error).message)
    }
  }
  if (!statSync(absolute).isDirectory()) throw new DatabaseDirectoryError(absolute, 'a file of that name is in the way')
}

/** The directory is held by another live process (or already opened in this one). */
export class DatabaseInUseError extends Error {
  override readonly name = 'DatabaseInUseError'
  constructor(
    readonly directory: string,
    readonly holder: LockHolder,
  ) {
    super(
      holder.pid === process.pid
        ? `the PGlite database ${directory} is already open in this process`
        : `the PGlite database ${directory} is in use by flashgate ${holder.command} (pid ${holder.pid}); PGlite allows one process: stop that one or choose another --database-url`,
    )
  }
}

type HeldLock = { handedOver: boolean; release(): void }

/**
 * Locks of this process by directory; `handedOver` ones wait for the next `lockDirectory` to adopt them.
 * One registry per process, even when this module is loaded more than once (test runners), and the locks
 * are released on the way out, even by `process.exit`.
 */
const heldLocks: Map<string, HeldLock> = ((globalThis as Record<symbol, unknown>)[Symbol.for('flashgate.heldLocks')] ??= (() => {
  const locks = new Map<string, HeldLock>()
  process.once('exit', () => {
    for (const lock of locks.values()) lock.release()
  })
  return locks
})()) as Map<string, HeldLock>

/** Start time of a process in clock ticks since boot, or `null` where `/proc` does not say. */
function startTicksOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Field 22; the command name (field 2) is in parentheses and may hold spaces, so count after its ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
  } catch {
    return null
  }
}

function isAlive(holder: LockHolder): boolean {
  try {
    process.kill(holder.pid, 0)
  } catch (error) {
    // EPERM: it exists, under another user.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false
  }
  const ticks = holder.startTicks === null ? null : startTicksOf(holder.pid)
  return ticks === null || ticks === holder.startTicks
}

function readHolder(path: string): LockHolder | null {
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockHolder>
    if (typeof parsed.pid !== 'number' || !Number.isInteger(parsed.pid) || parsed.pid <= 0) return null
    return { pid: parsed.pid, startTicks: parsed.startTicks ?? null, command: parsed.command ?? 'process', startedAt: parsed.startedAt ?? '' }
  } catch {
    return null
  }
}

function sleepSync(ms: number) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/** Who holds the directory: a live process other than this one, or `null` when nobody (or a dead one) does. */
export function directoryHolder(directory: string): LockHolder | null {
  const holder = readHolder(join(resolve(directory), DIRECTORY_LOCK_FILE))
  return holder !== null && isAlive(holder) ? holder : null
}

/** Takes the directory's lock, creating the directory; throws `DatabaseInUseError` when a live process holds it. */
export function lockDirectory(directory: string, command = process.argv[2] ?? 'process'): DirectoryLock {
  const absolute = resolve(directory)
  const path = join(absolute, DIRECTORY_LOCK_FILE)
  const own = heldLocks.get(absolute)
  if (own !== undefined) {
    if (!own.handedOver) throw new DatabaseInUseError(directory, { pid: process.pid, startTicks: null, command, startedAt: '' })
    own.handedOver = false
    return handle(absolute, own)
  }
  makeDirectory(absolute)
  // The database's files (API keys among them) are its owner's alone, as Postgres requires of a data directory:
  // PGlite writes them readable and writable by everyone, so the directory is what keeps others out.
  chmodSync(absolute, 0o700)
  const self: LockHolder = { pid: process.pid, startTicks: startTicksOf(process.pid), command, startedAt: new Date().toISOString() }
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(path, `${JSON.stringify(self)}\n`, { flag: 'wx' })
      break
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw error
    }
    let holder = readHolder(path)
    if (holder === null) {
      sleepSync(LOCK_WRITE_GRACE_MS)
      holder = readHolder(path)
    }
    if (holder !== null && isAlive(holder)) throw new DatabaseInUseError(directory, holder)
    // A stale lock: moved aside (atomic, so of two processes taking it over only one moves it), then checked
    // again in case what was moved is a lock another process has just written; that one is put back.
    const aside = `${path}.stale-${process.pid}`
    try {
      renameSync(path, aside)
    } catch {
      continue
    }
    const moved = readHolder(aside)
    if (moved !== null && isAlive(moved)) {
      renameSync(aside, path)
      throw new DatabaseInUseError(directory, moved)
    }
    unlinkSync(aside)
  }
  let released = false
  const entry = {
    handedOver: false,
    release() {
      if (released) return
      released = true
      heldLocks.delete(absolute)
      // Only our own lock is removed: a directory wiped and locked by someone else keeps theirs.
      if (readHolder(path)?.pid === process.pid) unlinkSync(path)
    },
  }
  heldLocks.set(absolute, entry)
  return handle(absolute, entry)
}

function handle(absolute: string, entry: HeldLock): DirectoryLock {
  return {
    directory: absolute,
    release: () => {
      if (heldLocks.get(absolute) === entry && !entry.handedOver) entry.release()
    },
    handOver: () => {
      entry.handedOver = true
    },
  }
}
