import { createServer, type AddressInfo, type Socket } from 'node:net'
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { ACME_YAML, freePort, KBIS_BIN, postgresSchema, TEST_KBIS_SETTINGS } from '../helpers/cli-server.js'
import { STORES } from '../helpers/stores.js'
import { templateDataDir } from '../helpers/pglite-template.js'
import { openDb } from '../../src/store/db.js'


interface Run {
  code: number | null
  stdout: string
  stderr: string
}

function kbis(args: string[], env: Record<string, string> = {}, input?: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(KBIS_BIN, args, { env: { ...process.env, DATABASE_URL: '', ...TEST_KBIS_SETTINGS, ...env } })
    if (input !== undefined) child.stdin.end(input)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** Servers still running: a test that fails before it stops its own leaves none behind. */
const running = new Set<ChildProcess>()
afterEach(() => {
  for (const child of running) child.kill('SIGTERM')
})

/** Starts `kbis serve` and resolves once it prints its address (and the key, on a new store). */
function serve(dataDir: string): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(KBIS_BIN, ['serve', '--port', '0', '--data-dir', dataDir], {
      env: { ...process.env, DATABASE_URL: '', LOG_LEVEL: 'warn', ...TEST_KBIS_SETTINGS },
    })
    running.add(child)
    child.once('close', () => running.delete(child))
    let out = ''
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${out}`)), 200_000)
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString()
      const url = /kbis listening on (\S+)/.exec(out)?.[1]
      if (url && (out.includes('Admin API key') || out.split('\n').length > 1)) {
        clearTimeout(timer)
        setTimeout(() => resolve({ child, url, output: () => out }), 200)
      }
    })
    child.stderr.on('data', (d: Buffer) => (out += d.toString()))
  })
}

/**
 * `kbis serve` (or what `start` runs) on a new store in `dataDir` and a free port, its output left
 * to the test: its store, address, process and exit code.
 */
async function serveOnFreePort(dataDir: string, start?: (port: number, data: string) => ChildProcess): Promise<{ data: string; url: string; child: ChildProcess; closed: Promise<number | null> }> {
  const data = await templateDataDir(dataDir)
  const port = await freePort()
  const child = start ? start(port, data) : spawn(KBIS_BIN, ['serve', '--port', String(port), '--data-dir', data], { env: { ...process.env, DATABASE_URL: '', LOG_LEVEL: 'info', ...TEST_KBIS_SETTINGS } })
  running.add(child)
  const closed = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)))
  return { data, url: `http://127.0.0.1:${port}`, child, closed }
}

/**
 * Resolves once the server at `url` answers /readyz with 200 (and `also()` holds): for a server
 * whose output says nothing. Fails, with what it wrote on standard error (`said`), when it exits
 * first or after two minutes.
 */
async function untilReady(url: string, child: ChildProcess, said: () => string, also = () => true): Promise<void> {
  const deadline = Date.now() + 120_000
  while ((await fetch(`${url}/readyz`).then((res) => res.status, () => 0)) !== 200 || !also()) {
    expect(Date.now(), said()).toBeLessThan(deadline)
    expect(child.exitCode, said()).toBeNull()
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.once('close', () => resolve())
    child.kill('SIGTERM')
  })
}

const SETUP = ACME_YAML.replace('RATE', '100000')

describe('kbis CLI on PGlite', { timeout: 420_000 }, () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-cli-'))
    writeFileSync(path.join(dir, 'acme.yaml'), SETUP)
    writeFileSync(path.join(dir, 'bad.yaml'), 'organization: {key: acme, name: Acme}\nmetamodel: {asset_types: [{key: server, properties: [{key: x, type: colour}]}]}\n')
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('serve creates organization default and prints one Admin key once; the key works; a command started meanwhile waits for it', async () => {
    const data = path.join(dir, 'data1')
    const starting = serve(data)
    // A script's `kbis serve & kbis apply …`: the command starts while the new directory is being
    // initialized (the server holds it, its socket is not up yet) and waits for the server.
    while (!existsSync(path.join(data, 'kbis.lock'))) await new Promise((resolve) => setTimeout(resolve, 20))
    const applied = await kbis(['apply', path.join(dir, 'acme.yaml'), '--data-dir', data])
    expect(applied).toMatchObject({ code: 0, stderr: `kbis: ${data} is held by another process of this host (a kbis serve starting, or another command); waiting up to 60 s\n` })
    expect(applied.stdout.split('\n')[0]).toBe('organization acme: created; 5 change(s)')
    const first = await starting
    expect(first.output()).not.toContain('in use')
    const key = /Admin API key \(shown only this once\): (kbis_\S+)/.exec(first.output())?.[1]
    expect(key).toMatch(/^kbis_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/)
    const res = await fetch(`${first.url}/api/v1/metamodel/asset-types`, { headers: { authorization: `Bearer ${key}` } })
    expect(res.status).toBe(200)
    await stop(first.child)
    const second = await serve(data)
    expect(second.output()).not.toContain('Admin API key')
    const again = await fetch(`${second.url}/api/v1/assets`, { headers: { authorization: `Bearer ${key}` } })
    expect(again.status).toBe(200)
    await stop(second.child)
  })

  it('apply is idempotent and keys create prints {id, secret} with --json (store closed)', async () => {
    const data = path.join(dir, 'data2')
    const started = Date.now()
    const applied = await kbis(['apply', path.join(dir, 'acme.yaml'), '--data-dir', data])
    // A new directory is created: the command says so first (stderr: stdout is its answer).
    expect(applied.stderr).toBe(`kbis: creating the PGlite data directory ${data}\n`)
    expect(applied.code).toBe(0)
    expect(applied.stdout.split('\n')[0]).toBe('organization acme: created; 5 change(s)')
    // Unpacked from the build's template (decision 0022): migrated when the build packed it.
    const store = await openDb({ dataDir: data })
    try {
      const { rows } = await store.query<{ last: Date; n: number }>('SELECT max(applied_at) AS last, count(*)::int AS n FROM schema_migrations')
      expect(rows[0]!.n).toBeGreaterThan(10)
      expect(rows[0]!.last.getTime()).toBeLessThan(started)
    } finally {
      await store.close()
    }
    const again = await kbis(['apply', path.join(dir, 'acme.yaml'), '--data-dir', data])
    expect(again).toEqual({ code: 0, stdout: 'organization acme: updated; no changes\n', stderr: '' })
    const key = await kbis(['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', 'sync', '--type', 'Editor', '--roles', 'all', '--json', '--data-dir', data])
    expect(key.code).toBe(0)
    const parsed = JSON.parse(key.stdout) as { id: string; secret: string }
    expect(Object.keys(parsed)).toEqual(['id', 'secret'])
    expect(parsed.secret).toMatch(/^kbis_/)
  })

  it('apply and keys create reach a running server through its socket', async () => {
    // From the migrated template: data1 and data2 are the first starts (initdb) this file checks.
    const data = await templateDataDir(path.join(dir, 'data3'))
    const server = await serve(data)
    const applied = await kbis(['apply', path.join(dir, 'acme.yaml'), '--data-dir', data])
    expect(applied.code).toBe(0)
    const key = await kbis(['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', 'live', '--type', 'Editor', '--roles', 'all', '--json', '--data-dir', data])
    const { secret } = JSON.parse(key.stdout) as { secret: string }
    const created = await fetch(`${server.url}/api/v1/assets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ asset_type_key: 'server', name: 'web-01', properties: { hostname: 'web-01', environment: 'prod' } }),
    })
    expect(created.status).toBe(201)
    await stop(server.child)
  })

  it('applies the shipped examples/acme.yaml cleanly, and warns (exit 0) about a relationship type naming an undefined asset type', async () => {
    const data = await templateDataDir(path.join(dir, 'data5'))
    const example = await kbis(['apply', path.resolve('examples/acme.yaml'), '--data-dir', data])
    expect([example.code, example.stderr]).toEqual([0, ''])
    expect(example.stdout.split('\n')[0]).toBe('organization acme: created; 10 change(s)')
    const partial = path.join(dir, 'partial.yaml')
    writeFileSync(partial, 'organization: {key: partial, name: Partial}\nmetamodel:\n  asset_types: [{key: server, name: Server}]\n'
      + '  relationship_types: [{key: runs_on, name: Runs on, source_asset_type_keys: [application], target_asset_type_keys: [server]}]\n')
    const warned = await kbis(['apply', partial, '--data-dir', data])
    expect(warned.code).toBe(0)
    expect(warned.stderr).toBe(`kbis: warning: ${partial}: metamodel.relationship_types[0].source_asset_type_keys[0]: asset type application is not defined; no asset can be the source of a runs_on relationship until it is\n`)
  })

  it('prints its version (package.json\'s) with --version or -V, and nothing else', async () => {
    const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version
    expect(version).toMatch(/^\d+\.\d+\.\d+/)
    for (const flag of ['--version', '-V']) expect(await kbis([flag]), flag).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' })
  })

  it('prints one-line errors naming the file and the field, with exit code 1', async () => {
    const bad = await kbis(['apply', path.join(dir, 'bad.yaml'), '--data-dir', path.join(dir, 'data4')])
    expect(bad.code).toBe(1)
    expect(bad.stderr.trim().split('\n')).toHaveLength(1)
    expect(bad.stderr).toContain('bad.yaml: metamodel.asset_types[0].properties[0].type: must be one of')
    const missing = await kbis(['apply', path.join(dir, 'nope.yaml'), '--data-dir', path.join(dir, 'data4')])
    expect(missing.code).toBe(1)
    expect(missing.stderr.trim().split('\n')).toHaveLength(1)
    const type = await kbis(['keys', 'create', '--org', 'acme', '--user', 'x@y', '--name', 'n', '--type', 'Root', '--roles', 'all', '--data-dir', path.join(dir, 'data4')])
    expect(type.code).toBe(1)
    expect(type.stderr).toBe('kbis: --type: must be one of Viewer, Editor, Admin, got "Root"\n')
    // A role named twice: POST /api-keys refuses it (422), so the CLI stores no such key.
    const twice = await kbis(['keys', 'create', '--org', 'acme', '--user', 'x@y', '--name', 'n', '--type', 'Editor', '--roles', 'all,it,all', '--data-dir', path.join(dir, 'data4')])
    expect(twice).toEqual({ code: 1, stdout: '', stderr: 'kbis: --roles: names the role all twice\n' })
    const revoke = await kbis(['keys', 'revoke', 'web-01', '--org', 'acme', '--data-dir', path.join(dir, 'data4')])
    expect(revoke).toEqual({ code: 1, stdout: '', stderr: 'kbis: <key>: give the key\'s id or the start of its token (kbis_ and 12 hex digits), not "web-01"\n' })
    // Each was refused before the store was opened: no data directory was created for it.
    expect(existsSync(path.join(dir, 'data4'))).toBe(false)
  })

  it('names a data directory that cannot be created, and does not create one for a command that only reads or changes keys and users', async () => {
    // /proc refuses new directories (ENOENT although /proc exists). The look-up of a running
    // server's socket must not try to create it first and fail with a bare mkdir message.
    const reason = "kbis: could not initialize the PGlite data directory /proc/kbis: ENOENT: no such file or directory, mkdir '/proc/kbis'\n"
    expect(await kbis(['apply', path.resolve('examples/acme.yaml'), '--data-dir', '/proc/kbis'])).toEqual({ code: 1, stdout: '', stderr: reason })
    // keys and users name an organization, which a new store does not hold: no directory is made
    // (a command run from the wrong working directory would leave a new ./data there).
    const none = (dir: string) => ({ code: 1, stdout: '', stderr: `kbis: no data directory ${dir} (kbis serve or kbis apply creates one; --data-dir or KBIS_DATA_DIR names another)\n` })
    expect(await kbis(['keys', 'list', '--org', 'acme', '--data-dir', '/proc/kbis'])).toEqual(none('/proc/kbis'))
    const missing = path.join(dir, 'not-yet')
    expect(await kbis(['keys', 'create', '--org', 'acme', '--user', 'x@y', '--name', 'n', '--type', 'Admin', '--roles', 'all', '--data-dir', missing])).toEqual(none(missing))
    expect(await kbis(['keys', 'revoke', 'kbis_0123456789ab', '--org', 'acme'], { KBIS_DATA_DIR: missing })).toEqual(none(missing))
    expect(existsSync(missing)).toBe(false)
  })

  it('sets no store up in a directory that holds none: keys and users refuse one, and nothing unpacks a store among files of its own', async () => {
    const empty = path.join(dir, 'empty-dir')
    const foreign = path.join(dir, 'foreign-dir')
    mkdirSync(empty)
    mkdirSync(path.join(foreign, 'base'), { recursive: true })
    writeFileSync(path.join(foreign, 'notes.txt'), 'mine')
    writeFileSync(path.join(foreign, 'base', 'mine.txt'), 'mine too')
    const noStore = (d: string) => ({ code: 1, stdout: '', stderr: `kbis: ${d} holds no kbis store (no PG_VERSION; kbis serve or kbis apply creates one, --data-dir or KBIS_DATA_DIR names another); nothing was written\n` })
    for (const d of [empty, foreign]) {
      expect(await kbis(['keys', 'list', '--org', 'acme', '--data-dir', d])).toEqual(noStore(d))
      expect(await kbis(['users', 'set-password', '--org', 'acme', '--email', 'x@y', '--data-dir', d], {}, 'a long passphrase')).toEqual(noStore(d))
    }
    const refused = { code: 1, stdout: '', stderr: `kbis: the PGlite data directory ${foreign} holds files of its own (notes.txt) and no kbis store (no PG_VERSION): name a new or empty directory; nothing was written\n` }
    expect(await kbis(['apply', path.resolve('examples/acme.yaml'), '--data-dir', foreign])).toEqual(refused)
    expect(await kbis(['serve', '--port', String(await freePort()), '--data-dir', foreign])).toEqual(refused)
    expect([readdirSync(empty), readdirSync(foreign).sort(), readdirSync(path.join(foreign, 'base'))]).toEqual([[], ['base', 'notes.txt'], ['mine.txt']])
    // An empty directory is a new store's, as initdb takes one.
    const set = await kbis(['apply', path.resolve('examples/acme.yaml'), '--data-dir', empty])
    expect([set.code, existsSync(path.join(empty, 'PG_VERSION'))]).toEqual([0, true])
  })

  it.runIf(STORES.includes('postgres'))('gives a PostgreSQL database without a kbis store no tables for a command that only reads or changes keys and users', async () => {
    const pg = await postgresSchema()
    try {
      const target = `${new URL(process.env.TEST_DATABASE_URL!).host}${new URL(process.env.TEST_DATABASE_URL!).pathname}`
      const refused = { code: 1, stdout: '', stderr: `kbis: PostgreSQL at ${target} (DATABASE_URL) holds no kbis store (kbis serve or kbis apply sets one up); nothing was written\n` }
      const env = { DATABASE_URL: pg.url }
      expect(await kbis(['keys', 'list', '--org', 'acme'], env)).toEqual(refused)
      expect(await kbis(['keys', 'create', '--org', 'acme', '--user', 'x@y', '--name', 'n', '--type', 'Admin', '--roles', 'all'], env)).toEqual(refused)
      expect(await kbis(['keys', 'revoke', 'kbis_0123456789ab', '--org', 'acme'], env)).toEqual(refused)
      const db = await openDb({ databaseUrl: process.env.TEST_DATABASE_URL!, poolSize: 1 })
      try {
        const tables = () => db.query<{ n: number }>('SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1', [pg.schema])
        expect((await tables()).rows[0]!.n).toBe(0)
        // apply sets a store up; the commands then find it.
        writeFileSync(path.join(dir, 'pg-acme.yaml'), ACME_YAML.replace('RATE', '1000'))
        const migrations = readdirSync('src/store/migrations').filter((f) => f.endsWith('.sql')).sort()
        const set = await kbis(['apply', path.join(dir, 'pg-acme.yaml')], env)
        expect([set.code, set.stderr]).toEqual([0, `kbis: applied ${migrations.length} schema migrations (${migrations[0]} … ${migrations.at(-1)})\n`])
        expect((await tables()).rows[0]!.n).toBeGreaterThan(10)
        const listed = await kbis(['keys', 'list', '--org', 'acme'], env)
        expect([listed.code, listed.stderr]).toEqual([0, ''])
        // A store an older version left (here without 0021, which drops and makes its index again):
        // any command migrates it, as kbis serve does, and says so on stderr.
        await db.query(`DELETE FROM ${pg.schema}.schema_migrations WHERE version = '0021_webhook_fair_claims.sql'`)
        const upgraded = await kbis(['keys', 'list', '--org', 'acme', '--json'], env)
        expect([upgraded.code, upgraded.stderr]).toEqual([0, 'kbis: applied 1 schema migration (0021_webhook_fair_claims.sql)\n'])
        const after = await kbis(['keys', 'list', '--org', 'acme', '--json'], env)
        expect([after.code, after.stderr, after.stdout]).toEqual([0, '', upgraded.stdout])
      } finally {
        await db.close()
      }
    } finally {
      await pg.drop()
    }
  })

  it('says which PostgreSQL it cannot use, without the credentials, and refuses a DATABASE_URL that is not a PostgreSQL URL', async () => {
    const port = await freePort()
    const unreachable = await kbis(['keys', 'list', '--org', 'acme'], { DATABASE_URL: `postgres://kbis:hunter2@127.0.0.1:${port}/inventory` })
    expect(unreachable).toEqual({ code: 1, stdout: '', stderr: `kbis: cannot use PostgreSQL at 127.0.0.1:${port}/inventory (DATABASE_URL): connect ECONNREFUSED 127.0.0.1:${port}\n` })
    // A listener that ends every connection once it has read the first bytes: pg's error has no code, the target is named all the same.
    const closer = createServer((socket) => socket.once('data', () => socket.end()))
    await new Promise<void>((resolve) => closer.listen(0, '127.0.0.1', resolve))
    try {
      const closing = (closer.address() as AddressInfo).port
      const broken = await kbis(['keys', 'list', '--org', 'acme'], { DATABASE_URL: `postgres://kbis:hunter2@127.0.0.1:${closing}/inventory` })
      expect(broken).toEqual({ code: 1, stdout: '', stderr: `kbis: cannot use PostgreSQL at 127.0.0.1:${closing}/inventory (DATABASE_URL): Connection terminated unexpectedly\n` })
    } finally {
      closer.close()
    }
    // A listener that takes the connection and never answers: without a timeout the start waited for good.
    const held: Socket[] = []
    const silent = createServer((socket) => void held.push(socket))
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    try {
      const mute = (silent.address() as AddressInfo).port
      const waited = await kbis(['keys', 'list', '--org', 'acme'], { DATABASE_URL: `postgres://kbis:hunter2@127.0.0.1:${mute}/inventory`, KBIS_CONNECT_TIMEOUT_MS: '500' })
      expect(waited).toEqual({ code: 1, stdout: '', stderr: `kbis: cannot use PostgreSQL at 127.0.0.1:${mute}/inventory (DATABASE_URL): no answer within 0.5 s (KBIS_CONNECT_TIMEOUT_MS)\n` })
    } finally {
      for (const socket of held) socket.destroy()
      silent.close()
    }
    // A listener that answers PostgreSQL's SSL request with "no SSL" ('N'): pg's error has no code.
    const plain = createServer((socket) => socket.once('data', () => socket.write('N')))
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve))
    try {
      const noSsl = (plain.address() as AddressInfo).port
      const refused = await kbis(['keys', 'list', '--org', 'acme'], { DATABASE_URL: `postgres://kbis:hunter2@127.0.0.1:${noSsl}/inventory?sslmode=verify-full` })
      expect(refused).toEqual({ code: 1, stdout: '', stderr: `kbis: cannot use PostgreSQL at 127.0.0.1:${noSsl}/inventory (DATABASE_URL): The server does not support SSL connections\n` })
      // sslmode=require: node-postgres's notice that it verifies the certificate, as one line (it was ten).
      const required = await kbis(['keys', 'list', '--org', 'acme'], { DATABASE_URL: `postgres://kbis:hunter2@127.0.0.1:${noSsl}/inventory?sslmode=require` })
      expect(required).toEqual({ code: 1, stdout: '', stderr: 'kbis: warning: SECURITY WARNING: The SSL modes \'prefer\', \'require\', and \'verify-ca\' are treated as aliases for \'verify-full\'.\n'
        + `kbis: cannot use PostgreSQL at 127.0.0.1:${noSsl}/inventory (DATABASE_URL): The server does not support SSL connections\n` })
    } finally {
      plain.close()
    }
    // pg reads an sslmode it does not know as "SSL on": a typo is refused before any connection.
    const mode = await kbis(['serve', '--port', '0', '--data-dir', path.join(dir, 'never-created')], { DATABASE_URL: 'postgres://kbis:hunter2@127.0.0.1:1/inventory?sslmode=requre' })
    expect(mode).toEqual({ code: 1, stdout: '', stderr: 'kbis: DATABASE_URL: sslmode must be one of disable, prefer, require, verify-ca, verify-full, no-verify, got "requre"\n' })
    expect(existsSync(path.join(dir, 'never-created'))).toBe(false)
    const typo = await kbis(['serve', '--port', '0'], { DATABASE_URL: 'postgress//kbis:hunter2@db/inventory' })
    expect(typo).toEqual({ code: 1, stdout: '', stderr: 'kbis: DATABASE_URL: must be a PostgreSQL URL such as postgres://user:password@host:5432/database (the value set is not a URL)\n' })
  })

  it.runIf(STORES.includes('postgres'))('says that the search_path of DATABASE_URL names no schema that exists', async () => {
    const url = new URL(process.env.TEST_DATABASE_URL!)
    url.searchParams.set('options', '-csearch_path=kbis_no_such_schema')
    const target = `${url.host}${url.pathname}`
    const yaml = path.join(dir, 'no-schema.yaml')
    writeFileSync(yaml, ACME_YAML.replace('RATE', '100'))
    const run = await kbis(['apply', yaml], { DATABASE_URL: url.toString() })
    expect(run).toEqual({ code: 1, stdout: '', stderr: `kbis: cannot use PostgreSQL at ${target} (DATABASE_URL): no schema has been selected to create in `
      + '(the search_path of DATABASE_URL names no schema that exists: create it first, or leave search_path out)\n' })
  })

  it('refuses a port that is not plain decimal digits 0..65535, a host that is no address nor host name, and a Redis URL that is not one, with one line and before anything is created', async () => {
    const data = path.join(dir, 'never-created')
    // The flags' errors are commander's, one line as every error.
    const flagError = ({ code, stdout, stderr }: Run) => ({ code, stdout, stderr })
    for (const bad of ['', ' ', '1e3', '0x4000', '65536']) {
      const refused = await kbis(['serve', '--port', bad, '--data-dir', data])
      expect(flagError(refused), bad).toEqual({ code: 1, stdout: '', stderr: `kbis: option '--port <port>' argument '${bad}' is invalid. must be a port number 0..65535\n` })
    }
    const metrics = await kbis(['serve', '--port', '0', '--metrics-port', '0x4AFE', '--data-dir', data])
    expect(flagError(metrics)).toEqual({ code: 1, stdout: '', stderr: "kbis: option '--metrics-port <port>' argument '0x4AFE' is invalid. must be a port number 0..65535\n" })
    expect(flagError(await kbis(['serve', '--bogus', '--data-dir', data]))).toEqual({ code: 1, stdout: '', stderr: "kbis: unknown option '--bogus'\n" })
    const env = await kbis(['serve', '--data-dir', data], { PORT: '0x4AFE' })
    expect(env).toEqual({ code: 1, stdout: '', stderr: 'kbis: PORT: must be an integer from 0 to 65535, got "0x4AFE"\n' })
    const host = await kbis(['serve', '--port', '0', '--host', 'not_a_host', '--data-dir', data])
    expect(flagError(host)).toEqual({ code: 1, stdout: '', stderr: "kbis: option '--host <host>' argument 'not_a_host' is invalid. must be an IP address or a host name (letters, digits, hyphens and dots)\n" })
    expect(await kbis(['serve', '--port', '0', '--data-dir', data], { HOST: 'not_a_host' }))
      .toEqual({ code: 1, stdout: '', stderr: 'kbis: HOST: must be an IP address or a host name (letters, digits, hyphens and dots), got "not_a_host"\n' })
    const redis = await kbis(['serve', '--port', '0', '--data-dir', data], { REDIS_URL: 'redis://:hunter2@127.0.0.1:6379/abc' })
    expect(redis).toEqual({ code: 1, stdout: '', stderr: 'kbis: REDIS_URL: must be a Redis URL such as redis://:password@host:6379/0: the path is a database number\n' })
    expect(existsSync(data)).toBe(false)
  })

  it('stops quietly when its standard output is closed (kbis apply … | head -1), its work done', async () => {
    const data = await templateDataDir(path.join(dir, 'data6'))
    const child = spawn(KBIS_BIN, ['apply', path.join(dir, 'acme.yaml'), '--data-dir', data], { env: { ...process.env, DATABASE_URL: '' } })
    // Closed before the command writes anything: its first line meets a closed pipe (EPIPE).
    child.stdout.destroy()
    let stderr = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' })
    expect((await kbis(['apply', path.join(dir, 'acme.yaml'), '--data-dir', data])).stdout).toBe('organization acme: updated; no changes\n')
  })

  it('serves on when its standard output is closed (kbis serve | head -1), saying so on standard error with how to make the Admin key it could not show', async () => {
    const { data, url, child, closed } = await serveOnFreePort(path.join(dir, 'data7'))
    // Closed before the server writes anything: its first line meets a closed pipe (EPIPE).
    child.stdout!.destroy()
    let stderr = ''
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
    await untilReady(url, child, () => stderr, () => stderr.includes('serving on'))
    expect(stderr.split('\n').filter(Boolean).sort()).toEqual([
      'kbis: standard output: write EPIPE; serving on without it (what kbis prints there, its log included, is lost)',
      'kbis: the Admin key could not be written to standard output; make another with `kbis keys create --org default --user owner@default.local --name admin --type Admin --roles all` (same --data-dir or DATABASE_URL)',
    ])
    // The command it names, run as it says while the server runs, makes a key that works; the
    // server serves requests (whose log lines meet the closed output) as before.
    const made = await kbis(['keys', 'create', '--org', 'default', '--user', 'owner@default.local', '--name', 'admin', '--type', 'Admin', '--roles', 'all', '--json', '--data-dir', data])
    const { secret } = JSON.parse(made.stdout) as { secret: string }
    for (let i = 0; i < 3; i++) {
      expect((await fetch(`${url}/api/v1/metamodel/asset-types`, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(200)
    }
    child.kill('SIGTERM')
    expect(await closed).toBe(0)
    expect(stderr.split('\n').filter(Boolean)).toHaveLength(2)
  })

  it('says on standard error how to make the Admin key a first start with standard output closed (kbis serve >&-) could not show, and not with it sent to /dev/null', async () => {
    for (const [redirect, told] of [['>&-', true], ['>/dev/null', false]] as const) {
      const { url, child, closed } = await serveOnFreePort(path.join(dir, `data-${told ? 'closed' : 'null'}`), (port, data) =>
        spawn('sh', ['-c', `exec "$0" serve --port ${port} --data-dir "$1" ${redirect}`, KBIS_BIN, data], { env: { ...process.env, DATABASE_URL: '', ...TEST_KBIS_SETTINGS } }))
      let stderr = ''
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
      await untilReady(url, child, () => stderr)
      // The line comes once the key's line was written (to the /dev/null Node put in its place).
      await new Promise((resolve) => setTimeout(resolve, 500))
      child.kill('SIGTERM')
      expect(await closed).toBe(0)
      expect({ redirect, stderr }).toEqual({ redirect, stderr: told
        ? 'kbis: the Admin key could not be written to standard output; make another with `kbis keys create --org default --user owner@default.local --name admin --type Admin --roles all` (same --data-dir or DATABASE_URL)\n'
        : '' })
    }
  })

  it('serves on when standard error is closed with standard output (kbis serve 2>&1 | head -1)', async () => {
    const { data, url, child, closed } = await serveOnFreePort(path.join(dir, 'data8'))
    child.stdout!.destroy()
    child.stderr!.destroy()
    await untilReady(url, child, () => '')
    const made = await kbis(['keys', 'create', '--org', 'default', '--user', 'owner@default.local', '--name', 'admin', '--type', 'Admin', '--roles', 'all', '--json', '--data-dir', data])
    const { secret } = JSON.parse(made.stdout) as { secret: string }
    expect((await fetch(`${url}/api/v1/metamodel/asset-types`, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(200)
    child.kill('SIGTERM')
    expect(await closed).toBe(0)
  })
})
