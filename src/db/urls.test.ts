import { describe, expect, test } from 'vitest'
import { parseConfig, serveConfigSchema } from '../config.js'
import { databaseUrlProblem, maskedDatabaseUrl, postgresConnection } from './urls.js'

describe('postgresConnection: a postgres:// URL read as libpq reads a connection URI', () => {
  test('a TCP URL, with or without settings for the server, goes to postgres.js as it is', () => {
    for (const url of [
      'postgres://user:secret@db.example:5433/flashgate',
      'postgresql://127.0.0.1/flashgate?sslmode=require&application_name=x',
      'postgres://a:5432,b:5433/flashgate',
      'postgres://[::1]:5432/flashgate',
      'postgres:///flashgate',
    ])
      expect(postgresConnection(url)).toEqual({ url, target: {} })
  })

  test('the socket directory as ?host=, with a user and no host before it', () => {
    expect(postgresConnection('postgres://postgres@/flashgate?host=/var/run/postgresql')).toEqual({
      url: 'postgres:///',
      target: { user: 'postgres', host: '/var/run/postgresql', database: 'flashgate' },
    })
    expect(postgresConnection('postgresql://me:p%40ss@/db?host=/tmp&port=5433&sslmode=disable')).toEqual({
      url: 'postgresql:///?sslmode=disable',
      target: { user: 'me', pass: 'p@ss', host: '/tmp', port: 5433, database: 'db' },
    })
  })

  test('the socket directory percent-encoded as the host, with its port', () => {
    expect(postgresConnection('postgresql://postgres@%2Fvar%2Frun%2Fpostgresql:5433/flashgate')).toEqual({
      url: 'postgresql:///',
      target: { user: 'postgres', host: '/var/run/postgresql', port: 5433, database: 'flashgate' },
    })
    expect(postgresConnection('postgres://%2Ftmp/db').target).toEqual({ host: '/tmp', database: 'db' })
  })

  test("libpq's user, password and dbname parameters win over the URL's, and are not sent as settings", () => {
    expect(postgresConnection('postgres://a@db.example/one?user=b&password=c&dbname=two&search_path=x')).toEqual({
      url: 'postgres://db.example/?search_path=x',
      target: { user: 'b', pass: 'c', database: 'two' },
    })
    expect(postgresConnection('postgres://db.example/one?host=other.example').target).toEqual({ host: 'other.example', database: 'one' })
  })
})

describe('the configuration', () => {
  test('takes a socket URL and refuses a port that is not one', () => {
    expect(databaseUrlProblem('postgres://postgres@/db?host=/var/run/postgresql&port=5432')).toBeNull()
    expect(databaseUrlProblem('postgres://postgres@/db?host=/var/run/postgresql&port=http')).toMatch(/port/)
    expect(databaseUrlProblem('postgres://postgres@/db?port=70000')).toMatch(/port/)
    expect(() => parseConfig(serveConfigSchema, { 'database-url': 'postgres://u@/db?port=x', 'upstream-rpc': 'http://127.0.0.1:1' }, {})).toThrow(
      /database-url.*port/s,
    )
  })
})

describe('maskedDatabaseUrl', () => {
  test('hides a password in the user part or as password=, and nothing else', () => {
    expect(maskedDatabaseUrl('postgres://user:s3cret@db.example:5433/flashgate')).toBe('postgres://user:***@db.example:5433/flashgate')
    expect(maskedDatabaseUrl('postgres://user:s3cret@/flashgate?host=/tmp')).toBe('postgres://user:***@/flashgate?host=/tmp')
    expect(maskedDatabaseUrl('postgres://u@db/x?sslmode=require&password=s3cret')).toBe('postgres://u@db/x?sslmode=require&password=***')
    expect(maskedDatabaseUrl('postgres://user@db.example/flashgate')).toBe('postgres://user@db.example/flashgate')
    expect(maskedDatabaseUrl('./.flashgate/pglite')).toBe('./.flashgate/pglite')
  })
})
