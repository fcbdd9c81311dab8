import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { createInterface } from 'node:readline'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { openDb, type StoreKind } from '../../src/store/db.js'
import { templateDataDir } from './pglite-template.js'
import { ALLOCATOR_TUNABLES } from '../../src/ops/heap.js'

/**
 * The CLI as users run it: the `kbis` command (bin/kbis, which runs bin/kbis.js with node) over
 * dist/. The run's global setup rebuilds dist/ first when a source is newer than the last build
 * (scripts/build-if-stale.mjs), so a test never runs stale code; a process then starts in about
 * half the time `tsx` from source takes. The launcher execs node, so the child's pid is the
 * server's.
 */
export const KBIS_BIN = path.resolve('bin/kbis')

export interface CliProcess {
  child: ChildProcess
  /** Every line written so far, stdout and stderr. */
  lines: string[]
  /** Resolves with the first line (already written or to come) that matches. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>
  /** Its exit code, once it has exited and its output has been read to the end. */
  exited: Promise<number | null>
}

export interface CliRun {
  code: number | null
  stdout: string
  stderr: string
}

/**
 * Runs the `kbis` CLI to its end with PATH and HOME and `env` only (no DATABASE_URL, KBIS_URL
 * or KBIS_API_KEY of the test's own environment); `input`, when given, is its standard input.
 */
export function runKbis(args: string[], options: { env?: Record<string, string>; cwd?: string; input?: string } = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = spawn(KBIS_BIN, args, { cwd: options.cwd, env: { PATH: process.env.PATH, HOME: process.env.HOME, ...options.env } })
    if (options.input !== undefined) child.stdin.end(options.input)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/**
 * The allocator setting of the `kbis serve` processes the tests start: decision 0020's alone, as
 * an operator's own GLIBC_TUNABLES (bin/kbis keeps it). bin/kbis's own setting on the embedded
 * store (decision 0026) gives blocks of 32 kB and more mappings of their own, which doubles the
 * CPU time of a start on PGlite (≈ 2.3 → 5 s on a slow machine, most of it in the kernel): the
 * memory it saves is what test/ops/heap.test.ts measures, with the launcher's setting
 * (`GLIBC_TUNABLES: undefined` starts a server as users start it).
 */
const TEST_ALLOCATOR = { GLIBC_TUNABLES: ALLOCATOR_TUNABLES }

/**
 * The V8 setting of the kbis processes the tests start: PGlite's WebAssembly in baseline code only
 * (test/helpers/liftoff-only.mjs), which the processes of `--workers` inherit. A test that measures
 * a server's memory or time starts it as users do (`NODE_OPTIONS: undefined`).
 */
export const TEST_WASM = { NODE_OPTIONS: `--import ${JSON.stringify(pathToFileURL(path.resolve('test/helpers/liftoff-only.mjs')).href)}` }

/**
 * Both settings, for every kbis process a test starts that does not measure memory or time (a
 * spawn without them ran PGlite's WebAssembly optimized: ≈ 2 s more CPU per `kbis serve`).
 */
export const TEST_KBIS_SETTINGS = { ...TEST_ALLOCATOR, ...TEST_WASM }

/** Runs the `kbis` CLI (bin/kbis) in its own process (`kbis serve`, `kbis apply`, …). */
export function runCli(args: string[], env: Record<string, string | undefined> = {}): CliProcess {
  const child = spawn(KBIS_BIN, args, {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: '', LOG_LEVEL: 'warn', ...TEST_KBIS_SETTINGS, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const lines: string[] = []
  const waiters: { pattern: RegExp; resolve(m: RegExpExecArray): void }[] = []
  const onLine = (line: string) => {
    lines.push(line)
    for (const w of [...waiters]) {
      const m = w.pattern.exec(line)
      if (m) { waiters.splice(waiters.indexOf(w), 1); w.resolve(m) }
    }
  }
  createInterface({ input: child.stdout! }).on('line', onLine)
  createInterface({ input: child.stderr! }).on('line', onLine)
  // Exited once its output is read to the end too ('close': the process ended and its pipes were
  // drained), else a last line (`kbis stopped`) may still be on its way when a test reads `lines`.
  // Processes it started that outlive it (workers killed with their primary) may hold the pipes
  // open: then its exit plus a bound is enough.
  const exited = new Promise<number | null>((resolve) => {
    child.once('close', (code) => resolve(code))
    child.once('exit', (code) => void setTimeout(() => resolve(code), 5_000).unref())
  })
  return {
    child,
    lines,
    exited,
    waitFor(pattern, timeoutMs = 60_000) {
      for (const line of lines) {
        const m = pattern.exec(line)
        if (m) return Promise.resolve(m)
      }
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no line matching ${pattern} in ${timeoutMs} ms:\n${lines.join('\n')}`)), timeoutMs)
        waiters.push({ pattern, resolve: (m) => { clearTimeout(timer); resolve(m) } })
      })
    },
  }
}

/** Runs a CLI command to its end: its exit code and every line it wrote (stdout and stderr). */
export async function cliRun(args: string[], env: Record<string, string | undefined> = {}): Promise<{ code: number | null; lines: string[] }> {
  const run = runCli(args, env)
  const code = await run.exited
  return { code, lines: run.lines }
}

/** Runs a CLI command to its end; rejects unless it exits 0. */
export async function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<string[]> {
  const { code, lines } = await cliRun(args, env)
  if (code !== 0) throw new Error(`kbis ${args.join(' ')} exited ${code}:\n${lines.join('\n')}`)
  return lines
}

/** A free TCP port on 127.0.0.1 (for servers that cannot report theirs, like a cluster). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/** A fresh schema on the test PostgreSQL, and a DATABASE_URL whose connections use it. */
export async function postgresSchema(): Promise<{ url: string; schema: string; drop(): Promise<void> }> {
  const base = process.env.TEST_DATABASE_URL!
  const schema = `t_${randomBytes(6).toString('hex')}`
  const admin = await openDb({ databaseUrl: base, poolSize: 1 })
  await admin.query(`CREATE SCHEMA ${schema}`)
  await admin.close()
  const url = new URL(base)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return {
    url: url.href,
    schema,
    async drop() {
      const cleanup = await openDb({ databaseUrl: base, poolSize: 1 })
      await cleanup.query(`DROP SCHEMA ${schema} CASCADE`)
      await cleanup.close()
    },
  }
}

/**
 * A fresh store of `kind` for CLI processes, and a temporary directory holding `acme.yaml`
 * (ACME_YAML, rate limit `rate`): `env` names the store to them, a new schema on the test
 * PostgreSQL (DATABASE_URL) or a PGlite data directory in `dir` copied from the migrated template
 * (KBIS_DATA_DIR). `drop` removes both.
 */
export async function cliStore(kind: StoreKind, rate = 100_000): Promise<{ dir: string; yaml: string; env: Record<string, string>; drop(): Promise<void> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-cli-'))
  const yaml = path.join(dir, 'acme.yaml')
  writeFileSync(yaml, ACME_YAML.replace('RATE', String(rate)))
  const pg = kind === 'postgres' ? await postgresSchema() : null
  return {
    dir,
    yaml,
    env: pg ? { DATABASE_URL: pg.url } : { KBIS_DATA_DIR: await templateDataDir(path.join(dir, 'data')) },
    async drop() {
      rmSync(dir, { recursive: true, force: true })
      await pg?.drop()
    },
  }
}

export const ACME_YAML = `
organization: {key: acme, name: Acme, rate_limit: {requests: RATE, window_seconds: 86400}}
access_domains: [{key: it, name: IT}]
roles:
  - {key: all, name: Everything, grants: [{access_domain_key: "*", asset_type_keys: ["*"], level: edit_access_domain}]}
users: [{email: owner@acme.test, name: Owner, permission_type: Owner, role_keys: [all], sign_in_methods: [password]}]
metamodel:
  asset_types:
    - key: server
      name: Server
      properties:
        - {key: hostname, name: Hostname, type: unique_key, required: true}
        - {key: environment, type: select, options: [dev, prod]}
`
