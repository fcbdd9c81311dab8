import type { FastifyInstance } from 'fastify'
import { buildApp } from './app.js'
import type { Config } from './core/config.js'
import type { Db } from './store/db.js'
import { abandonServeStore, openServeStore, type ServeStore } from './serve-store.js'
import { DEFAULT_OWNER, ensureDefaultOrganization } from './setup/bootstrap.js'
import { storeNewKey } from './keys/create.js'
import { operatorOrigin } from './outbox/write.js'
import { startControlSocket, type ControlSocket } from './cli/control.js'
import { startMetricsServer } from './ops/metrics-server.js'
import { logStream, logWritten, type LogStream } from './ops/log-stream.js'
import type { Server } from 'node:http'
import { countUnscopedWebhooks } from './webhooks/sql.js'

export interface RunningServer {
  app: FastifyInstance
  db: Db
  url: string
  close(): Promise<void>
}


/**
 * On an empty store: organization `default`, its Owner, role `all`, and one Admin key whose
 * secret is returned here and printed once by `kbis serve`.
 */
export async function bootstrap(db: Db): Promise<string | null> {
  let secret: string | null = null
  await ensureDefaultOrganization(db, async (tx, created) => {
    const key = await storeNewKey(tx, operatorOrigin(created.orgId), {
      name: 'Initial admin key',
      description: 'Created by the first `kbis serve` on an empty store',
      permission_type: 'Admin',
      role_keys: ['all'],
      owner_user_id: created.ownerUserId,
    })
    secret = key.secret
  })
  return secret
}

export interface StartOptions {
  /** First-start bootstrap (organization `default`, the Admin key); off in the workers of `--workers`, whose primary did it. */
  bootstrap?: boolean
  /** Serve `--metrics-port` here; off in the workers of `--workers` (the primary serves their sum). */
  metrics?: boolean
  /** Print `kbis listening on …`; off in the workers of `--workers`, whose primary says it once for all. */
  announce?: boolean
}

/** Whether `err` is the listening socket's own failure (an address in use or not here, a port refused), not the store's. */
function isSocketError(err: Error): boolean {
  const { code, syscall } = err as NodeJS.ErrnoException
  return syscall === 'listen' || syscall === 'bind' || syscall === 'getaddrinfo' || code === 'ERR_SOCKET_BAD_PORT'
}

/**
 * config → store → app → listen (and, on PGlite, the control socket the CLI talks to). `store`:
 * the store already being opened (serve-store.ts) by a command that loaded this module meanwhile.
 */
export async function startServer(config: Config, print: (line: string) => void, options: StartOptions = {}, store?: Promise<ServeStore>): Promise<RunningServer> {
  const opened = await (store ?? openServeStore(config, print).store)
  const { db, created } = opened
  // JSON lines on stdout (pino). The Admin key is printed through `print`, never into this stream.
  const log = logStream()
  const app = await buildApp({ db, config, logger: { level: config.logLevel, redact: ['req.headers.authorization', 'req.headers.cookie'], stream: log } })
  // Not ready (/readyz 503) until the first start's organization and key exist and the CLI's
  // control socket is up: a load balancer or script waiting for it finds the server whole.
  app.lifecycle.starting = true
  // A start that cannot listen (a port in use, a typo) stops here, before the first start's
  // organization and key, and does not leave behind the data directory it created for nothing.
  const giveUp = async (err: Error): Promise<never> => {
    await app.close().catch(() => undefined)
    await abandonServeStore(opened, config)
    throw new Error(`${err.message}${created ? `; the new data directory ${config.dataDir} was removed` : ''}`)
  }
  // app.listen also runs the onReady hooks, which read the store: only a socket's failure is the address's.
  await app.listen({ port: config.port, host: config.host })
    .catch((err: Error) => giveUp(isSocketError(err) ? new Error(`cannot listen on ${config.host}:${config.port} (HOST or --host, PORT or --port): ${err.message}`) : err))
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.port
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`
  const metricsServer = options.metrics !== false && config.metricsPort !== undefined
    ? await startMetricsServer(config.metricsPort, config.host, {
      onError: (err, requestId) => app.log.error({ err, request_id: requestId }, 'metrics could not be collected'),
    }).catch(giveUp)
    : null
  // Once the server listens: a start that fails before (a port in use) must not create the
  // Admin key, which is shown only once and would be lost with it.
  const secret = options.bootstrap === false ? null : await bootstrap(db)
  // Then the control socket the CLI talks to on PGlite: a command waiting for this server (`kbis
  // serve & kbis apply` in a script) runs after the first start's organization exists, not before
  // it, where an organization it created would leave the first start without its Admin key.
  const control: ControlSocket | null = db.kind === 'pglite' ? await startControlSocket(config.dataDir, db) : null
  app.lifecycle.starting = false
  if (options.announce !== false) print(`kbis listening on ${url} (store: ${db.kind === 'pglite' ? `PGlite in ${config.dataDir}` : 'PostgreSQL'})`)
  if (metricsServer) print(`metrics on ${metricsServer.url}`)
  if (secret) printAdminKey(print, secret)
  if (options.bootstrap !== false) {
    const unscoped = await unscopedWebhooksLine(db)
    if (unscoped !== null) print(unscoped)
  }
  return {
    app,
    db,
    url,
    close: () => shutDown({ app, db, control, metricsServer, log, timeoutSeconds: config.shutdownTimeoutSeconds }),
  }
}

/**
 * What a start says of the webhooks made before migration 0019, which get every event of their
 * organization until a PATCH sets their url (docs/webhooks.md); null when there are none. An
 * upgraded store would otherwise keep them unscoped without a word.
 */
export async function unscopedWebhooksLine(db: Db): Promise<string | null> {
  const n = await countUnscopedWebhooks(db)
  if (n === 0) return null
  const [webhooks, receive, their, them] = n === 1 ? ['webhook', 'receives', 'its', 'it'] : ['webhooks', 'receive', 'their', 'them']
  return `kbis: ${n} ${webhooks} made before webhooks were scoped by roles (migration 0019) ${receive} every event of ${their} organization, `
    + `of assets hidden from the key that made ${them} too, until a PATCH sets ${their} url (docs/webhooks.md)`
}

/**
 * The first start's Admin key, on standard output (`print`). Nothing shows it again: when standard
 * output could not take it (a reader that stopped, `kbis serve | head -1`) or was closed when the
 * process started (`kbis serve >&-`, where Node writes to /dev/null in its place: bin/kbis tells
 * with KBIS_STDOUT_CLOSED), standard error says how to make another.
 */
export function printAdminKey(print: (line: string) => void, secret: string): void {
  print('Created organization "default" with an Owner user and the role "all".')
  print(`Admin API key (shown only this once): ${secret}`)
  // Called back once the lines before it are written, with the error of a closed output.
  process.stdout.write('', (err) => {
    if (err || process.env.KBIS_STDOUT_CLOSED === '1') process.stderr.write(`${ADMIN_KEY_LOST_LINE}\n`)
  })
}

/** What a start says when its Admin key could not be shown. */
const ADMIN_KEY_LOST_LINE = `kbis: the Admin key could not be written to standard output; make another with \`kbis keys create --org default --user ${DEFAULT_OWNER.email} --name admin --type Admin --roles all\` (same --data-dir or DATABASE_URL)`

/**
 * After `KBIS_SHUTDOWN_TIMEOUT` a shutdown stops waiting: what still runs gets this long to wind
 * down (cancelled statements to roll back, onClose work, the store to close) before the process
 * exits regardless.
 */
const SHUTDOWN_MARGIN_MS = 2_000

/**
 * Graceful shutdown (CONTRACT §17): new requests get 503 (draining), the listener stops, requests
 * in flight finish, then the app's onClose work (batched last_used_at writes, `onShutdown`
 * callbacks), and the store closes last. `timeoutSeconds` bounds it: then the connections still
 * busy are closed and their transactions stopped (Db.interrupt: they roll back, nothing a
 * cut-off client sent commits later), but for requests whose transaction was committing, which
 * still send their answer (core/cut-off.ts); SHUTDOWN_MARGIN_MS after that it resolves whatever
 * still runs, for the process to exit. On PGlite a statement cannot be cancelled: it runs to its
 * end, then its transaction rolls back; exiting with one of its transactions open is a crash to
 * it, and its write-ahead log makes the next start roll that transaction back.
 */
async function shutDown(parts: { app: FastifyInstance; db: Db; control: ControlSocket | null; metricsServer: Server | null; log: LogStream; timeoutSeconds: number }): Promise<void> {
  const { app, db } = parts
  app.lifecycle.startDraining()
  const timer = setTimeout(() => {
    // Past the requests, the shutdown work (the last batched writes, the event relay's last
    // publication, the store's close) may wait on a connection to a store that stalled.
    const requests = app.lifecycle.inFlight
    app.lifecycle.cuttingOff = true
    app.log.warn(requests > 0
      ? `${requests} request${requests === 1 ? '' : 's'} still in flight after ${parts.timeoutSeconds} s; cancelling their statements and closing their connections`
      : `shutdown work still running after ${parts.timeoutSeconds} s, no request in flight (the last batched writes and event publication, the store's connections); cancelling its statements`)
    db.interrupt?.().catch((err: unknown) => app.log.warn({ err }, 'could not cancel the statements in flight'))
    const answering = app.cutOffConnections()
    if (answering > 0) app.log.warn(`${answering} of them ${answering === 1 ? 'was' : 'were'} committing ${answering === 1 ? 'its' : 'their'} changes: ${answering === 1 ? 'its connection is' : 'their connections are'} left to send the answer`)
  }, parts.timeoutSeconds * 1000)
  let deadline: NodeJS.Timeout | undefined
  const overdue = new Promise<'overdue'>((resolve) => {
    deadline = setTimeout(() => resolve('overdue'), parts.timeoutSeconds * 1000 + SHUTDOWN_MARGIN_MS)
  })
  const closed = (async () => {
    try {
      await parts.control?.close()
      await app.close()
    } finally {
      await new Promise<void>((resolve) => (parts.metricsServer ? parts.metricsServer.close(() => resolve()) : resolve()))
      // Under the timer too: the store's close waits for its statements (a batched write stuck
      // behind a lock), which the timer cancels.
      await db.close()
      clearTimeout(timer)
    }
  })()
  try {
    if ((await Promise.race([closed, overdue])) === 'overdue') {
      app.log.warn(`shutdown still not done ${SHUTDOWN_MARGIN_MS / 1000} s after KBIS_SHUTDOWN_TIMEOUT; exiting without waiting for it`)
    }
  } finally {
    clearTimeout(deadline)
    // The log's last lines are out before the caller prints `kbis stopped` on the same output.
    await logWritten(parts.log, 1_000)
  }
}
