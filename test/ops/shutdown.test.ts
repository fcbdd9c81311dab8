import http from 'node:http'
import net from 'node:net'
import { once } from 'node:events'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { openDb, type Db, type StoreKind } from '../../src/store/db.js'
import { STORES } from '../helpers/stores.js'
import { cli, cliStore, runCli, type CliProcess } from '../helpers/cli-server.js'
import { HOLD_RELAY_LOCK } from '../../src/events/relay.js'

const ITEMS = 3000

/**
 * POSTs `body` and holds back its last byte until `beforeLastByte` has run: the request is surely
 * in flight (its headers read, its body not complete) whatever the server does meanwhile. (Sent
 * whole, a bulk request on PGlite, whose statements run on the server's own thread, could be
 * answered before the server even handled a signal sent after it.) Resolves with the answer.
 */
function post(url: string, key: string, body: unknown, beforeLastByte: () => Promise<void>): Promise<{ status: number; body: any; connection: string | undefined }> {
  return new Promise((resolve, reject) => {
    const payload = Buffer.from(JSON.stringify(body))
    const req = http.request(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': payload.length } }, (res) => {
      let text = ''
      res.on('data', (d: Buffer) => (text += d.toString()))
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text), connection: res.headers.connection }))
    })
    req.on('error', reject)
    req.write(payload.subarray(0, -1))
    void beforeLastByte().then(() => req.end(payload.subarray(-1)), reject)
  })
}

/** As post(), with an Idempotency-Key. */
function postWithKey(url: string, key: string, idempotencyKey: string, body: unknown, beforeLastByte: () => Promise<void>): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    const payload = Buffer.from(JSON.stringify(body))
    const req = http.request(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': payload.length, 'idempotency-key': idempotencyKey } }, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode! }))
    })
    req.on('error', reject)
    req.write(payload.subarray(0, -1))
    void beforeLastByte().then(() => req.end(payload.subarray(-1)), reject)
  })
}

for (const kind of STORES) {
  describe(`${kind}: SIGTERM drains`, { timeout: 180_000 }, () => {
    let yaml: string
    let env: Record<string, string>
    let drop = async () => undefined as void
    let countAssets: () => Promise<number>

    beforeAll(async () => {
      const store = await cliStore(kind)
      ;({ yaml, env, drop } = store)
      countAssets = async () => {
        const db = await openDb(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL, poolSize: 1 } : { dataDir: env.KBIS_DATA_DIR! })
        try { return (await db.query<{ n: number }>('SELECT count(*) AS n FROM assets')).rows[0]!.n } finally { await db.close() }
      }
    })
    afterAll(async () => drop())

    it('finishes a bulk request in flight (201), stops listening, closes the store and exits 0', async () => {
      await cli(['apply', yaml], env)
      const key = (JSON.parse((await cli(['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', 'bulk', '--type', 'Admin', '--roles', 'all', '--json'], env)).at(-1)!) as { secret: string }).secret
      const server = runCli(['serve', '--port', '0'], env)
      // A failing assertion must not leave the server running over a data directory removed under it.
      onTestFinished(() => void (server.child.exitCode === null && server.child.kill('SIGKILL')))
      const url = (await server.waitFor(/kbis listening on (\S+)/))[1]!
      // `kbis apply` migrated the store: a start on a current store says nothing of migrations.
      expect(server.lines.filter((l) => l.includes('schema migration'))).toEqual([])
      const items = Array.from({ length: ITEMS }, (_, i) => ({ asset_type_key: 'server', name: `srv-${i}`, properties: { hostname: `srv-${i}.acme.test`, environment: 'prod' } }))
      let signalledAt = 0
      const answer = await post(`${url}/api/v1/bulk/assets`, key, items, async () => {
        // The server has the request's headers (it is in flight) when the signal arrives.
        await new Promise((r) => setTimeout(r, 300))
        signalledAt = Date.now()
        server.child.kill('SIGTERM')
        // An idle event loop handles the signal at once: draining has begun when the body completes.
        await new Promise((r) => setTimeout(r, 500))
      })
      expect(signalledAt).toBeGreaterThan(0)
      expect(answer.status).toBe(201)
      expect(answer.body.data).toHaveLength(ITEMS)
      // The answer of a draining server closes its connection.
      expect(answer.connection).toBe('close')
      expect(await server.exited).toBe(0)
      // The operator reads the stop's beginning and its end; the end comes last.
      expect(server.lines).toContain('kbis: SIGTERM received; stopping (requests in flight have up to 30 s to finish)')
      await server.waitFor(/^kbis stopped$/, 5_000)
      expect(server.lines.at(-1)).toBe('kbis stopped')
      await expect(fetch(`${url}/healthz`)).rejects.toThrow()
      expect(await countAssets()).toBe(ITEMS)
    })

    it('ends a connection left without an answer in progress (a request line and no more) when it drains, and exits without waiting for the timeout', async () => {
      const server = runCli(['serve', '--port', '0'], { ...env, KBIS_SHUTDOWN_TIMEOUT: '30' })
      onTestFinished(() => void (server.child.exitCode === null && server.child.kill('SIGKILL')))
      const url = new URL((await server.waitFor(/kbis listening on (\S+)/))[1]!)
      const socket = net.connect(Number(url.port), url.hostname)
      onTestFinished(() => void socket.destroy())
      await once(socket, 'connect')
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n')
      const closed = once(socket, 'close')
      socket.resume()
      await new Promise((r) => setTimeout(r, 300))
      const signalled = Date.now()
      server.child.kill('SIGTERM')
      expect(await server.exited).toBe(0)
      await closed
      expect(Date.now() - signalled, server.lines.join('\n')).toBeLessThan(15_000)
    })

    it('closes a keep-alive connection whose streaming answer ends while it drains, and exits without waiting for the timeout', async () => {
      const key = (JSON.parse((await cli(['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', 'export', '--type', 'Admin', '--roles', 'all', '--json'], env)).at(-1)!) as { secret: string }).secret
      const server = runCli(['serve', '--port', '0'], { ...env, KBIS_SHUTDOWN_TIMEOUT: '30', LOG_LEVEL: 'info' })
      onTestFinished(() => void (server.child.exitCode === null && server.child.kill('SIGKILL')))
      const url = (await server.waitFor(/kbis listening on (\S+)/))[1]!
      // An export larger than the sockets' buffers: its answer is still being written when the signal comes.
      for (let chunk = 0; chunk < 2; chunk++) {
        const items = Array.from({ length: 10_000 }, (_, i) => ({ asset_type_key: 'server', name: `big-${chunk}-${i}-${'x'.repeat(150)}`, properties: { hostname: `big-${chunk}-${i}.acme.test`, environment: 'prod' } }))
        const res = await fetch(`${url}/api/v1/bulk/assets`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(items) })
        expect(res.status).toBe(201)
      }
      const agent = new http.Agent({ keepAlive: true })
      onTestFinished(() => agent.destroy())
      // The export's headers are out (a keep-alive answer) when the signal comes; its reader is paused meanwhile.
      const lines = await new Promise<number>((resolve, reject) => {
        http.get(`${url}/api/v1/export/assets?format=ndjson`, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
          res.pause()
          let text = ''
          res.on('data', (d: Buffer) => (text += d.toString()))
          res.on('end', () => resolve(text.split('\n').filter(Boolean).length))
          setTimeout(() => {
            server.child.kill('SIGTERM')
            setTimeout(() => res.resume(), 1000)
          }, 500)
        }).on('error', reject)
      })
      const signalled = Date.now()
      expect(lines).toBe(ITEMS + 20_000)
      expect(await server.exited).toBe(0)
      expect(Date.now() - signalled, server.lines.join('\n')).toBeLessThan(15_000)
    })
  })
}

/** Sends a POST whole; resolves with its status, or with the error that ended its connection. */
function send(url: string, key: string, body: unknown): Promise<number | Error> {
  return fetch(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    .then((res) => res.status, (err: Error) => err)
}

/**
 * A store of `kind` with ACME applied, an Admin key, and `kbis serve` on it with a shutdown timeout
 * of 1 s, all removed when the test finishes.
 */
async function serverWithTimeout(kind: StoreKind): Promise<{ env: Record<string, string>; key: string; server: CliProcess; url: string }> {
  const { yaml, env, drop } = await cliStore(kind)
  onTestFinished(drop)
  await cli(['apply', yaml], env)
  const key = (JSON.parse((await cli(['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', 'bulk', '--type', 'Admin', '--roles', 'all', '--json'], env)).at(-1)!) as { secret: string }).secret
  const server = runCli(['serve', '--port', '0'], { ...env, KBIS_SHUTDOWN_TIMEOUT: '1' })
  onTestFinished(() => void (server.child.exitCode === null && server.child.kill('SIGKILL')))
  const url = (await server.waitFor(/kbis listening on (\S+)/))[1]!
  return { env, key, server, url }
}

if (STORES.includes('pglite')) {
  describe('pglite: KBIS_SHUTDOWN_TIMEOUT bounds the shutdown', { timeout: 120_000 }, () => {
    it('rolls back what the timeout cut off: a bulk committed is one whose 201 was sent, nothing of the others', async () => {
      const { env, key, server, url } = await serverWithTimeout('pglite')
      // Three bulks of 10,000 in flight (their headers read) when the signal comes; PGlite runs
      // them one after the other, seconds in all: the timeout (1 s) comes while they run.
      const batches = ['a', 'b', 'c']
      let inFlight = 0
      let signal = () => undefined as void
      const signalled = new Promise<void>((resolve) => (signal = resolve))
      const answers = batches.map((batch) => {
        const items = Array.from({ length: 10_000 }, (_, i) => ({ asset_type_key: 'server', name: `cut-${batch}-${i}`, properties: { hostname: `cut-${batch}-${i}.acme.test` } }))
        return post(`${url}/api/v1/bulk/assets`, key, items, async () => {
          if (++inFlight === batches.length) {
            await new Promise((r) => setTimeout(r, 200))
            server.child.kill('SIGTERM')
            signal()
          }
          await signalled
        }).then((answer) => answer.status, (err: Error) => err)
      })
      const statuses = await Promise.all(answers)
      expect(await server.exited).toBe(0)
      expect(server.lines.some((l) => /\d+ requests? still in flight after 1 s/.test(l))).toBe(true)
      // A request cut off before its answer has a line with the 503 it was refused with, or no
      // status when its connection closed first (never the 200 a reply starts with), and its
      // transaction's end is the shutdown's doing, not an error of the store or of the code.
      const cut = server.lines.filter((l) => l.includes('request ended before its answer was complete')).map((l) => JSON.parse(l) as { status_code: unknown })
      expect(cut.length).toBeGreaterThan(0)
      for (const line of cut) expect([null, 503]).toContain(line.status_code)
      expect(server.lines.filter((l) => l.startsWith('{') && (JSON.parse(l) as { level: number }).level >= 50)).toEqual([])
      // The bulk running at the timeout runs its statement to its end (PGlite cannot cancel one),
      // then rolls back and says so; on a machine slow enough that it was still running 2 s later,
      // the process exited with its transaction open, which the next open rolls back (below).
      const overdue = server.lines.some((l) => l.includes('shutdown still not done 2 s after KBIS_SHUTDOWN_TIMEOUT'))
      const rolledBack = server.lines.some((l) => l.includes('request cut off by the shutdown timeout (KBIS_SHUTDOWN_TIMEOUT); its transaction was rolled back'))
      expect(rolledBack || overdue, server.lines.join('\n')).toBe(true)
      // Last, even after a shutdown that outlasted the timeout's 2 s margin (its warning comes before).
      expect(server.lines.at(-1)).toBe('kbis stopped')
      // Committed exactly when answered 201; at least one was cut off.
      const db = await openDb({ dataDir: env.KBIS_DATA_DIR! })
      try {
        for (const [i, batch] of batches.entries()) {
          const n = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM assets WHERE name LIKE $1', [`cut-${batch}-%`])).rows[0]!.n
          expect({ batch, n }).toEqual({ batch, n: statuses[i] === 201 ? 10_000 : 0 })
        }
      } finally {
        await db.close()
      }
      expect(statuses.filter((s) => s instanceof Error).length).toBeGreaterThan(0)
    })
  })
}

/**
 * A transaction of `db` that has run `sql` (a lock to hold) and stays open until the function
 * returned is called, or the test ends.
 */
async function holdOpen(db: Db, sql: string): Promise<() => Promise<void>> {
  let release = () => undefined as void
  const released = new Promise<void>((resolve) => (release = resolve))
  let locked = () => undefined as void
  const lockTaken = new Promise<void>((resolve) => (locked = resolve))
  const holder = db.transaction(async (tx) => {
    await tx.query(sql)
    locked()
    await released
  })
  onTestFinished(() => { release(); return holder })
  await lockTaken
  return async () => {
    release()
    await holder
  }
}

/**
 * A store of `kind` with ACME applied, an Admin key, and a deferred trigger of the test's that
 * makes the COMMIT of an asset named `slow-commit` take 2 s; `kbis serve` on it with a shutdown
 * timeout of 2 s. All removed when the test finishes.
 */
async function slowCommitServer(kind: StoreKind): Promise<{ env: Record<string, string>; key: string; server: CliProcess; url: string }> {
  const { yaml, env, drop } = await cliStore(kind)
  onTestFinished(drop)
  await cli(['apply', yaml], env)
  const key = (JSON.parse((await cli(['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', 'bulk', '--type', 'Admin', '--roles', 'all', '--json'], env)).at(-1)!) as { secret: string }).secret
  const setup = await openDb(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL, poolSize: 1 } : { dataDir: env.KBIS_DATA_DIR! })
  try {
    await setup.query(`CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$`)
    await setup.query(`CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON assets DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW WHEN (NEW.name = 'slow-commit') EXECUTE FUNCTION slow_commit()`)
  } finally {
    await setup.close()
  }
  const server = runCli(['serve', '--port', '0'], { ...env, KBIS_SHUTDOWN_TIMEOUT: '2' })
  onTestFinished(() => void (server.child.exitCode === null && server.child.kill('SIGKILL')))
  const url = (await server.waitFor(/kbis listening on (\S+)/))[1]!
  return { env, key, server, url }
}

async function namesStored(env: Record<string, string>, names: string[]): Promise<string[]> {
  const db = await openDb(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL, poolSize: 1 } : { dataDir: env.KBIS_DATA_DIR! })
  try {
    return (await db.query<{ name: string }>('SELECT name FROM assets WHERE name = ANY($1) ORDER BY name', [names])).rows.map((r) => r.name)
  } finally {
    await db.close()
  }
}

if (STORES.includes('pglite')) {
  describe('pglite: KBIS_SHUTDOWN_TIMEOUT and a request still waiting for the store', { timeout: 120_000 }, () => {
    it('commits nothing of a request cut off while it waited, when its turn comes after the timeout', async () => {
      const { env, key, server, url } = await slowCommitServer('pglite')
      // Both in flight when the signal comes, their last bytes sent after it. The first's COMMIT
      // holds PGlite from about 0.2 s to 2.2 s after the signal; the second, sent in whole 0.5 s
      // after it, waits behind that COMMIT for its Idempotency-Key's claim, before its transaction,
      // when the timeout (2 s) closes its connection. Its turn comes after: it must write nothing.
      let signal = () => undefined as void
      const signalled = new Promise<void>((resolve) => (signal = resolve))
      const slow = post(`${url}/api/v1/bulk/assets`, key, [{ asset_type_key: 'server', name: 'slow-commit', properties: { hostname: 'slow.acme.test' } }], async () => {
        await new Promise((r) => setTimeout(r, 300))
        server.child.kill('SIGTERM')
        signal()
        await new Promise((r) => setTimeout(r, 200))
      })
      const late = postWithKey(`${url}/api/v1/assets`, key, 'late-1', { asset_type_key: 'server', name: 'late', properties: { hostname: 'late.acme.test' } }, async () => {
        await signalled
        await new Promise((r) => setTimeout(r, 500))
      }).then((answer) => answer.status, (err: Error) => err)
      expect((await slow).status).toBe(201)
      expect(await server.exited).toBe(0)
      expect(await late).toBeInstanceOf(Error)
      expect(await namesStored(env, ['late', 'slow-commit'])).toEqual(['slow-commit'])
    })
  })
}

for (const kind of STORES) {
  describe(`${kind}: KBIS_SHUTDOWN_TIMEOUT and a request that committed`, { timeout: 120_000 }, () => {
    it('lets a request whose COMMIT is under way at the timeout commit and send its answer (201) on the connection it leaves open', async () => {
      const { env, key, server, url } = await slowCommitServer(kind)

      // In flight when the signal comes; it commits from about 0.2 s after, so its COMMIT is under
      // way when the timeout comes (2 s), and ends before the process must exit (2 s later).
      const items = [{ asset_type_key: 'server', name: 'slow-commit', properties: { hostname: 'slow.acme.test' } }]
      const answer = await post(`${url}/api/v1/bulk/assets`, key, items, async () => {
        await new Promise((r) => setTimeout(r, 300))
        server.child.kill('SIGTERM')
        await new Promise((r) => setTimeout(r, 200))
      })
      expect(await server.exited).toBe(0)
      expect(server.lines.some((l) => l.includes('1 request still in flight after 2 s')), server.lines.join('\n')).toBe(true)
      expect(server.lines.some((l) => l.includes('1 of them was committing its changes: its connection is left to send the answer'))).toBe(true)
      expect(answer.status).toBe(201)
      expect(answer.body.data).toHaveLength(1)
      expect(answer.connection).toBe('close')
      const db = await openDb(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL, poolSize: 1 } : { dataDir: env.KBIS_DATA_DIR! })
      try {
        expect((await db.query<{ id: string }>(`SELECT id FROM assets WHERE name = 'slow-commit'`)).rows).toEqual([{ id: answer.body.data[0].id }])
      } finally {
        await db.close()
      }
    })
  })
}

if (STORES.includes('postgres')) {
  describe('postgres: KBIS_SHUTDOWN_TIMEOUT and a request that committed', { timeout: 120_000 }, () => {
    it('sends the answer of a committed write whose Idempotency-Key answer could not be stored before the timeout', async () => {
      const { env, key, server, url } = await serverWithTimeout('postgres')
      // Storing the key's answer (after the write committed) takes 5 s: a trigger of the test's.
      const db = await openDb({ databaseUrl: env.DATABASE_URL!, poolSize: 1 })
      try {
        await db.query(`CREATE FUNCTION slow_answer() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(5); RETURN NEW; END $$`)
        await db.query(`CREATE TRIGGER slow_answer BEFORE UPDATE OF status ON idempotency_keys FOR EACH ROW WHEN (NEW.idempotency_key = 'kept-1') EXECUTE FUNCTION slow_answer()`)
      } finally {
        await db.close()
      }
      const answer = postWithKey(`${url}/api/v1/assets`, key, 'kept-1', { asset_type_key: 'server', name: 'kept', properties: { hostname: 'kept.acme.test' } }, async () => undefined)
      // The signal once the write has committed, while its answer is being kept: the timeout (1 s)
      // comes during those 5 s. (Sent at a fixed time instead, a loaded machine had not committed
      // the write by the timeout, which then rightly cut it off without an answer.)
      while ((await namesStored(env, ['kept'])).length === 0) await new Promise((r) => setTimeout(r, 50))
      server.child.kill('SIGTERM')
      expect(await answer).toEqual({ status: 201 })
      expect(await server.exited).toBe(0)
      expect(server.lines.some((l) => l.includes('the answer of an Idempotency-Key could not be kept; the answer is sent all the same'))).toBe(true)
      expect(await namesStored(env, ['kept'])).toEqual(['kept'])
    })
  })

  describe('postgres: KBIS_SHUTDOWN_TIMEOUT bounds the shutdown', { timeout: 120_000 }, () => {
    it('cancels the statements still waiting on a lock at the timeout, commits none of them, and exits 0 within the timeout plus 2 s', async () => {
      // Setup: a server with a 1 s timeout, and another session holding the assets table.
      const { env, key, server, url } = await serverWithTimeout('postgres')
      const db = await openDb({ databaseUrl: env.DATABASE_URL!, poolSize: 2 })
      onTestFinished(() => db.close())
      const release = await holdOpen(db, 'LOCK TABLE assets IN ACCESS EXCLUSIVE MODE')
      const items = Array.from({ length: 2000 }, (_, i) => ({ asset_type_key: 'server', name: `srv-${i}`, properties: { hostname: `srv-${i}.acme.test` } }))
      const bulk = send(`${url}/api/v1/bulk/assets`, key, items)
      const single = send(`${url}/api/v1/assets`, key, { asset_type_key: 'server', name: 'one', properties: { hostname: 'one.acme.test' } })
      const waiting = async () => (await db.query<{ n: number }>(`SELECT count(*) AS n FROM pg_locks WHERE NOT granted AND relation = 'assets'::regclass`)).rows[0]!.n
      while (await waiting() < 2) await new Promise((r) => setTimeout(r, 50))

      // Action: SIGTERM while both wait for the lock, which is held 9 s more.
      const signalledAt = Date.now()
      const held = setTimeout(() => void release(), 9_000)
      server.child.kill('SIGTERM')
      const code = await server.exited
      const tookMs = Date.now() - signalledAt
      clearTimeout(held)
      await release()

      // Assert: out within 1 s + the 2 s margin (and some start-up slack), both clients cut off,
      // and nothing of theirs committed once the lock is gone.
      expect(code).toBe(0)
      expect(tookMs).toBeLessThan(4_000)
      expect(await bulk).toBeInstanceOf(Error)
      expect(await single).toBeInstanceOf(Error)
      expect(server.lines.some((l) => l.includes('2 requests still in flight after 1 s; cancelling their statements and closing their connections'))).toBe(true)
      // Each is told as cut off by the shutdown, not as a database out of reach (level 50).
      expect(server.lines.filter((l) => l.startsWith('{') && (JSON.parse(l) as { level: number }).level >= 50)).toEqual([])
      expect(server.lines.filter((l) => l.includes('request cut off by the shutdown timeout')).length).toBe(2)
      await new Promise((r) => setTimeout(r, 1_000))
      expect((await db.query<{ n: number }>('SELECT count(*) AS n FROM assets')).rows[0]!.n).toBe(0)
      expect(await waiting()).toBe(0)
    })

    it('logs the event relay cut off by the timeout as a warning, not an error', async () => {
      const { env, key, server, url } = await serverWithTimeout('postgres')
      const db = await openDb({ databaseUrl: env.DATABASE_URL!, poolSize: 2 })
      onTestFinished(() => db.close())
      // Another session holds the relay's lock: the last publication of the shutdown waits for it.
      const release = await holdOpen(db, HOLD_RELAY_LOCK)
      const res = await fetch(`${url}/api/v1/assets`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ asset_type_key: 'server', name: 'relayed', properties: { hostname: 'relayed.acme.test' } }) })
      expect(res.status).toBe(201)
      server.child.kill('SIGTERM')
      expect(await server.exited).toBe(0)
      await release()
      const relayLines = server.lines.filter((l) => l.startsWith('{') && (JSON.parse(l) as { msg: string }).msg.startsWith('event relay failed'))
      expect(relayLines.map((l) => JSON.parse(l) as { level: number; msg: string }).map(({ level, msg }) => ({ level, msg: msg.replace(/\d+ ms/, 'N ms') })))
        .toEqual([{ level: 40, msg: 'event relay failed (cut off by the shutdown timeout)' }])
      expect(server.lines.filter((l) => l.startsWith('{') && (JSON.parse(l) as { level: number }).level >= 50)).toEqual([])
      expect(server.lines.at(-1)).toBe('kbis stopped')
    })

    it('says so when what outlasts the timeout is its own work, no request in flight, and still exits 0 within it plus 2 s', async () => {
      const { env, key, server, url } = await serverWithTimeout('postgres')
      const db = await openDb({ databaseUrl: env.DATABASE_URL!, poolSize: 2 })
      onTestFinished(() => db.close())
      const read = () => fetch(`${url}/api/v1/metamodel/asset-types`, { headers: { authorization: `Bearer ${key}` } }).then((res) => res.status)
      expect(await read()).toBe(200)
      await new Promise((r) => setTimeout(r, 1_500))
      // The keys' rows held by another session (reads go on): the next batched write of
      // last_used_at, which the next request makes, waits on them.
      const release = await holdOpen(db, 'SELECT 1 FROM api_keys FOR UPDATE')
      expect(await read()).toBe(200)
      const schema = new URL(env.DATABASE_URL!).searchParams.get('options')?.match(/search_path=(\w+)/)?.[1]
      expect(schema).toBeTruthy()
      const waiting = async () => (await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE api_keys k SET last_used_at%' AND pid IN (SELECT pid FROM pg_locks WHERE relation = $1::regclass)`,
        [`${schema}.api_keys`])).rows[0]!.n
      while (await waiting() < 1) await new Promise((r) => setTimeout(r, 50))

      const signalledAt = Date.now()
      server.child.kill('SIGTERM')
      expect(await server.exited).toBe(0)
      expect(Date.now() - signalledAt).toBeLessThan(4_000)
      await release()
      expect(server.lines.filter((l) => l.includes('still in flight'))).toEqual([])
      expect(server.lines.some((l) => l.includes("shutdown work still running after 1 s, no request in flight (the last batched writes and event publication, the store's connections); cancelling its statements"))).toBe(true)
    })
  })
}
