import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startMetricsServer } from '../../src/ops/metrics-server.js'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { KBIS_BIN, runCli, runKbis, type CliRun } from '../helpers/cli-server.js'


type Run = CliRun

/** Runs the CLI to its end; `input`, when given, is its standard input. */
const kbis = (args: string[], env: Record<string, string> = {}, input?: string): Promise<Run> => runKbis(args, { env, input })

/** A bare HTTP server standing in for kbis (an older one, one that fails), for the length of `use`. */
const withStubServer = async (handler: RequestListener, use: (url: string) => Promise<void>) => {
  const stub = createServer(handler)
  stub.listen(0, '127.0.0.1')
  await once(stub, 'listening')
  try {
    await use(`http://127.0.0.1:${(stub.address() as AddressInfo).port}`)
  } finally {
    stub.closeAllConnections()
    stub.close()
  }
}

/** A stub's answer to the asset type read (a GET): `server`, named by its unique key; true when it answered. */
const answeredServerType = (req: IncomingMessage, res: ServerResponse): boolean => {
  if (req.method !== 'GET') return false
  res.writeHead(200, { 'content-type': 'application/json' })
  res.end(JSON.stringify({ data: { key: 'server', unique_property_key: 'hostname', properties: [{ key: 'hostname', type: 'unique_key' }] } }))
  return true
}

/** A stub's answer to a chunk of one row (line 2): created; and what the import then says. */
const answerOneCreated = (res: ServerResponse): void => {
  res.writeHead(201, { 'content-type': 'application/json' })
  res.end(JSON.stringify({ data: [{ id: '01a21f8f-8a31-70d4-8529-9f7dfff8c851', client_ref: '2' }] }))
}
const ONE_CREATED = { code: 0, stdout: '1 row read; 0 refused; 1 created\n', stderr: 'lines 2-2: 1 row, 1 created, 0 updated, 0 unchanged\n' }

for (const store of STORES) {
  describe(`${store}: kbis import / kbis export`, () => {
    let t: TestApp
    let env: Record<string, string>
    let dir: string
    beforeAll(async () => {
      t = await createTestApp(store)
      env = { KBIS_URL: await t.app.listen({ host: '127.0.0.1', port: 0 }), KBIS_API_KEY: t.adminKey }
      dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-sync-'))
    })
    afterAll(async () => {
      rmSync(dir, { recursive: true, force: true })
      await t.close()
    })

    const file = (name: string, text: string) => {
      const p = path.join(dir, name)
      writeFileSync(p, text)
      return p
    }
    const asset = async (ref: string) => (await t.request('GET', `/api/v1/assets/${ref}`)).body.data
    const count = async (pattern: string): Promise<number> =>
      (await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM assets WHERE unique_value LIKE $1 OR name LIKE $1', [pattern])).rows[0]!.n

    it('imports a CSV, converting each cell by its property type (empty = not set)', async () => {
      const csv = file('servers.csv', [
        'name,hostname,environment,cpu_count,memory_gb,tags,managed,purchased_on,access_domain_key,owner',
        'cli-web-01,cli-web-01,prod,8,15.5,pci|gdpr,true,2024-02-29,it,"Ops, ""core"""',
        '"cli-db-01',
        'primary",cli-db-01,,,,,false,,,',
      ].join('\n') + '\n')
      const run = await kbis(['import', csv, '--type', 'server'], env)
      expect(run).toEqual({ code: 0, stdout: '2 rows read; 0 refused; 2 created\n', stderr: 'lines 2-4: 2 rows, 2 created, 0 updated, 0 unchanged\n' })
      expect(await asset('server:hostname:cli-web-01')).toMatchObject({
        name: 'cli-web-01', access_domain_key: 'it',
        properties: { hostname: 'cli-web-01', environment: 'prod', cpu_count: 8, memory_gb: 15.5, tags: ['pci', 'gdpr'], managed: true, purchased_on: '2024-02-29', owner: 'Ops, "core"' },
      })
      const db = await asset('server:hostname:cli-db-01')
      expect(db).toMatchObject({ name: 'cli-db-01\nprimary', access_domain_key: null })
      expect(db.properties).toEqual({ hostname: 'cli-db-01', managed: false })
    })

    it('writes every row the server refuses to --errors (line,field,message), exits 1 and writes nothing of the chunk', async () => {
      const csv = file('bad.csv', [
        'name,hostname,environment,cpu_count',
        'cli-bad-1,cli-bad-1,prod,4',
        'cli-bad-2,cli-bad-2,moon,4',
        'cli-bad-3,cli-bad-3,dev,2',
        'cli-bad-4,,dev,2',
      ].join('\n'))
      const errors = path.join(dir, 'errors.csv')
      const run = await kbis(['import', csv, '--type', 'server', '--errors', errors], env)
      expect(run).toEqual({ code: 1, stdout: '4 rows read; 2 refused; 0 created; 1 chunk(s) failed and wrote nothing\n', stderr: 'lines 2-5: 4 rows, 2 refused, nothing written\n' })
      expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n3,environment,"environment must be one of dev, staging, prod"\n5,hostname,hostname is required for asset type server\n')
      expect(await count('cli-bad-%')).toBe(0)
    })

    it('lists rows outside the key\'s roles (403 per item) in --errors like any refused row, rather than stopping', async () => {
      const csv = file('scoped.csv', ['name,hostname,access_domain_key', 'cli-scope-1,cli-scope-1,it', 'cli-scope-2,cli-scope-2,finance', 'cli-scope-3,cli-scope-3,'].join('\n'))
      const errors = path.join(dir, 'scoped-errors.csv')
      const scoped = { ...env, KBIS_API_KEY: await t.givenKey({ type: 'Editor', roles: ['it_editor'] }) }
      for (const upsert of [[], ['--upsert']]) {
        const run = await kbis(['import', csv, '--type', 'server', '--errors', errors, ...upsert], scoped)
        const written = upsert.length > 0 ? '0 created, 0 updated, 0 unchanged' : '0 created'
        expect(run, upsert.join()).toEqual({ code: 1, stdout: `3 rows read; 2 refused; ${written}; 1 chunk(s) failed and wrote nothing\n`, stderr: 'lines 2-4: 3 rows, 2 refused, nothing written\n' })
        expect(readFileSync(errors, 'utf8'), upsert.join()).toBe('line,field,message\n'
          + "3,,the key's roles do not allow to create server assets in access domain finance\n"
          + "4,,the key's roles do not allow to create server assets in no access domain\n")
      }
      expect(await count('cli-scope-%')).toBe(0)
    })

    it('names a row the server refuses by its line only (no "item 0:"), and counts one row as a row', async () => {
      const csv = file('noname.csv', 'name,hostname\n,cli-noname\n')
      const errors = path.join(dir, 'noname-errors.csv')
      expect(await kbis(['import', csv, '--type', 'server', '--errors', errors], env)).toEqual({
        code: 1, stdout: '1 row read; 1 refused; 0 created; 1 chunk(s) failed and wrote nothing\n', stderr: 'lines 2-2: 1 row, 1 refused, nothing written\n',
      })
      expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n2,name,name must not be empty\n')
      expect(await count('cli-noname')).toBe(0)
    })

    it('refuses a cell that does not fit its property type before sending, and writes nothing of its chunk', async () => {
      const csv = file('cells.csv', 'name,hostname,cpu_count,managed\ncli-cell-1,cli-cell-1,eight,true\ncli-cell-2,cli-cell-2,2,yes\ncli-cell-3,cli-cell-3,2,false\ncli-cell-4,cli-cell-4,9007199254740993,true\ncli-cell-5,cli-cell-5,9007199254740992,true\n')
      const errors = path.join(dir, 'cell-errors.csv')
      const run = await kbis(['import', csv, '--type', 'server', '--errors', errors], env)
      expect(run.code).toBe(1)
      expect(run.stdout).toBe('5 rows read; 3 refused; 0 created; 1 chunk(s) failed and wrote nothing\n')
      expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n2,cpu_count,"cpu_count must be a number, not ""eight"""\n3,managed,"managed must be true or false, not ""yes"""\n'
        // Rounded, it would be imported as 9007199254740992, another number than the file's.
        + '5,cpu_count,cpu_count: the number 9007199254740993 cannot be kept exactly (integers beyond ±9007199254740991 lose digits in a 64-bit float)\n')
      expect(await count('cli-cell-%')).toBe(0)
    })

    it('numbers the lines of a Windows file with multi-line cells (a chunk\'s range ends at its last row\'s last line), lists every failure of a row with a bad cell, and names a duplicate\'s other row by its line', async () => {
      const csv = file('windows.csv', [
        'name,hostname,environment,cpu_count,purchased_on',
        '"cli-win-1\r\nsecond line",cli-win-1,prod,4,2024-01-31',
        'cli-win-2,cli-win-2,moon,eight,2024-02-30',
        '"cli-win-3\r\n\r\nthird line",cli-win-3,dev,2,',
        '"cli-win-4\r\nlast line",cli-win-1,dev,2,',
      ].join('\r\n') + '\r\n')
      const errors = path.join(dir, 'windows-errors.csv')
      const run = await kbis(['import', csv, '--type', 'server', '--errors', errors], env)
      expect(run).toEqual({ code: 1, stdout: '4 rows read; 2 refused; 0 created; 1 chunk(s) failed and wrote nothing\n', stderr: 'lines 2-9: 4 rows, 2 refused, nothing written\n' })
      expect(readFileSync(errors, 'utf8')).toBe([
        'line,field,message',
        '4,cpu_count,"cpu_count must be a number, not ""eight"""',
        '4,environment,"environment must be one of dev, staging, prod"',
        '4,purchased_on,purchased_on must be a date YYYY-MM-DD: 2024-02-30 is not a calendar date',
        '8,hostname,server cli-win-1: the same unique value is given by line 2',
      ].join('\n') + '\n')
      // Upserting, the duplicate is the asset the key column names (the server points at the item's id, the key the import made of that column).
      expect((await kbis(['import', csv, '--type', 'server', '--upsert', '--errors', errors], env)).code).toBe(1)
      expect(readFileSync(errors, 'utf8').split('\n').filter((line) => line.startsWith('8,'))).toEqual([
        '8,hostname,server cli-win-1: the same asset is given by line 2',
      ])
      expect(await count('cli-win-%')).toBe(0)
    })

    it('--dry-run checks the whole file and writes nothing, and sends nothing to a server without dry runs', async () => {
      const csv = file('dry.csv', 'name,hostname\ncli-dry-1,cli-dry-1\ncli-dry-2,cli-dry-2\n')
      const ok = await kbis(['import', csv, '--type', 'server', '--dry-run'], env)
      expect((await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'dry-holder', properties: { hostname: 'dry-holder' } } })).status).toBe(201)
      const taken = file('dry-taken.csv', 'name,hostname\ncli-taken,dry-holder\n')
      const errors = path.join(dir, 'dry-errors.csv')
      const refused = await kbis(['import', taken, '--type', 'server', '--dry-run', '--errors', errors], env)
      expect(ok).toEqual({ code: 0, stdout: '2 rows read; 0 refused; dry run, nothing written\n', stderr: 'lines 2-3: 2 rows, all valid, nothing written\n' })
      expect(refused).toEqual({ code: 1, stdout: '1 row read; 1 refused; dry run, nothing written; 1 chunk(s) failed and wrote nothing\n', stderr: 'lines 2-2: 1 row, 1 refused, nothing written\n' })
      expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n2,hostname,server dry-holder: the unique value is already taken by another asset of this type\n')
      expect(await count('cli-dry-%')).toBe(0)
      expect(await count('cli-taken')).toBe(0)
      // A server that does not answer `?dry_run=true` (an older kbis) gets nothing, not a real write.
      await withStubServer((req, res) => {
        const type = req.method === 'GET' && req.url === '/api/v1/metamodel/asset-types/server'
        res.writeHead(type ? 200 : 201, { 'content-type': 'application/json' })
        res.end(JSON.stringify(type ? { data: { key: 'server', unique_property_key: 'hostname', properties: [{ key: 'hostname', type: 'unique_key' }] } } : { data: [] }))
      }, async (url) => {
        expect(await kbis(['import', csv, '--type', 'server', '--dry-run'], { ...env, KBIS_URL: url })).toEqual({
          code: 1, stdout: '', stderr: 'kbis: the server does not support dry runs (?dry_run=true on POST /api/v1/bulk/assets); nothing was sent\n',
        })
      })
      // One that refuses the parameter it does not know (400 naming dry_run) has none either.
      await withStubServer((req, res) => {
        const type = req.method === 'GET' && req.url === '/api/v1/metamodel/asset-types/server'
        res.writeHead(type ? 200 : 400, { 'content-type': 'application/json' })
        res.end(JSON.stringify(type
          ? { data: { key: 'server', unique_property_key: 'hostname', properties: [{ key: 'hostname', type: 'unique_key' }] } }
          : { errors: [{ status: '400', code: 'invalid_request', detail: 'unknown query parameter dry_run', source: { parameter: 'dry_run' } }] }))
      }, async (url) => {
        expect(await kbis(['import', csv, '--type', 'server', '--dry-run', '--upsert'], { ...env, KBIS_URL: url })).toEqual({
          code: 1, stdout: '', stderr: 'kbis: the server does not support dry runs (?dry_run=true on PUT /api/v1/bulk/assets); nothing was sent\n',
        })
      })
    })

    it('--dry-run refuses a row whose unique value a row of an earlier chunk creates, as the import itself does, and not when that chunk fails', async () => {
      // Line 10002 takes the hostname line 9 creates, 10,000 rows (one chunk) earlier.
      const rows = Array.from({ length: 10_000 }, (_, i) => `cli-cross-${i},cli-cross-${i},dev`)
      const csv = file('cross.csv', `name,hostname,environment\n${rows.join('\n')}\ncli-cross-again,cli-cross-7,dev\n`)
      const errors = path.join(dir, 'cross-errors.csv')
      const dry = await kbis(['import', csv, '--type', 'server', '--dry-run', '--errors', errors], env)
      expect(dry).toEqual({
        code: 1,
        stdout: '10001 rows read; 1 refused; dry run, nothing written; 1 chunk(s) failed and wrote nothing\n',
        stderr: 'lines 2-10001: 10000 rows, all valid, nothing written\nlines 10002-10002: 1 row, 1 refused, nothing written\n',
      })
      expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n10002,hostname,server cli-cross-7: the unique value is already taken by another asset of this type (the one line 9 of this file creates)\n')
      expect(await count('cli-cross-%')).toBe(0)
      // A first chunk that fails writes nothing: the later row then takes a free value.
      const failing = file('cross-failing.csv', `name,hostname,environment\n${rows.join('\n').replace('cli-cross-3,cli-cross-3,dev', 'cli-cross-3,cli-cross-3,nope')}\ncli-cross-again,cli-cross-7,dev\n`)
      const dryFailing = await kbis(['import', failing, '--type', 'server', '--dry-run'], env)
      expect(dryFailing.code).toBe(1)
      expect(dryFailing.stderr).toBe('lines 2-10001: 10000 rows, 1 refused, nothing written\nlines 10002-10002: 1 row, all valid, nothing written\n')
      // The import itself gives the dry run's verdict.
      const real = await kbis(['import', csv, '--type', 'server', '--errors', errors], env)
      expect(real).toEqual({
        code: 1,
        stdout: '10001 rows read; 1 refused; 10000 created; 1 chunk(s) failed and wrote nothing\n',
        stderr: 'lines 2-10001: 10000 rows, 10000 created, 0 updated, 0 unchanged\nlines 10002-10002: 1 row, 1 refused, nothing written\n',
      })
      expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n10002,hostname,server cli-cross-7: the unique value is already taken by another asset of this type\n')
      expect(await count('cli-cross-%')).toBe(10_000)
    }, 120_000)

    it('empties --errors when the import stops before its rows (no file, an unknown type, a key refused): no refusal of an earlier run stays there', async () => {
      const csv = file('stale.csv', 'name,hostname\ncli-stale,cli-stale\n')
      const errors = path.join(dir, 'stale-errors.csv')
      const runs: [string[], Record<string, string>, string][] = [
        [[path.join(dir, 'none.csv'), '--type', 'server'], env, `kbis: no file ${path.join(dir, 'none.csv')}\n`],
        [[csv, '--type', 'printer'], env, 'kbis: unknown asset type printer\n'],
        [[csv, '--type', 'server'], { ...env, KBIS_API_KEY: 'kbis_000000000000_nope' }, 'kbis: cannot read asset type server: the API key is not valid\n'],
      ]
      for (const [args, runEnv, stderr] of runs) {
        writeFileSync(errors, 'line,field,message\n2,hostname,an earlier run\'s refusal\n')
        const run = await kbis(['import', ...args, '--errors', errors], runEnv)
        expect(run, args.join(' ')).toEqual({ code: 1, stdout: '', stderr })
        expect(readFileSync(errors, 'utf8'), args.join(' ')).toBe('line,field,message\n')
      }
      expect(await count('cli-stale')).toBe(0)
    })

    it('stops a key without the right with the server\'s reason, dry run or not: a server with dry runs is never called one without', async () => {
      const csv = file('viewer.csv', 'name,hostname\ncli-viewer-1,cli-viewer-1\n')
      // A bad cell: the chunk is not written and goes to the server as a dry run.
      const cells = file('viewer-cells.csv', 'name,hostname,cpu_count\ncli-viewer-2,cli-viewer-2,eight\n')
      const viewer = { ...env, KBIS_API_KEY: await t.givenKey({ type: 'Viewer' }) }
      const refused = { code: 1, stdout: '', stderr: 'kbis: the server refused the import: this requires the Editor permission; the key acts as Viewer\n' }
      for (const args of [[], ['--dry-run'], ['--upsert'], ['--dry-run', '--upsert']]) {
        expect(await kbis(['import', csv, '--type', 'server', ...args], viewer), args.join()).toEqual(refused)
      }
      expect(await kbis(['import', cells, '--type', 'server'], viewer)).toEqual(refused)
      // Any other refusal of the question is the server's word, not a missing dry run: nothing is sent.
      let posts = 0
      await withStubServer((req, res) => {
        const type = req.method === 'GET' && req.url === '/api/v1/metamodel/asset-types/server'
        if (!type) posts++
        res.writeHead(type ? 200 : 500, { 'content-type': 'application/json' })
        res.end(JSON.stringify(type
          ? { data: { key: 'server', unique_property_key: 'hostname', properties: [{ key: 'hostname', type: 'unique_key' }] } }
          : { errors: [{ status: '500', code: 'internal_error', detail: 'internal error (request 7)' }] }))
      }, async (url) => {
        expect(await kbis(['import', csv, '--type', 'server', '--dry-run'], { ...env, KBIS_URL: url })).toEqual({
          code: 1, stdout: '', stderr: 'kbis: the server refused the import: internal error (request 7)\n',
        })
      })
      expect(posts).toBe(1)
      expect(await count('cli-viewer-%')).toBe(0)
    })

    it('--upsert names each asset by its unique-key column (PUT /bulk/assets)', async () => {
      const csv = file('upsert.csv', 'name,hostname,environment\ncli-up-1,cli-up-1,dev\nrenamed web,cli-web-01,prod\n')
      const run = await kbis(['import', csv, '--type', 'server', '--upsert'], env)
      expect(run).toEqual({ code: 0, stdout: '2 rows read; 0 refused; 1 created, 1 updated, 0 unchanged\n', stderr: 'lines 2-3: 2 rows, 1 created, 1 updated, 0 unchanged\n' })
      expect((await asset('server:hostname:cli-web-01')).name).toBe('renamed web')
      expect((await kbis(['import', csv, '--type', 'server', '--upsert'], env)).stdout).toBe('2 rows read; 0 refused; 0 created, 0 updated, 2 unchanged\n')
    })

    it('sends chunks of 10,000 rows with client_ref = line number and prints plain progress lines off a terminal', async () => {
      const rows = Array.from({ length: 10_050 }, (_, i) => `cli-many-${i},cli-many-${i}`)
      const csv = file('many.csv', `name,hostname\n${rows.join('\n')}\n`)
      const run = await kbis(['import', csv, '--type', 'server'], env)
      expect(run).toEqual({
        code: 0,
        stdout: '10050 rows read; 0 refused; 10050 created\n',
        stderr: 'lines 2-10001: 10000 rows, 10000 created, 0 updated, 0 unchanged\nlines 10002-10051: 50 rows, 50 created, 0 updated, 0 unchanged\n',
      })
      expect(await count('cli-many-%')).toBe(10_050)
    }, 120_000)

    it('refuses a row that is not valid CSV at its line, with nothing else of its chunk, and goes on with the next chunks', async () => {
      const rows = Array.from({ length: 10_003 }, (_, i) => (i === 4 ? `"cli-q-${i}"x,cli-q-${i}` : i === 6 ? `"cli-q-${i}" ,cli-q-${i}` : `cli-q-${i},cli-q-${i}`))
      const csv = file('quotes.csv', `name,hostname\n${rows.join('\n')}\n`)
      const errors = path.join(dir, 'quotes-errors.csv')
      const run = await kbis(['import', csv, '--type', 'server', '--errors', errors], env)
      expect(run).toEqual({
        code: 1,
        stdout: '10003 rows read; 2 refused; 3 created; 1 chunk(s) failed and wrote nothing\n',
        stderr: 'lines 2-10001: 10000 rows, 2 refused, nothing written\nlines 10002-10004: 3 rows, 3 created, 0 updated, 0 unchanged\n',
      })
      expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n'
        + '6,,"the row is not valid CSV: a quote closes a cell but is followed by ""x"", not a comma or the end of the line"\n'
        + '8,,"the row is not valid CSV: a quote closes a cell but is followed by "" "", not a comma or the end of the line"\n')
      expect((await t.store.db.query<{ name: string }>("SELECT name FROM assets WHERE name LIKE 'cli-q-%' ORDER BY name")).rows.map((r) => r.name))
        .toEqual(['cli-q-10000', 'cli-q-10001', 'cli-q-10002'])
      const header = file('quotes-header.csv', '"name"x,hostname\ncli-q,cli-q\n')
      expect(await kbis(['import', header, '--type', 'server'], env)).toEqual({
        code: 1, stdout: '', stderr: 'kbis: the header (line 1) is not valid CSV: a quote closes a cell but is followed by "x", not a comma or the end of the line\n',
      })
    }, 120_000)

    it('exports CSV to --output and NDJSON to stdout, exactly what GET /export/assets returns', async () => {
      const output = path.join(dir, 'servers-out.csv')
      const csv = await kbis(['export', '--type', 'server', '--format', 'csv', '--output', output], env)
      expect(csv).toEqual({ code: 0, stdout: '', stderr: '' })
      const api = await t.app.inject({ method: 'GET', url: '/api/v1/export/assets?format=csv&filter[asset_type_key]=server', headers: { authorization: `Bearer ${t.adminKey}` } })
      expect(readFileSync(output, 'utf8')).toBe(api.body)
      const ndjson = await kbis(['export', '--type', 'application', '--format', 'ndjson'], env)
      const apiNd = await t.app.inject({ method: 'GET', url: '/api/v1/export/assets?format=ndjson&filter[asset_type_key]=application', headers: { authorization: `Bearer ${t.adminKey}` } })
      expect(ndjson).toEqual({ code: 0, stdout: apiNd.body, stderr: '' })
      // --output /dev/stdout is standard output, here a socket to this process, which no open() reaches.
      expect(await kbis(['export', '--type', 'application', '--format', 'ndjson', '--output', '/dev/stdout'], env)).toEqual({ code: 0, stdout: apiNd.body, stderr: '' })
    })

    it('leaves --output as it was when the answer is cut short, and says so', async () => {
      const output = path.join(dir, 'kept.csv')
      writeFileSync(output, 'last night\n')
      await withStubServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/csv' })
        res.write('id,name\n1,a\n')
        setTimeout(() => res.destroy(), 50)
      }, async (url) => {
        expect(await kbis(['export', '--type', 'server', '--format', 'csv', '--output', output], { ...env, KBIS_URL: url })).toEqual({
          code: 1, stdout: '', stderr: 'kbis: export failed: the answer ended after 12 bytes, before it was complete (other side closed); kept.csv was left as it was\n'.replace('kept.csv', output),
        })
        const toStdout = await kbis(['export', '--type', 'server', '--format', 'csv'], { ...env, KBIS_URL: url })
        expect(toStdout).toEqual({ code: 1, stdout: 'id,name\n1,a\n', stderr: 'kbis: export failed: the answer ended after 12 bytes, before it was complete (other side closed); what was written to stdout is incomplete\n' })
      })
      expect(readFileSync(output, 'utf8')).toBe('last night\n')
      expect(readdirSync(dir).filter((f) => f.includes('partial'))).toEqual([])
      // Cut short at once, the file's directory crowded (the CLI looks there for the partial files
      // of earlier attempts): the same one line, not a crash (seen under load: an unhandled 'error'
      // event and its stack trace, the answer cut while that look ran before the answer was read).
      const crowded = mkdtempSync(path.join(dir, 'crowded-'))
      for (let i = 0; i < 2_000; i++) writeFileSync(path.join(crowded, `f${i}`), '')
      const early = path.join(crowded, 'early.csv')
      await withStubServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/csv' })
        res.write('id,name\n1,a\n', () => res.destroy())
      }, async (url) => {
        const run = await kbis(['export', '--type', 'server', '--format', 'csv', '--output', early], { ...env, KBIS_URL: url })
        expect({ ...run, stderr: run.stderr.replace(/after \d+ bytes/, 'after N bytes') }).toEqual({
          code: 1, stdout: '', stderr: `kbis: export failed: the answer ended after N bytes, before it was complete (other side closed); ${early} was left as it was\n`,
        })
      })
      expect(existsSync(early)).toBe(false)
      rmSync(crowded, { recursive: true, force: true })
      const nowhere = path.join(dir, 'no-such-dir', 'servers.csv')
      expect(await kbis(['export', '--type', 'server', '--output', nowhere], env)).toEqual({ code: 1, stdout: '', stderr: `kbis: export failed: the directory of --output ${nowhere} does not exist\n` })
    })

    it('imports NDJSON as kbis export writes it (ids and timestamps are the server\'s)', async () => {
      await t.request('POST', '/api/v1/bulk/assets', { body: [{ asset_type_key: 'note', name: 'cli-note-1', properties: { body: 'a' } }, { asset_type_key: 'note', name: 'cli-note-2', access_domain_key: 'it' }] })
      const exported = await kbis(['export', '--type', 'note', '--format', 'ndjson'], env)
      const nd = file('notes.ndjson', `${exported.stdout}\n{"asset_type_key":"server","name":"x"}\nnot json\n{"name":"nd4","bogus":1,"nmae":"typo","properties":{"body":"x"}}\n`)
      const run = await kbis(['import', nd, '--type', 'note', '--errors', path.join(dir, 'nd-errors.csv')], env)
      expect(run.code).toBe(1)
      const fields = 'a line has name, access_domain_key, properties (and asset_type_key, id, created_at, updated_at as kbis export writes them)'
      expect(readFileSync(path.join(dir, 'nd-errors.csv'), 'utf8')).toBe('line,field,message\n4,asset_type_key,"asset_type_key is ""server"", not note (--type)"\n5,,the line is not valid JSON\n'
        + `6,bogus,"unknown field ""bogus"": ${fields}"\n6,nmae,"unknown field ""nmae"": ${fields}"\n`)
      const clean = file('notes-clean.ndjson', exported.stdout)
      expect((await kbis(['import', clean, '--type', 'note'], env)).stdout).toBe('2 rows read; 0 refused; 2 created\n')
      const notes = (await t.request('GET', '/api/v1/assets?filter[asset_type_key]=note&page[size]=100')).body.data
      expect(notes.map((n: { name: string; access_domain_key: string | null; properties: object }) => [n.name, n.access_domain_key, n.properties]).sort())
        .toEqual([['cli-note-1', null, { body: 'a' }], ['cli-note-1', null, { body: 'a' }], ['cli-note-2', 'it', {}], ['cli-note-2', 'it', {}]])
    })

    it('refuses NDJSON numbers JSON cannot carry exactly, as the server does, and skips a byte-order mark', async () => {
      const nd = file('numbers.ndjson', '\uFEFF{"name":"nd-big-1","properties":{"hostname":"nd-big-1","memory_gb":9007199254740993}}\n'
        + '{"name":"nd-big-2","properties":{"hostname":"nd-big-2","memory_gb":1e400}}\n{"name":"nd-big-3","properties":{"hostname":"nd-big-3","memory_gb":64}}\n')
      const run = await kbis(['import', nd, '--type', 'server', '--errors', path.join(dir, 'numbers-errors.csv')], env)
      expect(run.code).toBe(1)
      expect(readFileSync(path.join(dir, 'numbers-errors.csv'), 'utf8')).toBe('line,field,message\n'
        + '1,memory_gb,the number 9007199254740993 cannot be kept exactly: integers beyond ±9007199254740991 (2^53 − 1) lose digits in a 64-bit float; no number property can hold it (a text property takes it sent as a string)\n'
        + '2,memory_gb,number out of range: it does not fit a 64-bit float\n')
      expect(await count('nd-big-%')).toBe(0)
      const ok = await kbis(['import', file('bom.ndjson', '\uFEFF{"name":"nd-bom","properties":{"hostname":"nd-bom"}}\n'), '--type', 'server'], env)
      expect(ok.stdout).toBe('1 row read; 0 refused; 1 created\n')
    })

    it('sends a chunk over the server\'s byte limit for a bulk body in halves, each its own request', async () => {
      // 3,000 valid rows of 3 KB notes: 9 MB in one request, over the 8 MiB limit.
      const rows = Array.from({ length: 3000 }, (_, i) => `big-note-${i},big-note-${i},${String(i % 10).repeat(3000)}`)
      const csv = file('long-notes.csv', `name,hostname,notes\n${rows.join('\n')}\n`)
      const run = await kbis(['import', csv, '--type', 'server'], env)
      expect([run.code, run.stdout]).toEqual([0, '3000 rows read; 0 refused; 3000 created\n'])
      expect(await count('big-note-%')).toBe(3000)
      expect((await asset('server:hostname:big-note-2999')).properties.notes).toBe('9'.repeat(3000))
    })

    it('refuses --errors naming the file being imported (it would empty it), and says so in one line when --errors cannot be written', async () => {
      const csv = file('self.csv', 'name,hostname,environment\nself-1,self-1,nope\n')
      const same = await kbis(['import', csv, '--type', 'server', '--errors', csv], env)
      expect([same.code, same.stderr]).toEqual([1, `kbis: --errors ${csv} is the file being imported; name another file for the refused rows\n`])
      expect(readFileSync(csv, 'utf8')).toBe('name,hostname,environment\nself-1,self-1,nope\n')
      const full = await kbis(['import', csv, '--type', 'server', '--errors', '/dev/full'], env)
      expect([full.code, full.stderr]).toEqual([1, 'kbis: cannot write --errors /dev/full: ENOSPC: no space left on device\n'])
    })

    it('reads each CSV row to its own line break, whichever the file mixes (LF header, CRLF rows, a CR)', async () => {
      const csv = file('mixed.csv', 'name,hostname,owner\nmix-1,mix-1,Alice\r\nmix-2,mix-2,Bob\rmix-3,mix-3,Carol\r\n')
      const run = await kbis(['import', csv, '--type', 'server'], env)
      expect(run.stdout).toBe('3 rows read; 0 refused; 3 created\n')
      expect([(await asset('server:hostname:mix-1')).properties.owner, (await asset('server:hostname:mix-2')).properties.owner, (await asset('server:hostname:mix-3')).properties.owner])
        .toEqual(['Alice', 'Bob', 'Carol'])
    })

    it('reads standard input for - (CSV, or NDJSON with --format ndjson), numbering its lines as a file\'s', async () => {
      const csv = 'name,hostname,environment\ncli-stdin-1,cli-stdin-1,prod\ncli-stdin-2,cli-stdin-2,moon\n'
      const errors = path.join(dir, 'stdin-errors.csv')
      expect(await kbis(['import', '-', '--type', 'server', '--errors', errors], env, csv)).toEqual({
        code: 1, stdout: '2 rows read; 1 refused; 0 created; 1 chunk(s) failed and wrote nothing\n', stderr: 'lines 2-3: 2 rows, 1 refused, nothing written\n',
      })
      expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n3,environment,"environment must be one of dev, staging, prod"\n')
      const ndjson = [{ name: 'cli-stdin-3', properties: { hostname: 'cli-stdin-3' } }, { name: 'cli-stdin-4', properties: { hostname: 'cli-stdin-4', environment: 'dev' } }]
        .map((r) => JSON.stringify(r)).join('\n') + '\n'
      expect(await kbis(['import', '-', '--type', 'server', '--format', 'ndjson'], env, ndjson)).toEqual({
        code: 0, stdout: '2 rows read; 0 refused; 2 created\n', stderr: 'lines 1-2: 2 rows, 2 created, 0 updated, 0 unchanged\n',
      })
      expect((await asset('server:hostname:cli-stdin-4')).properties).toEqual({ hostname: 'cli-stdin-4', environment: 'dev' })
      expect(await count('cli-stdin-%')).toBe(2)
    })

    it('fails with one line and exit 1 without a server, a key, a known type or known columns', async () => {
      const csv = file('plain.csv', 'name,hostname\nx,y\n')
      expect(await kbis(['import', csv, '--type', 'server'], {})).toEqual({ code: 1, stdout: '', stderr: 'kbis: no server: pass --url or set KBIS_URL (e.g. http://127.0.0.1:8080)\n' })
      expect((await kbis(['import', csv, '--type', 'server', '--url', env.KBIS_URL!], {})).stderr).toBe('kbis: no API key: pass --key or set KBIS_API_KEY\n')
      expect((await kbis(['import', csv, '--type', 'printer'], env)).stderr).toBe('kbis: unknown asset type printer\n')
      // A key pasted with its header's scheme is the key.
      expect((await kbis(['import', csv, '--type', 'printer', '--key', `Bearer ${env.KBIS_API_KEY}`], env)).stderr).toBe('kbis: unknown asset type printer\n')
      // An export of an unknown type is no empty success, in either format.
      for (const format of ['ndjson', 'csv']) {
        expect(await kbis(['export', '--type', 'printer', '--format', format], env), format)
          .toEqual({ code: 1, stdout: '', stderr: 'kbis: export failed: unknown asset type "printer"\n' })
      }
      // A --url ending in /api/v1: the server's 404 is for the path, not for the type.
      expect(await kbis(['import', csv, '--type', 'server', '--url', `${env.KBIS_URL}/api/v1`], env)).toEqual({ code: 1, stdout: '',
        stderr: `kbis: cannot read asset type server: no route GET /api/v1/api/v1/metamodel/asset-types/server: is ${env.KBIS_URL}/api/v1 the kbis server's base URL (e.g. http://127.0.0.1:8080)?\n` })
      expect(await kbis(['import', path.join(dir, 'nope.csv'), '--type', 'server'], env)).toEqual({ code: 1, stdout: '', stderr: `kbis: no file ${path.join(dir, 'nope.csv')}\n` })
      const odd = file('odd.csv', 'name,colour\nx,red\n')
      const run = await kbis(['import', odd, '--type', 'note'], env)
      expect(run).toEqual({ code: 1, stdout: '', stderr: 'kbis: unknown column(s) colour: asset type note has properties body\n' })
      const upsert = await kbis(['import', odd, '--type', 'note', '--upsert'], env)
      expect(upsert.stderr).toBe('kbis: asset type note has no unique_key property: --upsert needs one to name each asset\n')
      const twice = file('twice.csv', 'name,hostname,environment,hostname\ncli-twice,a,dev,b\n')
      expect(await kbis(['import', twice, '--type', 'server'], env)).toEqual({ code: 1, stdout: '', stderr: 'kbis: column(s) hostname given more than once in the header\n' })
      const semicolons = file('semicolons.csv', 'name;hostname\ncli-semi;cli-semi\n')
      expect((await kbis(['import', semicolons, '--type', 'note'], env)).stderr).toBe('kbis: unknown column(s) name;hostname: asset type note has properties body; columns are separated by commas\n')
      const trailing = file('trailing.csv', 'name,hostname,\ncli-trailing,cli-trailing,\n')
      expect(await kbis(['import', trailing, '--type', 'server'], env)).toEqual({ code: 1, stdout: '', stderr: 'kbis: the header has no name for column 3 of 3 (a comma at the end of the header line?)\n' })
      expect(await count('cli-twice')).toBe(0)
      expect(await count('cli-semi')).toBe(0)
      expect(await count('cli-trailing')).toBe(0)
      // --upsert without the unique key's column would refuse every row: the header says so first.
      const keyless = file('keyless.csv', 'name,environment\ncli-keyless,dev\n')
      expect(await kbis(['import', keyless, '--type', 'server', '--upsert'], env)).toEqual({ code: 1, stdout: '',
        stderr: 'kbis: the file has no hostname column: --upsert names each asset by hostname, the unique key of server\n' })
      expect(await count('cli-keyless')).toBe(0)
      // An empty file has no header: nothing to import is not a success.
      const empty = file('empty.csv', '')
      expect(await kbis(['import', empty, '--type', 'server'], env)).toEqual({ code: 1, stdout: '',
        stderr: 'kbis: the file is empty: a CSV file starts with its header line (name and property keys)\n' })
      // A header and no rows is an empty export: it imports nothing, successfully.
      const headerOnly = file('header-only.csv', 'name,hostname\n')
      expect(await kbis(['import', headerOnly, '--type', 'server'], env)).toEqual({ code: 0, stdout: '0 rows read; 0 refused; 0 created\n', stderr: '' })
    })

    it('names a file it cannot read or write: a directory, a read error, a place where no file can be made', async () => {
      const folder = path.join(dir, 'a-folder')
      mkdirSync(folder, { recursive: true })
      expect(await kbis(['import', folder, '--type', 'server'], env)).toEqual({ code: 1, stdout: '', stderr: `kbis: ${folder} is a directory, not a file\n` })
      // A read that fails once the file is open (Linux: reading address 0 of this process).
      for (const format of ['csv', 'ndjson']) {
        expect(await kbis(['import', '/proc/self/mem', '--type', 'server', '--format', format], env))
          .toEqual({ code: 1, stdout: '', stderr: 'kbis: cannot read /proc/self/mem: EIO: i/o error\n' })
      }
      expect(await kbis(['export', '--type', 'server', '--output', folder], env))
        .toEqual({ code: 1, stdout: '', stderr: `kbis: export failed: --output ${folder} is a directory, not a file\n` })
      // --errors is refused as --output is, before anything is sent.
      const csv = file('errors-nowhere.csv', 'name,hostname\ncli-nowhere,cli-nowhere\n')
      const nowhere = path.join(dir, 'no-such-dir', 'errors.csv')
      expect(await kbis(['import', csv, '--type', 'server', '--errors', folder], env)).toEqual({ code: 1, stdout: '', stderr: `kbis: --errors ${folder} is a directory, not a file\n` })
      expect(await kbis(['import', csv, '--type', 'server', '--errors', nowhere], env)).toEqual({ code: 1, stdout: '', stderr: `kbis: the directory of --errors ${nowhere} does not exist\n` })
      expect(await kbis(['import', csv, '--type', 'server', '--errors', '/proc/kbis-errors.csv'], env))
        .toEqual({ code: 1, stdout: '', stderr: 'kbis: cannot write --errors /proc/kbis-errors.csv: ENOENT: no such file or directory\n' })
      expect(await count('cli-nowhere')).toBe(0)
      expect(await kbis(['export', '--type', 'server', '--output', '/proc/kbis-export.csv'], env))
        .toEqual({ code: 1, stdout: '', stderr: 'kbis: export failed: cannot write /proc/kbis-export.csv: ENOENT: no such file or directory\n' })
      expect(readdirSync(folder)).toEqual([])
    })

    it('takes an asset_type_key column that names --type and refuses a row that names another', async () => {
      const csv = file('typed.csv', 'asset_type_key,name,hostname\nserver,cli-typed-1,cli-typed-1\n,cli-typed-2,cli-typed-2\nnote,cli-typed-3,cli-typed-3\n')
      const errors = path.join(dir, 'typed-errors.csv')
      expect((await kbis(['import', csv, '--type', 'server', '--errors', errors], env)).code).toBe(1)
      expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n4,asset_type_key,"asset_type_key is ""note"", not server (--type)"\n')
      const fixed = file('typed-fixed.csv', 'asset_type_key,name,hostname\nserver,cli-typed-1,cli-typed-1\n,cli-typed-2,cli-typed-2\n')
      expect((await kbis(['import', fixed, '--type', 'server'], env)).stdout).toBe('2 rows read; 0 refused; 2 created\n')
      expect(await count('cli-typed-%')).toBe(2)
    })

    it('refuses a row with more or fewer cells than the header and skips rows of blank cells', async () => {
      const csv = file('ragged.csv', 'name,hostname,environment\ncli-rag-1,cli-rag-1,dev\ncli-rag-2,cli-rag-2,dev,extra\n,,\n  , ,\ncli-rag-3\ncli-rag-4,cli-rag-4,prod\n')
      const errors = path.join(dir, 'ragged-errors.csv')
      const run = await kbis(['import', csv, '--type', 'server', '--errors', errors], env)
      expect(run).toEqual({ code: 1, stdout: '4 rows read; 2 refused; 0 created; 1 chunk(s) failed and wrote nothing\n', stderr: 'lines 2-7: 4 rows, 2 refused, nothing written\n' })
      expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n3,,the row has 4 cells; the header has 3 columns\n6,,the row has 1 cell; the header has 3 columns\n')
      const fixed = file('ragged-fixed.csv', 'name,hostname,environment\ncli-rag-1,cli-rag-1,dev\n,,\ncli-rag-4,cli-rag-4,prod\n')
      expect(await kbis(['import', fixed, '--type', 'server'], env)).toEqual({ code: 0, stdout: '2 rows read; 0 refused; 2 created\n', stderr: 'lines 2-4: 2 rows, 2 created, 0 updated, 0 unchanged\n' })
      expect(await count('cli-rag-%')).toBe(2)
    })

    it('refuses the rows of a file that is not UTF-8 (a Windows-1252 export) instead of importing them with characters lost', async () => {
      const notUtf8 = 'not UTF-8 text: kbis import reads UTF-8 files (convert it first, e.g. iconv -f WINDOWS-1252 -t UTF-8)'
      // "Café" and "José" as Windows-1252 writes them (é = E9); row 3 is plain ASCII, row 4 holds
      // U+FFFD itself: in a file that is not UTF-8 it cannot be told from a lost character.
      const csv = path.join(dir, 'cp1252.csv')
      writeFileSync(csv, Buffer.concat([
        Buffer.from('name,hostname,owner\n'),
        Buffer.from([...Buffer.from('Caf'), 0xe9, ...Buffer.from(',cli-cp-1,Jos'), 0xe9, 0x0a]),
        Buffer.from('cli-cp-2,cli-cp-2,ann\ncli-cp-3,cli-cp-3,\uFFFD\n'),
      ]))
      const errors = path.join(dir, 'cp1252-errors.csv')
      expect(await kbis(['import', csv, '--type', 'server', '--errors', errors], env))
        .toEqual({ code: 1, stdout: '3 rows read; 2 refused; 0 created; 1 chunk(s) failed and wrote nothing\n', stderr: 'lines 2-4: 3 rows, 2 refused, nothing written\n' })
      expect(readFileSync(errors, 'utf8')).toBe(`line,field,message\n2,name,"${notUtf8}"\n2,owner,"${notUtf8}"\n4,owner,"${notUtf8}"\n`)
      expect(await count('cli-cp-%')).toBe(0)
      // A UTF-8 file keeps its own U+FFFD (and its é).
      const utf8 = file('utf8.csv', 'name,hostname,owner\nCafé,cli-cp-4,\uFFFD\n')
      expect((await kbis(['import', utf8, '--type', 'server'], env)).code).toBe(0)
      expect((await asset('server:hostname:cli-cp-4'))).toMatchObject({ name: 'Café', properties: { owner: '\uFFFD' } })
      // A header that is not UTF-8 stops the file; an NDJSON line is refused as a row.
      const header = path.join(dir, 'cp1252-header.csv')
      writeFileSync(header, Buffer.from([...Buffer.from('name,hostname,caf'), 0xe9, 0x0a, ...Buffer.from('a,b,c\n')]))
      expect(await kbis(['import', header, '--type', 'server'], env)).toEqual({ code: 1, stdout: '', stderr: `kbis: the header is ${notUtf8}\n` })
      const nd = path.join(dir, 'cp1252.ndjson')
      writeFileSync(nd, Buffer.concat([Buffer.from([...Buffer.from('{"name":"Caf'), 0xe9, ...Buffer.from('","properties":{"body":"x"}}\n')]), Buffer.from('{"name":"cli-cp-nd","properties":{"body":"y"}}\n')]))
      const ndErrors = path.join(dir, 'cp1252-nd-errors.csv')
      expect((await kbis(['import', nd, '--type', 'note', '--errors', ndErrors], env)).code).toBe(1)
      expect(readFileSync(ndErrors, 'utf8')).toBe(`line,field,message\n1,,"the line is ${notUtf8}"\n`)
      expect(await count('cli-cp-nd')).toBe(0)
    })
  })
}

/**
 * What the CLI says of an address that is no kbis server: it meets stand-ins and closed ports
 * only, never a store, so it runs once rather than once per store.
 */
// Concurrent: each test has a stub server and files of its own, and most of their time is the
// CLI's waits (retries after 2 s, back-off), which need no CPU.
describe.concurrent('kbis import / kbis export against an address that is no kbis server', () => {
  let dir: string
  beforeAll(() => { dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-sync-reach-')) })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const env = { KBIS_API_KEY: 'kbis_x' }
  const file = (name: string, text: string) => {
    const p = path.join(dir, name)
    writeFileSync(p, text)
    return p
  }

  it('names the address it cannot use: not a URL, nothing listening, not a kbis server; a connection lost later is retried', async () => {
    const csv = file('reach.csv', 'name,hostname\ncli-reach,cli-reach\n')
    const both = async (extra: string[], environment: Record<string, string>) =>
      Promise.all([kbis(['import', csv, '--type', 'server', ...extra], environment), kbis(['export', '--type', 'server', ...extra], environment)])
    const notUrl = 'kbis: --url must be the server\'s http:// or https:// address, without a user, password, query or fragment, e.g. http://127.0.0.1:8080\n'
    expect(await both(['--url', 'localhost:8080'], env)).toEqual([{ code: 1, stdout: '', stderr: notUrl }, { code: 1, stdout: '', stderr: notUrl }])
    // A user and password are refused without repeating them (fetch's own message did, twice).
    expect(await both(['--url', 'http://user:s3cretpw@127.0.0.1:9'], env)).toEqual([{ code: 1, stdout: '', stderr: notUrl }, { code: 1, stdout: '', stderr: notUrl }])
    expect((await kbis(['export', '--type', 'server'], { ...env, KBIS_URL: 'ftp://user:secret@example.test' })).stderr)
      .toBe('kbis: KBIS_URL must be the server\'s http:// or https:// address, without a user, password, query or fragment, e.g. http://127.0.0.1:8080\n')
    // A port nothing listens on: said at once with the cause, not "fetch failed".
    const closed = createServer()
    closed.listen(0, '127.0.0.1')
    await once(closed, 'listening')
    const port = (closed.address() as AddressInfo).port
    closed.close()
    await once(closed, 'close')
    const refused = `kbis: cannot reach http://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}\n`
    expect(await both([], { ...env, KBIS_URL: `http://127.0.0.1:${port}` })).toEqual([{ code: 1, stdout: '', stderr: refused }, { code: 1, stdout: '', stderr: refused }])
    // Another web server (here answering HTML to everything).
    await withStubServer((_req, res) => {
      res.writeHead(404, { 'content-type': 'text/html' })
      res.end('<html>not here</html>')
    }, async (url) => {
      expect(await both([], { ...env, KBIS_URL: url })).toEqual([
        { code: 1, stdout: '', stderr: `kbis: ${url} answered HTTP 404 with text/html, not the JSON of the kbis API: is it the kbis server's address?\n` },
        { code: 1, stdout: '', stderr: `kbis: export failed: HTTP 404, not an answer of the kbis API: is ${url} the kbis server's address?\n` },
      ])
    })
    await withStubServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' })
      res.end('<html>a page</html>')
    }, async (url) => {
      expect(await kbis(['export', '--type', 'server', '--format', 'csv'], { ...env, KBIS_URL: url }))
        .toEqual({ code: 1, stdout: '', stderr: `kbis: export failed: ${url} answered text/html, not text/csv: is it the kbis server's address?\n` })
    })
    // The metrics port: its JSON 404 is no unknown type.
    const metricsServer = await startMetricsServer(0, '127.0.0.1')
    try {
      const url = new URL(metricsServer.url).origin
      const misdirected = `cannot read asset type server: metrics are at GET /metrics: is ${url} the kbis server's base URL (e.g. http://127.0.0.1:8080)?\n`
      expect(await both([], { ...env, KBIS_URL: url })).toEqual([
        { code: 1, stdout: '', stderr: `kbis: ${misdirected}` },
        { code: 1, stdout: '', stderr: 'kbis: export failed: metrics are at GET /metrics\n' },
      ])
      expect(await kbis(['export', '--type', 'server', '--format', 'ndjson'], { ...env, KBIS_URL: url }))
        .toEqual({ code: 1, stdout: '', stderr: `kbis: export failed: ${misdirected}` })
    } finally {
      await new Promise((resolve) => metricsServer.close(resolve))
    }
    // A server that answered once and then drops a connection (restarting): the chunk is sent again.
    let posts = 0
    await withStubServer((req, res) => {
      if (answeredServerType(req, res)) return
      if (++posts === 1) {
        req.socket.destroy()
        return
      }
      answerOneCreated(res)
    }, async (url) => {
      expect(await kbis(['import', csv, '--type', 'server'], { ...env, KBIS_URL: url })).toEqual(ONE_CREATED)
    })
    expect(posts).toBe(2)
  })

  it('finishes an import whose standard error is closed under it (kbis import … 2>&1 >rows.log | head -1): its progress lines are lost, not its rows', async () => {
    const csv = file('stderr-closed.csv', 'name,hostname\ncli-quiet,cli-quiet\n')
    let posts = 0
    await withStubServer((req, res) => {
      if (answeredServerType(req, res)) return
      posts++
      answerOneCreated(res)
    }, async (url) => {
      const child = spawn(KBIS_BIN, ['import', csv, '--type', 'server'], { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env, KBIS_URL: url } })
      // Closed before the command writes anything: its first progress line meets a closed pipe.
      child.stderr.destroy()
      let stdout = ''
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
      expect({ code, stdout }).toEqual({ code: 0, stdout: ONE_CREATED.stdout })
    })
    expect(posts).toBe(1)
  })

  it('waits out a chunk whose Idempotency-Key is in use longer than five tries (a claim a crashed server left goes stale), then sends it', { timeout: 60_000 }, async () => {
    const csv = file('in-use.csv', 'name,hostname\ncli-in-use,cli-in-use\n')
    const keys = new Set<string | string[] | undefined>()
    let posts = 0
    await withStubServer((req, res) => {
      if (answeredServerType(req, res)) return
      keys.add(req.headers['idempotency-key'])
      if (++posts <= 6) {
        res.writeHead(409, { 'content-type': 'application/json', 'retry-after': '1' })
        res.end(JSON.stringify({ errors: [{ status: '409', code: 'idempotency_key_in_use', detail: 'the first request with this Idempotency-Key is still running; retry when it has answered' }] }))
        return
      }
      answerOneCreated(res)
    }, async (url) => {
      expect(await kbis(['import', csv, '--type', 'server'], { ...env, KBIS_URL: url })).toEqual(ONE_CREATED)
    })
    expect(posts).toBe(7)
    expect(keys.size).toBe(1)
  })

  it('says at once of a chunk whose first try was written and whose answer the server lost (409 without Retry-After) that its rows are written, and exits 1', async () => {
    const csv = file('answer-lost.csv', 'name,hostname\ncli-lost-1,cli-lost-1\ncli-lost-2,cli-lost-2\n')
    const errors = path.join(dir, 'answer-lost-errors.csv')
    const detail = 'the first request with this Idempotency-Key wrote its changes, but its server stopped before it could keep the answer: the request is not run again'
    let posts = 0
    await withStubServer((req, res) => {
      if (answeredServerType(req, res)) return
      posts++
      res.writeHead(409, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ errors: [{ status: '409', code: 'idempotency_key_in_use', detail }] }))
    }, async (url) => {
      const started = Date.now()
      const run = await kbis(['import', csv, '--type', 'server', '--errors', errors], { ...env, KBIS_URL: url })
      expect(run).toEqual({
        code: 1,
        stdout: '2 rows read; 0 refused; 0 created; 1 chunk(s) written whose answer the server lost (an --upsert re-run reports their rows unchanged)\n',
        stderr: `lines 2-3: 2 rows, written by an earlier try whose answer the server lost (HTTP 409: ${detail})\n`,
      })
      // Asked once, not again every 2 s for a minute: the answer would not change.
      expect(Date.now() - started).toBeLessThan(20_000)
    })
    expect(posts).toBe(1)
    // Its rows are not refused ones.
    expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n')
  })

  it('says which chunk was in flight when the server stays unreachable mid-import, and that the rest was not sent', { timeout: 60_000 }, async () => {
    const csv = file('lost.csv', 'name,hostname\ncli-lost,cli-lost\n')
    let posts = 0
    await withStubServer((req, res) => {
      if (answeredServerType(req, res)) return
      posts++
      req.socket.destroy()
    }, async (url) => {
      const run = await kbis(['import', csv, '--type', 'server'], { ...env, KBIS_URL: url })
      expect(run).toEqual({
        code: 1,
        stdout: '',
        stderr: expect.stringMatching(new RegExp(`^kbis: cannot reach ${url.replace(/[.:/]/g, '\\$&')}: .+, while lines 2-2 were being sent: the server may have written them or not \\(an --upsert re-run of the file leaves the rows already written unchanged\\); the chunks reported above are written, the rest of the file was not sent\\n$`)),
      })
    })
    expect(posts).toBe(5)
  })

  it('says on the line of a chunk the server refused whole (not items of it) why, and lists each of its rows in --errors', async () => {
    const csv = file('whole.csv', 'name,hostname\ncli-w-1,cli-w-1\ncli-w-2,cli-w-2\n')
    const errors = path.join(dir, 'whole-errors.csv')
    await withStubServer((req, res) => {
      if (answeredServerType(req, res)) return
      // A 500 is not retried (a 503 would be, after its Retry-After, up to five times).
      res.writeHead(500, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ errors: [{ status: '500', code: 'internal_error', detail: 'an internal error occurred; it has been logged' }] }))
    }, async (url) => {
      expect(await kbis(['import', csv, '--type', 'server', '--errors', errors], { ...env, KBIS_URL: url })).toEqual({
        code: 1,
        stdout: '2 rows read; 2 refused; 0 created; 1 chunk(s) failed and wrote nothing\n',
        stderr: 'lines 2-3: 2 rows, 2 refused, nothing written (HTTP 500: an internal error occurred; it has been logged)\n',
      })
    })
    expect(readFileSync(errors, 'utf8')).toBe('line,field,message\n2,,an internal error occurred; it has been logged\n3,,an internal error occurred; it has been logged\n')
  })
})

describe('kbis import interrupted', () => {
  it('says which chunk was being sent when Ctrl-C or SIGTERM came, writes out --errors, and exits 130 or 143', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-interrupt-'))
    try {
      // The first chunk has a refused row (reported at once); the second one's answer never comes.
      const rows = Array.from({ length: 10_010 }, (_, i) => (i === 3 ? 'cli-i-3,' : `cli-i-${i},cli-i-${i}`))
      const csv = path.join(dir, 'interrupted.csv')
      writeFileSync(csv, `name,hostname\n${rows.join('\n')}\n`)
      let bulks = 0
      await withStubServer((req, res) => {
        if (answeredServerType(req, res)) return
        bulks++
        req.resume()
        if (bulks > 1) return // the second chunk: no answer
        res.writeHead(422, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ errors: [{ status: '422', code: 'validation_failed', detail: 'hostname is required for asset type server', source: { pointer: '/3/properties/hostname' }, meta: { index: 3, client_ref: '5' } }] }))
      }, async (url) => {
        for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
          bulks = 0
          const errors = path.join(dir, `${signal}.csv`)
          const run = runCli(['import', csv, '--type', 'server', '--errors', errors], { KBIS_URL: url, KBIS_API_KEY: 'kbis_stub' })
          await run.waitFor(/^lines 2-10001: /)
          while (bulks < 2) await new Promise((resolve) => setTimeout(resolve, 20))
          run.child.kill(signal)
          expect(await run.exited, signal).toBe(code)
          expect(run.lines, signal).toEqual([
            'lines 2-10001: 10000 rows, 1 refused, nothing written',
            'kbis: interrupted while lines 10002-10011 were being sent: the server may have written them or not (an --upsert re-run of the file leaves the rows already written unchanged); the chunks reported above are written',
          ])
          expect(readFileSync(errors, 'utf8'), signal).toBe('line,field,message\n5,hostname,hostname is required for asset type server\n')
        }
      })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})

describe('kbis export against a busy server', () => {
  it('waits out a 429 or 503 (Retry-After) before the answer begins, and writes what comes after', async () => {
    let asked = 0
    const stub = createServer((req, res) => {
      asked++
      if (asked === 1) {
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' })
        return res.end(JSON.stringify({ errors: [{ status: '429', code: 'rate_limit_exceeded', detail: 'quota spent' }] }))
      }
      if (asked === 2) {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' })
        return res.end(JSON.stringify({ errors: [{ status: '503', code: 'service_unavailable', detail: 'shutting down' }] }))
      }
      res.writeHead(200, { 'content-type': 'text/csv; charset=utf-8' })
      res.end('id,name\n01a21f8f-8a31-70d4-8529-9f7dfff8c851,web-01\n')
    })
    stub.listen(0, '127.0.0.1')
    await once(stub, 'listening')
    try {
      const url = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`
      const started = Date.now()
      expect(await kbis(['export', '--type', 'server', '--format', 'csv'], { KBIS_URL: url, KBIS_API_KEY: 'kbis_x' }))
        .toEqual({ code: 0, stdout: 'id,name\n01a21f8f-8a31-70d4-8529-9f7dfff8c851,web-01\n', stderr: '' })
      expect(asked).toBe(3)
      expect(Date.now() - started).toBeGreaterThanOrEqual(2000)
    } finally {
      stub.close()
    }
  })
})
