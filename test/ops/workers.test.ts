import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import pg from 'pg'
import { ACME_YAML, cli, freePort, postgresSchema, runCli, type CliProcess } from '../helpers/cli-server.js'
import { HOLD_RELAY_LOCK } from '../../src/events/relay.js'

const QUOTA = 30

describe('kbis serve --workers on PGlite', () => {
  it('refuses with one clear line: the embedded store belongs to one process', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-workers-'))
    const run = runCli(['serve', '--workers', '2', '--port', '0', '--data-dir', dir])
    expect(await run.exited).toBe(1)
    expect(run.lines).toEqual(['kbis: --workers needs PostgreSQL (set DATABASE_URL): the embedded PGlite store belongs to one process'])
    rmSync(dir, { recursive: true, force: true })
  })
})

describe.runIf(STORES.includes('postgres'))('postgres: kbis serve --workers 2', { timeout: 180_000 }, () => {
  let dir: string
  let env: Record<string, string>
  let drop: () => Promise<void>
  let storeUrl: string
  let server: CliProcess
  let url: string
  let metricsUrl: string
  let key: string

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-workers-'))
    writeFileSync(path.join(dir, 'acme.yaml'), ACME_YAML.replace('RATE', String(QUOTA)))
    const schema = await postgresSchema()
    drop = schema.drop
    storeUrl = schema.url
    env = { DATABASE_URL: schema.url, LOG_LEVEL: 'info' }
    const [port, metricsPort] = [await freePort(), await freePort()]
    server = runCli(['serve', '--workers', '2', '--port', String(port), '--metrics-port', String(metricsPort)], env)
    url = (await server.waitFor(/^kbis listening on (\S+) \(2 workers; store: PostgreSQL\)$/, 120_000))[1]!
    metricsUrl = (await server.waitFor(/^metrics on (\S+)$/))[1]!
    await server.waitFor(/^Admin API key \(shown only this once\): kbis_/)
    await cli(['apply', path.join(dir, 'acme.yaml')], env)
    key = (JSON.parse((await cli(['keys', 'create', '--org', 'acme', '--user', 'owner@acme.test', '--name', 'w', '--type', 'Admin', '--roles', 'all', '--json'], env)).at(-1)!) as { secret: string }).secret
  })
  afterAll(async () => {
    if (server.child.exitCode === null) server.child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
    await drop()
  })

  const workerPids = () => server.lines.map((l) => /^worker (\d+) listening$/.exec(l)?.[1]).filter((p): p is string => p !== undefined).map(Number)
  const requestLines = () => server.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request completed')

  it('bootstraps once (one Admin key printed), with two workers on one port, said once both listen', () => {
    expect(server.lines.filter((l) => l.startsWith('Admin API key'))).toHaveLength(1)
    expect(new Set(workerPids()).size).toBe(2)
    // One `kbis listening` line, the primary's, after both workers' (none of the workers' own).
    const announced = server.lines.filter((l) => l.startsWith('kbis listening on '))
    expect(announced).toEqual([expect.stringMatching(/\(2 workers; store: PostgreSQL\)$/)])
    const at = server.lines.indexOf(announced[0]!)
    expect(server.lines.slice(0, at).filter((l) => /^worker \d+ listening$/.test(l))).toHaveLength(2)
  })

  it('migrates the new database once, in the primary, and says which migrations it applied', () => {
    const migrations = readdirSync('src/store/migrations').filter((f) => /^\d{4}_.+\.sql$/.test(f)).sort()
    expect(migrations.length).toBeGreaterThan(5)
    expect(server.lines.filter((l) => l.includes('schema migration'))).toEqual([
      `kbis: applied ${migrations.length} schema migrations (${migrations[0]} … ${migrations.at(-1)})`,
    ])
  })

  it('shares one organization quota exactly between the workers', async () => {
    const get = () => fetch(`${url}/api/v1/assets?page[size]=1`, { headers: { authorization: `Bearer ${key}`, connection: 'close' } }).then((r) => r.status)
    const servedLines = () => requestLines().filter((l) => l.route === '/api/v1/assets')
    // A request's log line is written after its answer is sent: wait for the last ones to arrive.
    const logged = async (n: number) => {
      for (let waited = 0; servedLines().length < n && waited < 10_000; waited += 50) await new Promise((r) => setTimeout(r, 50))
    }
    // Concurrent requests on new connections, in waves until both workers have served some: each
    // worker accepts connections from the shared socket when it is free (SCHED_NONE), and a
    // machine under load can hand one wave to one worker only.
    const statuses: number[] = []
    while (statuses.length < QUOTA && new Set(servedLines().map((l) => l.pid)).size < 2) {
      statuses.push(...(await Promise.all(Array.from({ length: 6 }, get))))
      await logged(statuses.length)
    }
    statuses.push(...(await Promise.all(Array.from({ length: QUOTA + 10 - statuses.length }, get))))
    expect(statuses.filter((s) => s === 200)).toHaveLength(QUOTA)
    expect(statuses.filter((s) => s === 429)).toHaveLength(10)
    await logged(QUOTA + 10)
    const served = servedLines()
    expect(served).toHaveLength(QUOTA + 10)
    expect(new Set(served.map((l) => l.pid)).size).toBe(2)
    // The primary's /metrics sums the workers' series.
    const text = await (await fetch(metricsUrl)).text()
    expect(text).toMatch(new RegExp(`^http_request_duration_seconds_count\\{method="GET",route="/api/v1/assets",status_code="200"\\} ${QUOTA}$`, 'm'))
    expect(text).toMatch(/^kbis_rate_limited_total 10$/m)
    // Which build runs, once (1, not the number of workers).
    expect(text).toMatch(/^kbis_build_info\{version="\d+\.\d+\.\d+[^"]*",nodejs="[\d.]+"\} 1$/m)
  })

  it('shows the events pending in the store once, not once per worker', async () => {
    const pending = async () => /^kbis_events_pending (\d+)$/m.exec(await (await fetch(metricsUrl)).text())?.[1]
    const [writer, locker] = [new pg.Client(storeUrl), new pg.Client(storeUrl)]
    await Promise.all([writer.connect(), locker.connect()])
    try {
      // While this holds the relays' lock, no worker stamps: both count the same three events.
      await locker.query('BEGIN')
      await locker.query(HOLD_RELAY_LOCK)
      await writer.query(
        `INSERT INTO events (org_id, id, type, subject, time, data)
         SELECT o.id, gen_random_uuid(), 'asset.created', 'assets/' || gen_random_uuid(), now(), '{}'::jsonb
         FROM organizations o, generate_series(1, 3) WHERE o.key = 'acme'`)
      expect(await pending()).toBe('3')
    } finally {
      await locker.query('ROLLBACK')
      await Promise.all([writer.end(), locker.end()])
    }
    // Released: a worker's poll stamps them.
    await expect.poll(pending, { timeout: 10_000 }).toBe('0')
    // The default process series, the start time once (the primary's: the aggregation omits the workers').
    const text = await (await fetch(metricsUrl)).text()
    expect(text.match(/^process_start_time_seconds \d+$/gm)).toHaveLength(1)
    expect(text).toMatch(/^process_cpu_seconds_total \d/m)
  })

  it('replaces a worker that dies', async () => {
    const [victim] = workerPids()
    process.kill(victim!, 'SIGKILL')
    await server.waitFor(new RegExp(`^worker ${victim} exited \\(SIGKILL\\); starting a new one$`))
    await server.waitFor(/^worker (\d+) listening$/)
    await expect.poll(() => new Set(workerPids()).size, { timeout: 60_000 }).toBe(3)
    const replacement = workerPids().at(-1)!
    expect(() => process.kill(replacement, 0)).not.toThrow()
    const statuses = await Promise.all(Array.from({ length: 10 }, () => fetch(`${url}/healthz`, { headers: { connection: 'close' } }).then((r) => r.status)))
    expect(statuses).toEqual(Array(10).fill(200))
  })

  it('answers every connection while a worker dies, none left waiting for good', async () => {
    // A worker stopped (SIGSTOP) while connections arrive, then killed: with the cluster's
    // round-robin hand-off, the one connection the primary had handed it was never answered.
    const alive = workerPids().filter((pid) => { try { process.kill(pid, 0); return true } catch { return false } })
    const victim = alive[0]!
    const listening = server.lines.length
    process.kill(victim, 'SIGSTOP')
    const answers = Array.from({ length: 6 }, () => fetch(`${url}/healthz`, { headers: { connection: 'close' }, signal: AbortSignal.timeout(8_000) })
      .then((r) => r.status, (err: Error) => err.name))
    await new Promise((r) => setTimeout(r, 300))
    process.kill(victim, 'SIGKILL')
    expect(await Promise.all(answers)).toEqual(Array(6).fill(200))
    await server.waitFor(new RegExp(`^worker ${victim} exited \\(SIGKILL\\); starting a new one$`))
    await expect.poll(() => server.lines.slice(listening).some((l) => /^worker \d+ listening$/.test(l)), { timeout: 60_000 }).toBe(true)
  })

  it('serves /metrics while a worker does not answer (stopped) and right after one dies', async () => {
    const series = /^http_request_duration_seconds_count\{method="GET",route="\/healthz",status_code="200"\} (\d+)$/m
    const scrape = async () => {
      const res = await fetch(metricsUrl, { signal: AbortSignal.timeout(20_000) })
      return { status: res.status, text: await res.text() }
    }
    await expect.poll(async () => (await scrape()).text.startsWith('# kbis:'), { timeout: 30_000 }).toBe(false)
    const before = await scrape()
    expect(before.status).toBe(200)
    const alive = workerPids().filter((pid) => { try { process.kill(pid, 0); return true } catch { return false } })
    expect(alive).toHaveLength(2)
    process.kill(alive[0]!, 'SIGSTOP')
    try {
      // The stopped worker counts with its last series: the sums do not fall (no counter reset).
      const during = await scrape()
      expect(during.status).toBe(200)
      expect(during.text.split('\n')[0]).toBe('# kbis: 1 of 2 workers did not answer within 2 s (1 counted with the series it gave last)')
      expect(series.exec(during.text)?.[1]).toBe(series.exec(before.text)?.[1])
    } finally {
      process.kill(alive[0]!, 'SIGCONT')
    }
    const listening = server.lines.length
    process.kill(alive[1]!, 'SIGKILL')
    const afterDeath = await scrape()
    expect(afterDeath.status).toBe(200)
    expect(afterDeath.text).toMatch(/^process_cpu_seconds_total \d/m)
    await server.waitFor(new RegExp(`^worker ${alive[1]} exited \\(SIGKILL\\); starting a new one$`))
    await expect.poll(() => server.lines.slice(listening).some((l) => /^worker \d+ listening$/.test(l)), { timeout: 60_000 }).toBe(true)
    await expect.poll(async () => (await scrape()).text.startsWith('# kbis:'), { timeout: 30_000 }).toBe(false)
  })

  it('drains every worker on SIGTERM and exits 0', async () => {
    const alive = workerPids().slice(1)
    server.child.kill('SIGTERM')
    expect(await server.exited).toBe(0)
    for (const pid of alive) expect(() => process.kill(pid, 0)).toThrow()
    // Said once by the primary, not by every worker.
    await server.waitFor(/^kbis stopped$/, 5_000)
    expect(server.lines.filter((l) => l.startsWith('kbis: SIGTERM received; stopping'))).toHaveLength(1)
    expect(server.lines.filter((l) => l === 'kbis stopped')).toHaveLength(1)
    expect(server.lines.at(-1)).toBe('kbis stopped')
  })
})
