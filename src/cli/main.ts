import { Command, InvalidArgumentError } from 'commander'
import { decimalInteger, isListenHost, loadConfig, type Config } from '../core/config.js'
import { KBIS_VERSION } from '../core/version.js'
import type { ApplyReport } from '../setup/apply.js'
import type { CliKeyRecord, CliKeyRequest } from '../keys/cli.js'
import type { ControlCommand } from './control-client.js'
import { workersArg } from './workers-arg.js'
import { STOPPED_LINE, stoppingLine } from './stopping.js'
import { registerSyncCommands } from './sync/commands.js'
import type { BackupReport } from '../store/backup.js'
import type { Db } from '../store/db.js'
import type { RunningServer } from '../server.js'
import type { ServeStore } from '../serve-store.js'
import cluster from 'node:cluster'
import { existsSync } from 'node:fs'
import path from 'node:path'

// The modules of each command are loaded by the command that needs them (`await import`): the
// server (the app and every route) takes ≈ 0.9 s to load and only `serve` needs it; `apply`,
// `keys`, `users` and `backup` load the store (open-store.ts) and the commands' side of the
// control socket (control-client.ts); `kbis import`, `kbis export` and `--help` neither.

const out = (line: string) => process.stdout.write(`${line}\n`)

function port(value: string): number {
  const n = decimalInteger(value)
  if (n === null || n > 65535) throw new InvalidArgumentError('must be a port number 0..65535')
  return n
}

function host(value: string): string {
  if (!isListenHost(value)) throw new InvalidArgumentError('must be an IP address or a host name (letters, digits, hyphens and dots)')
  return value
}

interface StoreFlags {
  dataDir?: string
}

function configFrom(flags: StoreFlags & { port?: number; host?: string; metricsPort?: number }): Config {
  return loadConfig(process.env, {
    ...(flags.port !== undefined ? { port: flags.port } : {}),
    ...(flags.metricsPort !== undefined ? { metricsPort: flags.metricsPort } : {}),
    ...(flags.host !== undefined ? { host: flags.host } : {}),
    ...(flags.dataDir !== undefined ? { dataDir: flags.dataDir } : {}),
  })
}

/**
 * Runs a store command here, or hands it to the server that owns the PGlite directory. `creates`:
 * the command may set up a new store (`apply`); keys and users name an organization, which a new
 * store does not hold: run from the wrong working directory they would leave a new `./data`
 * there, and pointed at the wrong PostgreSQL database they would give it kbis's tables.
 */
async function withStore<T>(config: Config, command: ControlCommand, body: unknown, local: (db: Db) => Promise<T>, creates = false): Promise<T> {
  if (!config.databaseUrl && !creates && !existsSync(config.dataDir)) {
    const { CommandError } = await import('../keys/cli.js')
    throw new CommandError(`no data directory ${config.dataDir} (kbis serve or kbis apply creates one; --data-dir or KBIS_DATA_DIR names another)`)
  }
  const here = async (): Promise<T> => {
    const { announceInitialize, migratedLine, openStore } = await import('../open-store.js')
    // A store of an older version is migrated by any command, as by `kbis serve`, and said so
    // (on stderr: stdout carries the command's answer, `--json` included).
    const db = await openStore(config, {
      onInitialize: announceInitialize,
      onMigrated: (applied) => process.stderr.write(`${migratedLine(applied)}\n`),
      existingOnly: !creates,
    })
    try {
      return await local(db)
    } finally {
      await db.close()
    }
  }
  if (config.databaseUrl) return here()
  const { onServerOrHere } = await import('./control-client.js')
  return onServerOrHere(config.dataDir, command, body, here)
}

/** What the entry point (bin/kbis.js) knows before this module loads. */
export interface EntryPoint {
  /** Whether SIGTERM or SIGINT came while the modules loaded; stops keeping them. */
  earlySignal?: () => boolean
}

export async function main(argv: string[], entry: EntryPoint = {}): Promise<void> {
  const program = new Command()
  // A wrong flag is one line, as every other error (docs/cli.md): `kbis: option '--port <port>'
  // argument 'abc' is invalid. …`; `kbis <command> --help` lists the options.
  program.name('kbis').description('Knowledge-base inventory service')
    .version(KBIS_VERSION, '-V, --version', 'print the version of kbis')
    .configureOutput({ outputError: (text, write) => write(`kbis: ${text.replace(/^error: /, '').trimEnd().replace(/\n+/g, ' ')}\n`) })
  // A reader that stops early (`kbis keys list | head -1`) closes standard output under a command:
  // its work is done, so it stops quietly, as Unix tools do, instead of dying on EPIPE with a
  // stack trace. Not the server, whose end would look like a normal stop to its supervisor: it
  // serves on (registerServe).
  program.hook('preAction', (_program, command) => {
    if (command.name() !== 'serve') process.stdout.on('error', quietOnClosedOutput)
  })
  // A closed standard error (progress and warnings, `kbis import … 2>&1 >rows.log | head -1`;
  // the server's `kbis serve 2>&1 | head -1`) leaves nothing to say anything on: a command goes
  // on to its end and exit code, the server serves on.
  process.stderr.on('error', () => undefined)

  registerServe(program, entry)
  registerApply(program)
  registerKeyCommands(program)
  registerUserCommands(program)
  registerBackup(program)
  registerSyncCommands(program)
  await program.parseAsync(argv)
}

/** `kbis serve`: the HTTP API, in this process or in --workers processes. */
function registerServe(program: Command, entry: EntryPoint): void {
  program
    .command('serve')
    .description('Start the HTTP API (PostgreSQL when DATABASE_URL is set, else PGlite in --data-dir)')
    .option('--port <port>', 'port to listen on (env PORT, default 8080)', port)
    .option('--host <host>', 'address to bind (env HOST, default 127.0.0.1)', host)
    .option('--data-dir <dir>', 'PGlite data directory (env KBIS_DATA_DIR, default ./data)')
    .option('--metrics-port <port>', 'serve Prometheus metrics at http://<host>:<port>/metrics (env KBIS_METRICS_PORT)', port)
    .option('--workers <n|auto>', 'n server processes on one port (auto: one per CPU); PostgreSQL only', workersArg)
    .action(async (flags: { port?: number; host?: string; dataDir?: string; metricsPort?: number; workers?: number }) => {
      const config = configFrom(flags)
      // The first signal drains; repeated ones (a terminal's Ctrl-C reaches the whole process group)
      // change nothing. One that comes while the server starts (it listens, and /readyz may be
      // asked, before the first start's key exists) lets the start finish, then drains: killed
      // there, the process exited 143 without its graceful shutdown (an outside audit). One that
      // came before the start began (while the modules loaded) ends the process at once, exit 0:
      // nothing was started, nothing is to drain.
      let server: RunningServer | null = null
      let stopping = false
      // The operator sees the stop begin and end (a worker of --workers says nothing: its primary
      // says it once for all).
      const say = (line: string) => void (cluster.isWorker || out(line))
      // A reader that stopped (`kbis serve | head -1`) closes standard output under the server: it
      // serves on, and says so once on standard error (its log goes quiet by itself).
      process.stdout.on('error', outputClosedUnderServer)
      const drain = (running: RunningServer) => running.close().then(() => {
        say(STOPPED_LINE)
        process.exit(0)
      }, () => process.exit(1))
      const stop = (signal: NodeJS.Signals) => {
        if (stopping) return
        stopping = true
        say(stoppingLine(signal, config.shutdownTimeoutSeconds))
        if (server) void drain(server)
      }
      // Listening before bin/kbis.js stops keeping signals: a signal it caught whose turn has not
      // come yet is then handed to `stop`. The other way round, Node dropped it with its last
      // listener, and the server started and ran on (an outside audit: 3 in 20 SIGTERMs sent
      // 0.1 s after the start).
      process.on('SIGINT', stop)
      process.on('SIGTERM', stop)
      const early = entry.earlySignal?.() ?? false
      if (early) stopping = true
      // A server of this process (not --workers, whose primary and workers open their own) starts
      // opening its store first and loads the app's modules while it opens: on PGlite its thread
      // boots PostgreSQL (a second of CPU) beside this one loading them (most of another), which a
      // start did one after the other. They load once the opening goes on off this thread: loading
      // holds it for most of a second at a time, and the opening needs it between its steps.
      let opening: Promise<ServeStore> | null = null
      if (!stopping && flags.workers === undefined && !cluster.isWorker) {
        const { openServeStore } = await import('../serve-store.js')
        if (!stopping) {
          const started = openServeStore(config, out)
          opening = started.store
          await started.offThread
        }
      }
      const { isWorker, runPrimary, startWorker } = await import('./workers.js')
      const { startServer } = await import('../server.js')
      if (stopping) {
        // A signal before the start (while the modules loaded): nothing is left of it, not the
        // store opened meanwhile nor a data directory made for it. One before the program
        // listened for signals (while bin/kbis.js loaded) said nothing.
        if (opening) {
          const { abandonServeStore } = await import('../serve-store.js')
          const store = await opening.catch(() => null)
          if (store) await abandonServeStore(store, config)
        }
        if (!early) say(STOPPED_LINE)
        return process.exit(0)
      }
      if (flags.workers !== undefined && !isWorker()) {
        // The primary drains its workers itself (cli/workers.ts): it listens for signals before
        // this stops, so that none falls between the two.
        const primary = runPrimary(config, flags.workers, out)
        process.off('SIGINT', stop)
        process.off('SIGTERM', stop)
        return primary
      }
      server = isWorker() ? await startWorker(config, out) : await startServer(config, out, {}, opening ?? undefined)
      if (stopping) void drain(server)
    })
}

/** `kbis apply <file>`: one organization from a YAML or JSON file. */
function registerApply(program: Command): void {
  program
    .command('apply')
    .description('Create or update one organization from a YAML or JSON file (idempotent)')
    .argument('<file>', 'organization file (.yaml, .yml or .json)')
    .option('--data-dir <dir>', 'PGlite data directory (env KBIS_DATA_DIR, default ./data)')
    .action(async (file: string, flags: StoreFlags) => {
      const { loadSetupFile } = await import('../setup/load.js')
      const { applySetup } = await import('../setup/apply.js')
      const setup = await loadSetupFile(file)
      const config = configFrom(flags)
      const report = await withStore(config, 'apply', setup, (db) => applySetup(db, setup), true)
      const r = report as ApplyReport
      out(`organization ${r.organization.key}: ${r.organization.created ? 'created' : 'updated'}; ${r.changes.length === 0 ? 'no changes' : `${r.changes.length} change(s)`}`)
      for (const change of r.changes) out(`  ${change}`)
      for (const warning of r.warnings) process.stderr.write(`kbis: warning: ${warning}\n`)
    })
}

/** `kbis keys create|list|revoke`. */
function registerKeyCommands(program: Command): void {
  const keys = program.command('keys').description('Manage API keys')
  keys
    .command('create')
    .description('Create an API key; its secret is printed once')
    .requiredOption('--org <key>', 'organization key')
    .requiredOption('--user <email>', 'owner of the key')
    .requiredOption('--name <name>', 'name of the key')
    .requiredOption('--type <type>', 'permission type: Viewer, Editor or Admin')
    .requiredOption('--roles <r1,r2>', 'comma-separated role keys')
    .option('--description <text>', 'description of the key')
    .option('--json', 'print {"id", "secret"} as JSON')
    .option('--data-dir <dir>', 'PGlite data directory (env KBIS_DATA_DIR, default ./data)')
    .action(async (flags: { org: string; user: string; name: string; type: string; roles: string; description?: string; json?: boolean; dataDir?: string }) => {
      const request: CliKeyRequest = {
        org: flags.org, user: flags.user, name: flags.name, type: flags.type,
        roles: flags.roles.split(',').map((r) => r.trim()).filter(Boolean), description: flags.description,
      }
      const { checkKeyRequest, createKeyFromCli } = await import('../keys/cli.js')
      checkKeyRequest(request)
      const key = await withStore(configFrom(flags), 'keys', request, (db) => createKeyFromCli(db, request))
      const text = flags.json ? `${JSON.stringify({ id: key.id, secret: key.secret })}\n` : `API key ${key.id} created. Secret (shown only this once):\n${key.secret}\n`
      // The secret's only copy: standard output that cannot take it (a full disk, a closed pipe) is
      // said, with the key that now exists without anyone holding its secret.
      await new Promise<void>((resolve) => process.stdout.write(text, (err) => {
        if (!err) return resolve()
        process.stderr.write(`kbis: API key ${key.id} was created, but standard output could not take its secret (${(err as NodeJS.ErrnoException).code ?? err.message}): `
          + `revoke it (kbis keys revoke ${key.id} --org ${flags.org}) and create another\n`)
        process.exit(1)
      }))
    })

  keys
    .command('list')
    .description("List an organization's API keys (never their secrets), oldest first")
    .requiredOption('--org <key>', 'organization key')
    .option('--json', 'print the keys as a JSON array (the records of GET /api-keys, plus owner_email)')
    .option('--data-dir <dir>', 'PGlite data directory (env KBIS_DATA_DIR, default ./data)')
    .action(async (flags: { org: string; json?: boolean; dataDir?: string }) => {
      const request = { org: flags.org }
      const { listKeysFromCli } = await import('../keys/cli.js')
      const list = await withStore(configFrom(flags), 'keys/list', request, (db) => listKeysFromCli(db, request))
      if (flags.json) out(JSON.stringify(list))
      else for (const line of keyTable(list)) out(line)
    })
  keys
    .command('revoke')
    .description('Delete an API key for good; it stops working at once in every server')
    .argument('<key>', "the key's id, or the start of its token (kbis_3f9a0c1d2e4b), or a whole leaked token")
    .requiredOption('--org <key>', 'organization key')
    .option('--data-dir <dir>', 'PGlite data directory (env KBIS_DATA_DIR, default ./data)')
    .action(async (key: string, flags: { org: string; dataDir?: string }) => {
      const request = { org: flags.org, key }
      const { revokeKeyFromCli, revokedKeyPrefix } = await import('../keys/cli.js')
      revokedKeyPrefix(key)
      const revoked = await withStore(configFrom(flags), 'keys/revoke', request, (db) => revokeKeyFromCli(db, request))
      out(`API key ${revoked.id} (${revoked.secret_prefix}, ${JSON.stringify(revoked.name)}) revoked`)
    })
}

/** `kbis users set-password`. */
function registerUserCommands(program: Command): void {
  const users = program.command('users').description('Manage users of the console')
  users
    .command('set-password')
    .description("Set a user's console password, read from standard input (e.g. printf '%s' \"$PW\" | kbis users set-password …), or asked for twice, hidden, on a terminal")
    .requiredOption('--org <key>', 'organization key')
    .requiredOption('--email <email>', "the user's email")
    .option('--data-dir <dir>', 'PGlite data directory (env KBIS_DATA_DIR, default ./data)')
    .action(async (flags: { org: string; email: string; dataDir?: string }) => {
      const { readPasswordFromStdin, readPasswordFromTerminal, setPasswordFromCli } = await import('../console/cli.js')
      const { hashPassword, passwordProblem } = await import('../console/passwords.js')
      const { CommandError } = await import('../keys/cli.js')
      // Typed on a terminal: asked for, hidden, twice; piped: all of standard input.
      const password = process.stdin.isTTY ? await readPasswordFromTerminal(flags.email) : await readPasswordFromStdin()
      const problem = passwordProblem(password)
      if (problem) throw new CommandError(problem)
      const request = { org: flags.org, email: flags.email, hash: await hashPassword(password) }
      const user = await withStore(configFrom(flags), 'users/set-password', request, (db) => setPasswordFromCli(db, request))
      const ended = user.sessions_ended > 0 ? `; ${user.sessions_ended} console session${user.sessions_ended === 1 ? '' : 's'} of the user signed out` : ''
      out(`password set for ${flags.email} in organization ${flags.org}${ended}`)
      // Set all the same: the organization's file decides who signs in how (kbis apply).
      const cannot = [user.enabled ? null : 'the user is disabled', user.by_password ? null : 'password is not among the user\'s sign_in_methods'].filter((r) => r !== null)
      if (cannot.length > 0) process.stderr.write(`kbis: warning: ${flags.email} cannot sign in with it until kbis apply changes that: ${cannot.join(', and ')}\n`)
    })
}

/** `kbis backup <file>`: a tar archive of the embedded data directory. */
function registerBackup(program: Command): void {
  program
    .command('backup')
    .description('Copy the embedded (PGlite) data directory to a tar archive, while the server runs or not (gzip when <file> ends in .gz or .tgz)')
    .argument('<file>', 'the archive to write (replaced when complete)')
    .option('--data-dir <dir>', 'PGlite data directory (env KBIS_DATA_DIR, default ./data)')
    .action(async (file: string, flags: { dataDir?: string }) => {
      const config = configFrom(flags)
      const { CommandError } = await import('../keys/cli.js')
      const { onServerOrHere } = await import('./control-client.js')
      const { backupClosedDataDir } = await import('../store/backup.js')
      if (config.databaseUrl) throw new CommandError('kbis backup copies an embedded (PGlite) data directory; DATABASE_URL is set: back up PostgreSQL with pg_dump or your PostgreSQL backups')
      if (!existsSync(path.join(config.dataDir, 'PG_VERSION'))) throw new CommandError(`${config.dataDir} is not a data directory of kbis (it has no PG_VERSION)`)
      // The server that owns the directory may run elsewhere (another working directory): an absolute path.
      const request = { file: path.resolve(file) }
      const started = performance.now()
      // With no server on it nothing writes to the directory: its files are copied as they are
      // (locked meanwhile), without opening the store (which would migrate an older one first).
      const report = await onServerOrHere<BackupReport>(config.dataDir, 'backup', request, () => backupClosedDataDir(config.dataDir, request.file))
      out(`backup of ${config.dataDir} written to ${report.file} (${report.bytes} bytes, ${((performance.now() - started) / 1000).toFixed(1)} s)`)
    })
}

/**
 * Control characters written as JSON escapes (`\u001b`): a key's name is anyone's text (an Editor
 * names their keys through the API), and the raw ESC of a name would drive the operator's
 * terminal (clear it, retitle it, blank its own line in the listing).
 */
function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/** `kbis keys list` without --json: one aligned line a key under a header. */
function keyTable(keys: readonly CliKeyRecord[]): string[] {
  const rows = [['ID', 'PREFIX', 'TYPE', 'OWNER', 'ROLES', 'LAST USED', 'NAME'],
    ...keys.map((k) => [k.id, k.secret_prefix, k.permission_type, printable(k.owner_email), k.role_keys.join(','), k.last_used_at ?? 'never', printable(k.name)])]
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '))
}

let outputClosedSaid = false
function outputClosedUnderServer(err: NodeJS.ErrnoException): void {
  if (outputClosedSaid) return
  outputClosedSaid = true
  process.stderr.write(`kbis: standard output: ${err.message}; serving on without it (what kbis prints there, its log included, is lost)\n`)
}

function quietOnClosedOutput(err: NodeJS.ErrnoException): void {
  if (err.code === 'EPIPE') process.exit(0)
  process.stderr.write(`kbis: standard output: ${err.message}\n`)
  process.exit(1)
}
