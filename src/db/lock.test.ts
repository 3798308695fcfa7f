import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, expect, test } from 'vitest'
import { createDb } from './index.js'
import { DatabaseInUseError, DIRECTORY_LOCK_FILE, directoryHolder, lockDirectory } from './lock.js'

let directory: string

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), 'flashgate-lock-'))
})

afterEach(() => {
  rmSync(directory, { recursive: true, force: true })
})

/** The pid of a process that has exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '0']).pid!
}

test('a directory lock is refused while held, names its holder, and is free again once released', () => {
  const lock = lockDirectory(directory, 'serve')
  const holder = JSON.parse(readFileSync(join(directory, DIRECTORY_LOCK_FILE), 'utf8'))
  expect(holder).toMatchObject({ pid: process.pid, command: 'serve' })
  expect(() => lockDirectory(directory)).toThrow(DatabaseInUseError)
  expect(directoryHolder(directory)).toMatchObject({ pid: process.pid })
  lock.release()
  expect(existsSync(join(directory, DIRECTORY_LOCK_FILE))).toBe(false)
  expect(directoryHolder(directory)).toBeNull()
  lockDirectory(directory).release()
})

test('a lock left by a live process is refused with one line naming its pid', () => {
  // The parent of this process is alive and is not this process.
  writeFileSync(join(directory, DIRECTORY_LOCK_FILE), JSON.stringify({ pid: process.ppid, startTicks: null, command: 'dev', startedAt: '' }))
  expect(() => lockDirectory(directory)).toThrow(`is in use by flashgate dev (pid ${process.ppid})`)
  expect(() => lockDirectory(directory)).toThrow(/^[^\n]+$/)
})

test('a lock left by a dead process, or by a reused pid, is taken over', () => {
  const path = join(directory, DIRECTORY_LOCK_FILE)
  writeFileSync(path, JSON.stringify({ pid: deadPid(), startTicks: null, command: 'dev', startedAt: '' }))
  expect(directoryHolder(directory)).toBeNull()
  lockDirectory(directory).release()
  if (existsSync('/proc/self/stat')) {
    // A live pid that started at another time than the holder did: the pid was reused, the holder is gone.
    writeFileSync(path, JSON.stringify({ pid: process.ppid, startTicks: '1', command: 'dev', startedAt: '' }))
    lockDirectory(directory).release()
  }
  writeFileSync(path, 'not a lock')
  lockDirectory(directory).release()
})

test('a lock handed over is adopted by the next open of the directory in this process, and only that one', () => {
  const lock = lockDirectory(directory, 'dev')
  lock.handOver()
  const adopted = lockDirectory(directory)
  expect(() => lockDirectory(directory)).toThrow(DatabaseInUseError)
  adopted.release()
  expect(directoryHolder(directory)).toBeNull()
})

test('createDb refuses a PGlite directory another process holds, and holds its own until closed', async () => {
  const databaseUrl = join(directory, 'pglite')
  const db = await createDb({ databaseUrl })
  await expect(createDb({ databaseUrl })).rejects.toThrow(DatabaseInUseError)
  await db.close()
  expect(directoryHolder(databaseUrl)).toBeNull()
  writeFileSync(join(databaseUrl, DIRECTORY_LOCK_FILE), JSON.stringify({ pid: process.ppid, startTicks: null, command: 'serve', startedAt: '' }))
  await expect(createDb({ databaseUrl })).rejects.toThrow(`in use by flashgate serve (pid ${process.ppid})`)
})

test("a PGlite directory is its owner's alone (PGlite writes its files, API keys among them, readable by everyone)", async () => {
  chmodSync(directory, 0o777)
  const fresh = join(directory, 'created')
  const db = await createDb({ databaseUrl: directory })
  try {
    expect(statSync(directory).mode & 0o777).toBe(0o700)
  } finally {
    await db.close()
  }
  lockDirectory(fresh).release()
  expect(statSync(fresh).mode & 0o777).toBe(0o700)
})
