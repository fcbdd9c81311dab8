import { existsSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { createServer, type Server } from 'node:net'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { cliRun, cliStore, freePort, runCli, TEST_WASM, type CliProcess } from '../helpers/cli-server.js'
import { openDb, type StoreKind } from '../../src/store/db.js'

/**
 * The first `kbis serve` on an empty store creates organization `default` and prints its one
 * Admin key once (CONTRACT §12). A start that cannot listen must not create that key: it would be
 * shown to no one and never again.
 */
for (const store of STORES) {
  describe(`${store}: a first start that cannot listen`, { timeout: 240_000 }, () => {
    let taken: Server
    let port: number
    beforeAll(async () => {
      port = await freePort()
      taken = createServer()
      await new Promise<void>((resolve) => taken.listen(port, '127.0.0.1', resolve))
    })
    afterAll(async () => new Promise<void>((resolve) => taken.close(() => resolve())))

    const organizations = async (kind: StoreKind, env: Record<string, string>): Promise<string[]> => {
      const db = kind === 'postgres' ? await openDb({ databaseUrl: env.DATABASE_URL, poolSize: 1 }) : await openDb({ dataDir: env.KBIS_DATA_DIR })
      try {
        return (await db.query<{ key: string }>('SELECT key FROM organizations ORDER BY key')).rows.map((r) => r.key)
      } finally {
        await db.close()
      }
    }

    /**
     * `kbis serve` on a new store of this kind with `preload` (CommonJS) run before bin/kbis.js
     * (NODE_OPTIONS --require, next to the tests' own TEST_WASM): it watches or sends the
     * process's signals. The store and the preload are removed after `use`; a server still
     * running is killed.
     */
    async function servePreloaded(extra: string[], preload: string, use: (started: CliProcess) => Promise<void>): Promise<void> {
      const { env, drop } = await cliStore(store)
      const dir = await mkdtemp(path.join(tmpdir(), 'kbis-preload-'))
      const file = path.join(dir, 'preload.cjs')
      await writeFile(file, preload)
      try {
        const started = runCli(['serve', '--port', String(await freePort()), ...extra], { ...env, LOG_LEVEL: 'info', NODE_OPTIONS: `--require ${file} ${TEST_WASM.NODE_OPTIONS}` })
        onTestFinished(() => void (started.child.exitCode === null && started.child.kill('SIGKILL')))
        await use(started)
      } finally {
        await drop()
        await rm(dir, { recursive: true, force: true })
      }
    }

    const commands: [string, string[]][] = [['kbis serve', []]]
    if (store === 'postgres') commands.push(['kbis serve --workers 2', ['--workers', '2']])
    for (const [label, extra] of commands) {
      it(`${label}: creates nothing on a port in use, and the next start prints the Admin key`, async () => {
        const { env, drop } = await cliStore(store)
        try {
          const failed = runCli(['serve', '--port', String(port), ...extra], env)
          expect(await failed.exited).not.toBe(0)
          expect(failed.lines.join('\n')).toMatch(new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} \\(HOST or --host, PORT or --port\\): .*EADDRINUSE`))
          expect(failed.lines.some((line) => line.startsWith('Admin API key'))).toBe(false)
          // A port in use is a configuration to fix: said once, not retried worker after worker.
          expect(failed.lines.filter((line) => line.includes('cannot listen on'))).toHaveLength(1)
          expect(failed.lines.filter((line) => /starting a new one|workers died/.test(line))).toEqual([])
          expect(await organizations(store, env)).toEqual([])
          const next = runCli(['serve', '--port', String(await freePort()), ...extra], env)
          try {
            await next.waitFor(/^Admin API key \(shown only this once\): kbis_/, 120_000)
          } finally {
            next.child.kill('SIGTERM')
            await next.exited
          }
          expect(await organizations(store, env)).toEqual(['default'])
        } finally {
          await drop()
        }
      })

      if (store === 'pglite') {
        it(`${label}: removes the data directory it created when it cannot listen`, async () => {
          const { dir, drop } = await cliStore(store)
          const fresh = path.join(dir, 'fresh')
          try {
            const failed = runCli(['serve', '--port', String(port), '--data-dir', fresh], {})
            expect(await failed.exited).toBe(1)
            expect(failed.lines).toContain(`kbis: creating the PGlite data directory ${fresh}`)
            expect(failed.lines.join('\n')).toMatch(new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} .*EADDRINUSE.*; the new data directory ${fresh} was removed`))
            expect(existsSync(fresh)).toBe(false)
          } finally {
            await drop()
          }
        })

        it(`${label}: removes the data directory it created when it cannot serve its metrics`, async () => {
          const { dir, drop } = await cliStore(store)
          const fresh = path.join(dir, 'fresh')
          try {
            const failed = runCli(['serve', '--port', String(await freePort()), '--metrics-port', String(port), '--data-dir', fresh], {})
            expect(await failed.exited).toBe(1)
            expect(failed.lines.join('\n')).toMatch(new RegExp(`cannot serve metrics on 127\\.0\\.0\\.1:${port} .*EADDRINUSE.*; the new data directory ${fresh} was removed`))
            expect(failed.lines.some((line) => line.startsWith('Admin API key'))).toBe(false)
            expect(existsSync(fresh)).toBe(false)
          } finally {
            await drop()
          }
        })
      }

      it(`${label}: a SIGTERM while it starts lets the start finish (the Admin key made and printed), then drains and exits 0`, async () => {
        const { env, drop } = await cliStore(store)
        try {
          const started = runCli(['serve', '--port', String(await freePort()), ...extra], { ...env, LOG_LEVEL: 'info' })
          // A failing assertion must not leave the server running over a store dropped under it.
          onTestFinished(() => void (started.child.exitCode === null && started.child.kill('SIGKILL')))
          // pino's line comes when the server listens, before the first start's key is made.
          await started.waitFor(/Server listening at/, 120_000)
          started.child.kill('SIGTERM')
          expect(await started.exited).toBe(0)
          expect(started.lines.some((line) => /^Admin API key \(shown only this once\): kbis_/.test(line))).toBe(true)
          expect(await organizations(store, env)).toEqual(['default'])
        } finally {
          await drop()
        }
      })

      it(`${label}: a SIGTERM caught while the program loads but not yet handled when it starts listening itself is not lost`, async () => {
        // bin/kbis.js keeps a signal that comes while the modules load and stops keeping them once
        // the serve command listens. A signal already caught then, whose turn had not come, was
        // dropped with the last listener: the server started and ran on. Sent here at that moment.
        await servePreloaded(extra, `const off = process.removeListener; let sent = false
process.removeListener = process.off = function (event, listener) {
  if (event === 'SIGTERM' && !sent) { sent = true; process.kill(process.pid, 'SIGTERM') }
  return off.call(this, event, listener)
}
`, async (started) => {
          expect([await exitWithin(started, 30_000), started.child.signalCode]).toEqual([0, null])
          expect(started.lines.filter((line) => /listening on|Admin API key/.test(line))).toEqual([])
        })
      })

      if (extra.includes('--workers')) {
        it(`${label}: a SIGTERM as the primary takes signals over from the command lets the start finish, then drains, exit 0`, async () => {
          // Sent as the serve command stops listening (its second SIGTERM listener removed, after
          // bin/kbis.js's): the primary listened only once its store was open, and a signal in
          // between was lost, or ended it with 143 while it migrated.
          await servePreloaded(extra, `const off = process.removeListener; let removed = 0
process.removeListener = process.off = function (event, listener) {
  if (event === 'SIGTERM' && ++removed === 2 && require('node:cluster').isPrimary) process.kill(process.pid, 'SIGTERM')
  return off.call(this, event, listener)
}
`, async (started) => {
            expect([await exitWithin(started, 60_000), started.child.signalCode]).toEqual([0, null])
            expect(started.lines.filter((line) => /^kbis: SIGTERM received|^kbis stopped$|^Admin API key/.test(line)).map((line) => line.replace(/ \(.*$/, '')))
              .toEqual(['kbis: SIGTERM received; stopping', 'Admin API key', 'kbis stopped'])
          })
        }, 90_000)
      }

      it(`${label}: a SIGTERM before the start began (while its modules load) ends it at once, exit 0, nothing started`, async () => {
        // Says on standard error when the process first listens for SIGTERM (a module preloaded
        // before bin/kbis.js): the moment from which a signal is the program's to handle. Before
        // it, Node's default ends the process (143) and no program can help it.
        await servePreloaded(extra, `const on = process.on; let told = false
process.on = function (event, listener) {
  const result = on.call(this, event, listener)
  if (event === 'SIGTERM' && !told) { told = true; require('node:fs').writeSync(2, 'listening for SIGTERM\\n') }
  return result
}
`, async (started) => {
          await started.waitFor(/^listening for SIGTERM$/, 60_000)
          started.child.kill('SIGTERM')
          expect([await started.exited, started.child.signalCode, started.lines]).toEqual([0, null, ['listening for SIGTERM']])
        })
      })

      if (store === 'pglite') {
        it(`${label}: a SIGTERM while it creates the data directory, before the app's modules load, ends the start: nothing of it is left`, async () => {
          // The store starts opening while the app's modules load (cli/main.ts): a signal then
          // comes before the start, which does not happen; the new directory is closed and removed.
          const dir = await mkdtemp(path.join(tmpdir(), 'kbis-opening-'))
          const dataDir = path.join(dir, 'data')
          const preload = path.join(dir, 'preload.cjs')
          await writeFile(preload, `const write = process.stderr.write
process.stderr.write = function (chunk, ...rest) {
  if (String(chunk).startsWith('kbis: creating the PGlite data directory')) process.kill(process.pid, 'SIGTERM')
  return write.call(this, chunk, ...rest)
}
`)
          try {
            const started = runCli(['serve', '--port', String(await freePort()), ...extra], { KBIS_DATA_DIR: dataDir, LOG_LEVEL: 'info', NODE_OPTIONS: `--require ${preload} ${TEST_WASM.NODE_OPTIONS}` })
            onTestFinished(() => void (started.child.exitCode === null && started.child.kill('SIGKILL')))
            expect([await exitWithin(started, 60_000), started.child.signalCode]).toEqual([0, null])
            expect(started.lines.map((line) => line.replace(/ \(.*$/, ''))).toEqual([
              `kbis: creating the PGlite data directory ${dataDir}`, 'kbis: SIGTERM received; stopping', 'kbis stopped',
            ])
            expect(existsSync(dataDir)).toBe(false)
          } finally {
            await rm(dir, { recursive: true, force: true })
          }
        })
      }

      it(`${label}: says when webhooks made before migration 0019 still get every event of their organization`, async () => {
        const { env, yaml, drop } = await cliStore(store)
        try {
          expect((await cliRun(['apply', yaml], env)).code).toBe(0)
          // Two webhooks as such a version left them (no role_keys); one made since (role_keys set).
          const db = store === 'postgres' ? await openDb({ databaseUrl: env.DATABASE_URL, poolSize: 1 }) : await openDb({ dataDir: env.KBIS_DATA_DIR })
          try {
            await db.query(`INSERT INTO webhooks (org_id, id, url, event_types, secret, role_keys)
              SELECT id, gen_random_uuid(), 'https://hooks.example.com/' || n, '{*}', 'whsec_x', CASE WHEN n < 3 THEN NULL ELSE '{all}'::text[] END
              FROM organizations CROSS JOIN generate_series(1, 3) AS n WHERE key = 'acme'`)
          } finally {
            await db.close()
          }
          const started = runCli(['serve', '--port', String(await freePort()), ...extra], env)
          onTestFinished(() => void (started.child.exitCode === null && started.child.kill('SIGKILL')))
          await started.waitFor(/made before webhooks were scoped/, 120_000)
          started.child.kill('SIGTERM')
          expect(await started.exited).toBe(0)
          expect(started.lines.filter((line) => line.includes('webhooks were scoped'))).toEqual([
            'kbis: 2 webhooks made before webhooks were scoped by roles (migration 0019) receive every event of their organization, of assets hidden from the key that made them too, until a PATCH sets their url (docs/webhooks.md)',
          ])
        } finally {
          await drop()
        }
      })

      it(`${label}: names the setting when the metrics port is in use`, async () => {
        const { env, drop } = await cliStore(store)
        try {
          const failed = runCli(['serve', '--port', String(await freePort()), '--metrics-port', String(port), ...extra], env)
          expect(await failed.exited).not.toBe(0)
          const said = failed.lines.filter((line) => line.includes('cannot serve metrics'))
          expect(said).toHaveLength(1)
          expect(said[0]).toMatch(new RegExp(`^kbis: cannot serve metrics on 127\\.0\\.0\\.1:${port} \\(KBIS_METRICS_PORT or --metrics-port\\): .*EADDRINUSE`))
        } finally {
          await drop()
        }
      })

      it(`${label}: refuses the API's own port as the metrics port in one line, before anything listens`, async () => {
        const { env, drop } = await cliStore(store)
        try {
          const api = String(await freePort())
          const failed = runCli(['serve', '--port', api, '--metrics-port', api, ...extra], { ...env, LOG_LEVEL: 'info' })
          expect(await failed.exited).toBe(1)
          expect(failed.lines).toEqual([`kbis: KBIS_METRICS_PORT (or --metrics-port): ${api} is the API's port (PORT or --port); metrics need a port of their own`])
        } finally {
          await drop()
        }
      })
    }
  })
}

/** The process's exit code, or a sentence saying it still runs after `ms`. */
async function exitWithin(started: CliProcess, ms: number): Promise<number | null | string> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<string>((resolve) => { timer = setTimeout(() => resolve(`still running after ${ms / 1000} s`), ms) })
  try {
    return await Promise.race([started.exited, late])
  } finally {
    clearTimeout(timer)
  }
}
