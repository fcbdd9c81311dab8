import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { cli, cliRun, cliStore, runCli } from '../helpers/cli-server.js'

/** `kbis serve` on `dataDir` until the test ends; its base URL. */
async function serve(dataDir: string): Promise<{ url: string; stop(): Promise<number | null> }> {
  const server = runCli(['serve', '--port', '0', '--data-dir', dataDir])
  onTestFinished(() => void (server.child.exitCode === null && server.child.kill('SIGKILL')))
  const url = (await server.waitFor(/kbis listening on (\S+)/, 200_000))[1]!
  return { url, stop: () => { server.child.kill('SIGTERM'); return server.exited } }
}

/** Extracts an archive into a new directory, as docs/deployment.md tells operators to. */
function restore(archive: string, into: string): string {
  mkdirSync(into)
  execFileSync('tar', ['-xf', archive, '-C', into])
  return into
}

describe('kbis backup (PGlite)', { timeout: 600_000 }, () => {
  let store: Awaited<ReturnType<typeof cliStore>>
  let dataDir: string
  let secret: string
  beforeAll(async () => {
    store = await cliStore('pglite')
    dataDir = store.env.KBIS_DATA_DIR!
    await cli(['apply', store.yaml], store.env)
    secret = (JSON.parse((await cli(['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', 'backup', '--type', 'Editor', '--roles', 'all', '--json'], store.env)).at(-1)!) as { secret: string }).secret
  })
  afterAll(async () => store.drop())

  const api = async (url: string, method: string, route: string, body?: unknown) => {
    const res = await fetch(`${url}/api/v1${route}`, {
      method, headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    })
    return { status: res.status, body: await res.json() as { data: { name: string }[]; meta: { page: { total_items: number } } } }
  }
  const servers = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ asset_type_key: 'server', name: `${prefix}-${i}`, properties: { hostname: `${prefix}-${i}` } }))
  const names = async (url: string) => (await api(url, 'GET', '/assets?sort=name&page[size]=100')).body.data.map((a) => a.name)

  it('copies the directory while the server runs and writes; the copy opens with what was committed before it, each bulk whole or absent', async () => {
    const server = await serve(dataDir)
    expect((await api(server.url, 'POST', '/bulk/assets', servers('before', 3))).status).toBe(201)
    // A bulk in flight when the copy is asked for: in the copy whole (its transaction ends before the
    // checkpoint runs), or not at all, never in part.
    const bulk = api(server.url, 'POST', '/bulk/assets', servers('during', 2000))
    const archive = path.join(store.dir, 'running.tar.gz')
    const backup = await cliRun(['backup', archive, '--data-dir', dataDir], {})
    expect(backup.code).toBe(0)
    expect(backup.lines[0]).toMatch(new RegExp(`^backup of ${dataDir} written to ${archive} \\(\\d+ bytes, \\d+\\.\\d s\\)$`))
    expect((await bulk).status).toBe(201)
    // An archive that cannot be written is said by the server as by the CLI (below), not as a fault.
    expect(await cliRun(['backup', '/proc/kbis-backup.tar', '--data-dir', dataDir], {}))
      .toEqual({ code: 1, lines: ['kbis: cannot write /proc/kbis-backup.tar: ENOENT: no such file or directory'] })
    // The server goes on serving and writing after the copy.
    expect((await api(server.url, 'POST', '/bulk/assets', servers('after', 2))).status).toBe(201)
    expect((await api(server.url, 'GET', '/assets?page[size]=1&page[count]=exact')).body.meta.page.total_items).toBe(2005)
    expect(await server.stop()).toBe(0)

    const listing = execFileSync('tar', ['-tzf', archive], { encoding: 'utf8' }).split('\n')
    expect(listing).toContain('./PG_VERSION')
    expect(listing.filter((f) => f.includes('postmaster') || f.includes('kbis.lock'))).toEqual([])
    const copy = await serve(restore(archive, path.join(store.dir, 'restored-running')))
    const total = (await api(copy.url, 'GET', '/assets?page[size]=1&page[count]=exact')).body.meta.page.total_items
    expect([3, 2003]).toContain(total)
    expect((await names(copy.url)).filter((n) => !n.startsWith('during-'))).toEqual(['before-0', 'before-1', 'before-2'])
    expect(await copy.stop()).toBe(0)
  })

  it('copies the directory as it is with no server on it; the copy holds the organization, its keys and its assets', async () => {
    const archive = path.join(store.dir, 'closed.tar')
    expect((await cliRun(['backup', archive, '--data-dir', dataDir], {})).code).toBe(0)
    const copyDir = restore(archive, path.join(store.dir, 'restored-closed'))
    const keys = JSON.parse((await cli(['keys', 'list', '--org', 'acme', '--json', '--data-dir', copyDir])).at(-1)!) as { name: string }[]
    expect(keys.map((k) => k.name)).toEqual(['backup'])
    const copy = await serve(copyDir)
    expect((await api(copy.url, 'GET', '/assets?page[size]=1&page[count]=exact')).body.meta.page.total_items).toBe(2005)
    expect(await copy.stop()).toBe(0)

    // An archive unpacked in part (here: without global/pg_control): one line naming the directory
    // and the likely causes, not the embedded PostgreSQL's "Aborted(). Build with -sASSERTIONS …".
    const partDir = restore(archive, path.join(store.dir, 'restored-in-part'))
    rmSync(path.join(partDir, 'global', 'pg_control'))
    expect(await cliRun(['serve', '--port', '0', '--data-dir', partDir], {})).toEqual({
      code: 1,
      lines: [`kbis: cannot open the PGlite data directory ${partDir} (the embedded PostgreSQL aborted): every file in it must be readable and writable by this user, and a directory restored from a backup unpacked whole (kbis backup)`],
    })
  })

  it('copies a data directory reached through a symbolic link, with and without a server on it: the files, not the link', async () => {
    const link = path.join(store.dir, 'linked-data')
    symlinkSync(dataDir, link)
    const listing = (archive: string) => execFileSync('tar', ['-tf', archive], { encoding: 'utf8' }).split('\n')
    const closed = path.join(store.dir, 'linked-closed.tar')
    expect((await cliRun(['backup', closed, '--data-dir', link], {})).code).toBe(0)
    expect(listing(closed)).toContain('./PG_VERSION')
    const server = await serve(link)
    const running = path.join(store.dir, 'linked-running.tar')
    expect((await cliRun(['backup', running, '--data-dir', link], {})).code).toBe(0)
    expect(listing(running)).toContain('./PG_VERSION')
    expect(await server.stop()).toBe(0)
    const copy = await serve(restore(running, path.join(store.dir, 'restored-linked')))
    expect((await api(copy.url, 'GET', '/assets?page[size]=1&page[count]=exact')).body.meta.page.total_items).toBe(2005)
    expect(await copy.stop()).toBe(0)
  })

  it('refuses an archive inside the data directory or that is a directory, a directory that holds no store and a PostgreSQL store, with one line and exit 1, writing nothing', async () => {
    expect(await cliRun(['backup', path.join(dataDir, 'inside.tar'), '--data-dir', dataDir], {})).toEqual({
      code: 1, lines: [`kbis: ${path.join(dataDir, 'inside.tar')} is inside the data directory ${dataDir}: write the backup somewhere else`],
    })
    expect(existsSync(path.join(dataDir, 'inside.tar'))).toBe(false)
    // Through a symbolic link to the data directory, the archive would still land inside it.
    const link = path.join(store.dir, 'link-to-data')
    symlinkSync(dataDir, link)
    expect(await cliRun(['backup', path.join(link, 'inside.tar'), '--data-dir', dataDir], {})).toEqual({
      code: 1, lines: [`kbis: ${path.join(link, 'inside.tar')} is inside the data directory ${dataDir}: write the backup somewhere else`],
    })
    expect(existsSync(path.join(dataDir, 'inside.tar'))).toBe(false)
    // An archive named by a link (followed, as a shell's > follows it) that leads inside.
    const named = path.join(store.dir, 'named.tar')
    symlinkSync(path.join(dataDir, 'inside.tar'), named)
    expect(await cliRun(['backup', named, '--data-dir', dataDir], {})).toEqual({
      code: 1, lines: [`kbis: ${named} is inside the data directory ${dataDir}: write the backup somewhere else`],
    })
    expect(existsSync(path.join(dataDir, 'inside.tar'))).toBe(false)
    rmSync(named)
    // The name says what the archive is: a tar file, compressed or not.
    expect(await cliRun(['backup', path.join(store.dir, 'b.zip'), '--data-dir', dataDir], {})).toEqual({
      code: 1, lines: [`kbis: ${path.join(store.dir, 'b.zip')}: name the archive .tar, or .tar.gz (.tgz) to compress it`],
    })
    expect(existsSync(path.join(store.dir, 'b.zip'))).toBe(false)
    expect(await cliRun(['backup', path.join(store.dir, 'pg.tar')], { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/none' })).toEqual({
      code: 1, lines: ['kbis: kbis backup copies an embedded (PGlite) data directory; DATABASE_URL is set: back up PostgreSQL with pg_dump or your PostgreSQL backups'],
    })
    const missing = path.join(store.dir, 'no-such-dir', 'b.tar')
    expect(await cliRun(['backup', missing, '--data-dir', dataDir], {})).toEqual({ code: 1, lines: [`kbis: the directory of ${missing} does not exist`] })
    const folder = path.join(store.dir, 'a-folder')
    mkdirSync(folder)
    expect(await cliRun(['backup', folder, '--data-dir', dataDir], {})).toEqual({
      code: 1, lines: [`kbis: ${folder} is a directory: name the archive, e.g. ${path.join(folder, 'kbis-backup.tar.gz')}`],
    })
    expect(readdirSync(folder)).toEqual([])
    expect(await cliRun(['backup', '/proc/kbis-backup.tar', '--data-dir', dataDir], {}))
      .toEqual({ code: 1, lines: ['kbis: cannot write /proc/kbis-backup.tar: ENOENT: no such file or directory'] })
    const nowhere = path.join(store.dir, 'no-store-here')
    expect(await cliRun(['backup', path.join(store.dir, 'none.tar'), '--data-dir', nowhere], {})).toEqual({
      code: 1, lines: [`kbis: ${nowhere} is not a data directory of kbis (it has no PG_VERSION)`],
    })
    expect(existsSync(nowhere)).toBe(false)
    expect(readdirSync(store.dir).filter((f) => f.startsWith('pg.tar') || f.startsWith('none.tar') || f.includes('partial'))).toEqual([])
  })
})
