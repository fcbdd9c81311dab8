import { execFileSync } from 'node:child_process'
import { userInfo } from 'node:os'
import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig, postgresTarget } from '../../src/core/config.js'

describe('DATABASE_URL and DATABASE_READ_URL', () => {
  it('take the connection strings node-postgres reads', () => {
    for (const url of ['postgres://u:p@db.example:5433/kb', 'postgresql://u@localhost/kb?sslmode=require', 'socket:/var/run/postgresql?db=kb', '/var/run/postgresql kb',
      // libpq's URLs for a Unix socket: its directory in the host parameter, with or without credentials.
      'postgres://kbis@/kb?host=/var/run/postgresql', 'postgresql://kbis:secret@/kb?host=%2Fvar%2Frun%2Fpostgresql', 'postgres:///kb?host=/var/run/postgresql']) {
      expect(loadConfig({ DATABASE_URL: url, DATABASE_READ_URL: url }), url).toMatchObject({ databaseUrl: url, databaseReadUrl: url })
    }
    expect(loadConfig({ DATABASE_URL: '' }).databaseUrl).toBeUndefined()
  })

  it('log in as the operating system\'s user when the URL names none and neither PGUSER nor USER is set, as libpq does', () => {
    // A process of its own: pg reads USER when it is loaded. (Started without USER, as a container or cron starts the service.)
    const { USER: _, PGUSER: __, ...env } = process.env
    const script = "const pg = (await import('pg')).default; await import('./src/store/postgres-db.ts'); console.log(pg.defaults.user)"
    const user = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { env, encoding: 'utf8' }).trim()
    expect(user).toBe(userInfo().username)
  })

  it('refuse anything else, without echoing the value (it may hold a password)', () => {
    const notUrl = 'host=db password=hunter2'
    expect(() => loadConfig({ DATABASE_URL: notUrl })).toThrow(ConfigError)
    expect(() => loadConfig({ DATABASE_URL: notUrl })).toThrow('DATABASE_URL: must be a PostgreSQL URL such as postgres://user:password@host:5432/database (the value set is not a URL)')
    expect(() => loadConfig({ DATABASE_READ_URL: 'mysql://u:hunter2@db/kb' })).toThrow('DATABASE_READ_URL: must be a PostgreSQL URL such as postgres://user:password@host:5432/database, not a mysql:// URL')
    for (const bad of [notUrl, 'mysql://u:hunter2@db/kb']) {
      try {
        loadConfig({ DATABASE_URL: bad })
      } catch (err) {
        expect((err as Error).message).not.toContain('hunter2')
      }
    }
  })

  it('refuse an sslmode node-postgres does not know (it would read it as SSL on), in either URL', () => {
    for (const mode of ['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify']) {
      expect(loadConfig({ DATABASE_URL: `postgres://u@db/kb?sslmode=${mode}` }).databaseUrl, mode).toBe(`postgres://u@db/kb?sslmode=${mode}`)
    }
    expect(() => loadConfig({ DATABASE_URL: 'postgres://u:hunter2@db/kb?sslmode=bogus' }))
      .toThrow(new ConfigError('DATABASE_URL: sslmode must be one of disable, prefer, require, verify-ca, verify-full, no-verify, got "bogus"'))
    expect(() => loadConfig({ DATABASE_URL: 'postgres://u@db/kb', DATABASE_READ_URL: 'postgres://u@replica/kb?sslmode=Require' }))
      .toThrow('DATABASE_READ_URL: sslmode must be one of disable, prefer, require, verify-ca, verify-full, no-verify, got "Require"')
  })

  it('refuses DATABASE_READ_URL without DATABASE_URL with the other settings, before any store is opened', () => {
    expect(() => loadConfig({ DATABASE_READ_URL: 'postgres://127.0.0.1/replica' })).toThrow(ConfigError)
    expect(() => loadConfig({ DATABASE_READ_URL: 'postgres://127.0.0.1/replica' })).toThrow('DATABASE_READ_URL: names a replica of the PostgreSQL primary; set DATABASE_URL too')
    expect(loadConfig({ DATABASE_READ_URL: 'postgres://127.0.0.1/replica', DATABASE_URL: 'postgres://127.0.0.1/primary' }).databaseReadUrl).toBe('postgres://127.0.0.1/replica')
  })

  it('name where a URL points without its credentials', () => {
    expect(postgresTarget('postgres://u:secret@db.example:5433/kb?sslmode=require')).toBe('db.example:5433/kb')
    expect(postgresTarget('postgresql://u@localhost')).toBe('localhost:5432')
    expect(postgresTarget('socket:/var/run/postgresql?db=kb')).toBe('the socket /var/run/postgresql')
    expect(postgresTarget('/var/run/postgresql kb')).toBe('the socket /var/run/postgresql')
    expect(postgresTarget('postgres://kbis:secret@/kb?host=/var/run/postgresql')).toBe('the socket /var/run/postgresql')
    expect(postgresTarget('postgres:///kb?host=%2Ftmp')).toBe('the socket /tmp')
    expect(postgresTarget('postgres://u:secret@db/kb?host=db2')).toBe('db2:5432/kb')
  })
})
